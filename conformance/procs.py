"""Finding and ending every process of a run, however it was started.

Every process a run starts carries ``COLLSPEC_RUN_ID=<id>`` in its
environment, and so do their children (mpiexec's daemons and ranks,
torchrun's workers, a backend's helpers) unless they scrub it. Ending a run
kills every process with that tag, so none outlives it even when a rank
hangs, a launcher dies first or a process changes its process group. Rank
processes also ask the kernel to kill them when their parent dies.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

TAG = "COLLSPEC_RUN_ID"


def tagged(run_id: str | None) -> list[int]:
    """Live processes carrying ``run_id``, or any run's tag when it is None
    (zombies have no environment and are not listed)."""
    needle = f"{TAG}={run_id}".encode() + b"\0" if run_id is not None else f"{TAG}=".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def kill_tagged(run_id: str, patience: float = 10.0) -> list[int]:
    """SIGKILL every process of the run until none is left; returns those still alive after ``patience`` s."""
    deadline = time.monotonic() + patience
    while True:
        left = tagged(run_id)
        if not left or time.monotonic() > deadline:
            return left
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent ends (prctl PR_SET_PDEATHSIG)."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the run id sweep still applies
        return
    if os.getppid() != parent:
        os._exit(1)
