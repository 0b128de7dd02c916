"""Finding and ending every process of a run, however it was started.

A process belongs to a run when any of these holds:

- it carries ``COLLSPEC_RUN_ID=<id>`` in its environment: every process a
  run starts has it, and so do their children (mpiexec's daemons and ranks,
  torchrun's workers, a backend's helpers) unless they scrub it;
- it descends from a process the run started (:meth:`Run.add`), or is in the
  session of one (each launcher starts in a session of its own);
- it was orphaned by one of those: the coordinator (during :class:`Run`),
  the zygote and every guard are child subreapers (``PR_SET_CHILD_SUBREAPER``),
  so a process whose parent ended is re-parented to them, never to init,
  whatever it did to its environment or its session.

Ending a run (:meth:`Run.end`) stops every such process with SIGSTOP first,
so none can fork away while the others are found, then kills them all with
SIGKILL and reaps the orphans. Rank processes also ask the kernel to kill
them when their parent dies (:func:`die_with_parent`). The zygote and the
guards end their own orphans before they exit (:func:`end_orphans`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Callable, Iterable

TAG = "COLLSPEC_RUN_ID"
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 1, 36, 37


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


def _stats():
    """(pid, the fields of /proc/PID/stat after the command name: state,
    parent pid, process group, session, ...) of every process still listed."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                yield entry, handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue


def table() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, session id)} of every live process (zombies left out)."""
    found = {}
    for entry, fields in _stats():
        if fields[0] not in (b"Z", b"X"):  # state, then ppid, pgrp, session
            found[int(entry)] = (int(fields[1]), int(fields[3]))
    return found


def descendants(roots: Iterable[int], processes: dict[int, tuple[int, int]]) -> set[int]:
    """The live processes below ``roots`` (the roots included when alive)."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), [r for r in roots if r in processes]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def end(find: Callable[[], set[int]], patience: float = 10.0) -> list[int]:
    """Stop, then kill, every process ``find`` returns, until it returns none.

    SIGSTOP comes first and ``find`` is asked again until it finds nothing
    new, so a process cannot fork a child that escapes between the listing
    and the kill. Returns those still alive after ``patience`` s.
    """
    deadline = time.monotonic() + patience
    while True:
        left = find() - {os.getpid()}
        if not left or time.monotonic() > deadline:
            return sorted(left)
        stopped: set[int] = set()
        while left - stopped and time.monotonic() < deadline:
            for pid in left - stopped:
                _send(pid, signal.SIGSTOP)
            stopped |= left
            left = find() - {os.getpid()}
        for pid in stopped | left:
            _send(pid, signal.SIGKILL)
        time.sleep(0.02)


def _send(pid: int, number: signal.Signals) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tagged(run_id: str, patience: float = 10.0) -> list[int]:
    """SIGKILL every process carrying the run's tag; returns those still alive after ``patience`` s."""
    return end(lambda: set(tagged(run_id)), patience)


def _prctl(option: int, value: int = 0) -> int | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    if option == PR_GET_CHILD_SUBREAPER:
        flag = ctypes.c_int(0)
        return flag.value if libc.prctl(option, ctypes.byref(flag), 0, 0, 0) == 0 else None
    return libc.prctl(option, value, 0, 0, 0)


def become_subreaper() -> bool:
    """Make this process the one its descendants' orphans are re-parented to (Linux 3.4+)."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1) == 0


def _reap(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def end_orphans() -> None:
    """For a subreaper about to exit: end every process left below it, and reap them."""
    me = os.getpid()
    adopted: set[int] = set()

    def below() -> set[int]:
        processes = table()
        adopted.update(p for p, (parent, _) in processes.items() if parent == me)
        return descendants([me], processes) - {me}

    end(below)
    _reap(adopted)
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


class Run:
    """The processes of one run (see the module text); a context manager that
    makes the coordinator a child subreaper while the run lasts."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.roots: set[int] = set()
        self._before: set[int] = set()
        self._previous: int | None = None

    def __enter__(self) -> "Run":
        me = os.getpid()
        self._before = {p for p, (parent, _) in table().items() if parent == me}
        self._previous = _prctl(PR_GET_CHILD_SUBREAPER)
        if self._previous == 0:
            become_subreaper()
        return self

    def __exit__(self, *exc) -> None:
        self.end()
        if self._previous == 0:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)

    def add(self, pid: int) -> None:
        """A process the run started, in a session of its own."""
        self.roots.add(pid)

    def release(self, pid: int) -> None:
        """A process the run started has been ended and reaped: its id may be reused by another."""
        self.roots.discard(pid)

    def members(self) -> set[int]:
        """Every live process of the run (see the module text)."""
        processes = table()
        me = os.getpid()
        adopted = {p for p, (parent, _) in processes.items() if parent == me and p not in self._before | self.roots}
        sessions = {p for p, (_, session) in processes.items() if session in self.roots}
        return (set(tagged(self.run_id)) | descendants(self.roots | adopted, processes) | sessions) - {me}

    def end(self, patience: float = 10.0) -> list[int]:
        """Kill every process of the run and reap the orphans it adopted; returns those that survived."""
        me = os.getpid()
        left = end(self.members, patience)
        _reap_zombies(me, self._before | self.roots)
        return left


def _reap_zombies(parent: int, keep: set[int]) -> None:
    """Reap this process's zombie children other than ``keep`` (those have their own waiters)."""
    for entry, fields in _stats():
        if int(entry) not in keep and fields[0] == b"Z" and int(fields[1]) == parent:
            _reap([int(entry)])


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent ends (prctl PR_SET_PDEATHSIG)."""
    parent = os.getppid()
    if _prctl(PR_SET_PDEATHSIG, signal.SIGKILL) is None:  # not Linux: the run's sweep still applies
        return
    if os.getppid() != parent:
        os._exit(1)
