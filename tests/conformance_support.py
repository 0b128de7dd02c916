"""Helpers for the conformance tests that start rank processes."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from collspec.conformance.footprint import SHM, touched
from collspec.conformance.procs import table, tagged

ZOO = Path(__file__).resolve().parent / "zoo_backends"


def leftover_processes() -> list[str]:
    """Command lines of live processes started by any conformance run (tagged COLLSPEC_RUN_ID)
    of this interpreter (runs of other checkouts on the same machine are theirs)."""
    found = []
    mine = os.path.dirname(sys.executable) + os.sep
    for pid in tagged(None):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue  # it ended meanwhile
        if argv[0].decode(errors="replace").startswith(mine):
            found.append(f"{pid}: " + b" ".join(argv).decode(errors="replace"))
    return found


def by_kind(conformance) -> dict[str, list]:
    """The run's violations grouped by kind."""
    out: dict[str, list] = {}
    for violation in conformance.violations:
        out.setdefault(violation.kind, []).append(violation)
    return out


#: How the MPI libraries name what they write to the temporary folder when not told
#: otherwise (hydra's hwloc files, PRRTE's and PMIx's session directories, Open MPI's and
#: Intel MPI's files). Only these are compared there: a shared machine's /tmp holds
#: every other program's files too. /dev/shm is compared whole.
LIBRARY_TMP = ("hydra", "prte", "pmix", "ompi", "openmpi", "mpich", "impi", "sm_segment", "mpi_")


def shared_entries() -> set[str]:
    """The entries of /dev/shm, and the MPI libraries' entries of the temporary folder ("tmp/NAME")."""
    found = set(os.listdir(SHM)) if os.path.isdir(SHM) else set()
    found |= {f"tmp/{name}" for name in os.listdir(tempfile.gettempdir()) if name.startswith(LIBRARY_TMP)}
    return found


def _in_use() -> set[str]:
    """The entries of /dev/shm some live process maps or holds open (another program's running job)."""
    used = set()
    for pid in table():
        for path in touched(pid):
            used.add(os.path.relpath(path, SHM).split(os.sep, 1)[0])
    return used


def left_behind(before: set[str], patience: float = 10.0) -> list[str]:
    """What appeared since ``before`` and is still there, unused by any process, after up to ``patience`` s.

    A run's leftovers stay; a concurrent program's entries are in use or go away
    (this check runs on machines shared with other jobs)."""
    deadline = time.monotonic() + patience
    while True:
        new = sorted(shared_entries() - before - _in_use())
        if not new or time.monotonic() > deadline:
            return new
        time.sleep(0.5)


def session_members(session: int) -> list[int]:
    """Live processes in session ``session``."""
    return sorted(pid for pid, (_, sid) in table().items() if sid == session)


def helper_alive(pid: int) -> bool:
    """Whether ``pid`` is still a zoo backend's sleeping helper (not a zombie, not a reused id)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"time.sleep(600)" in handle.read()
    except (OSError, IndexError):
        return False
