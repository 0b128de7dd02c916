"""The local launcher's parent of all ranks: import once, fork N times.

Importing torch costs seconds of CPU per process; four ranks importing it
at once on two cores take over ten seconds. ``python -m
collspec.conformance.zygote PLAN LAUNCH_DIR START WORLD`` imports torch and
the harness once, before any thread or process group exists, then forks one
child per rank. Each child sets ``RANK``, sends its output to
``LAUNCH_DIR/rank<r>.log`` and runs :func:`collspec.conformance.rank.main`;
the zygote waits for them and writes each one's ``exit`` event, as
:mod:`.guard` does for the other launchers. It is a child subreaper: what a
rank started and left behind (a helper that scrubbed its environment and
started a session of its own) becomes its child, and is ended before it
exits (:func:`.procs.end_orphans`).
"""

from __future__ import annotations

import os
import sys

import torch.distributed  # noqa: F401  - the point: imported once, before the fork

from . import events, rank
from .procs import become_subreaper, die_with_parent, end_orphans


def _child(number: int, argv: list[str], launch_dir: str) -> None:
    os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(number)
    store_fd = os.environ.get("COLLSPEC_STORE_FD")
    if store_fd and number != 0:
        os.close(int(store_fd))
    log = os.open(os.path.join(launch_dir, f"rank{number}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        code = rank.main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str]) -> int:
    plan, launch_dir, start, world = argv
    die_with_parent()
    become_subreaper()
    children = {}
    for number in range(int(world)):
        pid = os.fork()
        if pid == 0:
            _child(number, [plan, launch_dir, start], launch_dir)
        children[pid] = number
    worst = 0
    while children:
        pid, status = os.wait()
        if pid in children:
            code = events.record_exit(launch_dir, children.pop(pid), os.waitstatus_to_exitcode(status))
            worst = worst or code
    end_orphans()
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
