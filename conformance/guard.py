"""Supervise one rank: run it as a child process and record how it ended.

``python -m collspec.conformance.guard PLAN LAUNCH_DIR START`` is what every
launcher starts, once per rank. It learns its rank from the launcher's
variables (torch's ``RANK``/``WORLD_SIZE``, Open MPI's ``OMPI_COMM_WORLD_*``,
MPICH's ``PMI_*``), runs the rank process with the torch variables set, sends
its output to ``LAUNCH_DIR/rank<r>.log``, forwards SIGTERM and SIGINT, and
writes an ``exit`` event with the child's exit code or signal. So a dead rank
is named with its signal under every launcher, not only the local one. Like
the zygote it is a child subreaper and ends what the rank left behind before
it exits (:func:`.procs.end_orphans`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from . import events
from .procs import become_subreaper, die_with_parent, end_orphans

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
LOCAL_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")


def _first(names: tuple[str, ...], default: str | None = None) -> str:
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    if default is None:
        raise SystemExit(f"collspec guard: none of {', '.join(names)} is set; start me through a launcher")
    return default


def main(argv: list[str]) -> int:
    plan, launch_dir, start = argv
    rank, world = int(_first(RANK_VARIABLES)), int(_first(SIZE_VARIABLES))
    die_with_parent()
    become_subreaper()
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=_first(LOCAL_VARIABLES, str(rank)))
    # hydra (MPICH, Intel MPI) hands each rank its PMI connection as an open descriptor
    inherited = tuple(int(os.environ[name]) for name in ("COLLSPEC_STORE_FD", "PMI_FD") if os.environ.get(name, "").isdigit())
    with open(os.path.join(launch_dir, f"rank{rank}.log"), "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "collspec.conformance.rank", plan, launch_dir, start],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=inherited,
        )
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda received, _frame: child.send_signal(received))
    code = events.record_exit(launch_dir, rank, child.wait())
    end_orphans()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
