"""What a run's processes leave in shared memory, and removing it: by ownership, never by name.

Two mechanisms, both per run:

- **A private folder.** Every process of the run gets ``TMPDIR=<run folder>/tmp``
  (:func:`variables`), and the MPI libraries are told to put their files
  there through their own settings: Open MPI's shared-memory segments
  (``OMPI_MCA_btl_sm_backing_directory``, otherwise ``sm_segment.*`` files of
  16 MiB in /dev/shm) and its PRRTE/PMIx session directories (under
  ``TMPDIR``); MPICH's and Intel MPI's hydra files (``hydra_hwloc_xmlfile_*``,
  under ``TMPDIR``). The folder goes with the run's folder.
- **What appeared and whose it is.** What a library cannot be told to put
  elsewhere (MPICH's ``mpich_shm_*``, made with ``shm_open``, which always
  means /dev/shm) is found by :class:`Footprint`: while the run lasts the
  coordinator watches /dev/shm (inotify) and, when an entry appears, when the
  ranks get ready and before any process of the run is killed, reads the
  maps and open files of the run's processes (``/proc/PID/maps``,
  ``/proc/PID/fd``). An entry of /dev/shm that did not exist when the run
  began and that one of them mapped or opened is the run's, and is removed
  when the run ends, if it is still the same file (same inode). Another
  program's segments are never touched, whatever their names.

Assumed: a process of the run that creates an entry in /dev/shm and dies
before anything of the run maps or opens it is not seen (every MPI library
here maps its segments for the whole life of the ranks).
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil

SHM = "/dev/shm"
_IN_CREATE, _IN_MOVED_TO, _IN_NONBLOCK, _IN_CLOEXEC = 0x100, 0x80, 0o4000, 0o2000000


def variables(tmp: str, library: str | None) -> dict[str, str]:
    """What points a run's processes (and its MPI library) at its private folder ``tmp``."""
    found = {"TMPDIR": tmp}
    if library == "openmpi":
        found["OMPI_MCA_btl_sm_backing_directory"] = tmp
    return found


def _entries() -> dict[str, int]:
    found = {}
    try:
        with os.scandir(SHM) as listing:
            for entry in listing:
                try:
                    found[entry.name] = entry.inode()
                except OSError:
                    continue
    except OSError:
        pass
    return found


class Footprint:
    """The entries of /dev/shm one run's processes created (see the module text)."""

    def __init__(self, run_dir: str):
        self._mine = os.path.basename(run_dir) if os.path.dirname(os.path.abspath(run_dir)) == SHM else None
        self._before = _entries()
        self.owned: dict[str, int] = {}  # name below /dev/shm -> inode
        self._inotify = self._watch()

    @staticmethod
    def _watch() -> int | None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        if libc.inotify_add_watch(fd, SHM.encode(), _IN_CREATE | _IN_MOVED_TO) < 0:
            os.close(fd)
            return None
        return fd

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as an entry appears in /dev/shm
        (without inotify: after ``seconds``, always True)."""
        if self._inotify is None:
            select.select([], [], [], seconds)
            return True
        ready, _, _ = select.select([self._inotify], [], [], seconds)
        appeared = False
        while ready:
            try:
                data = os.read(self._inotify, 65536)
            except BlockingIOError:
                break
            appeared = appeared or bool(data)
        return appeared

    def observe(self, pids) -> None:
        """Record the new entries of /dev/shm that the processes ``pids`` map or hold open."""
        for pid in pids:
            for path in touched(pid):
                name = os.path.relpath(path, SHM).split(os.sep, 1)[0]
                if name in (os.curdir, os.pardir, self._mine) or name in self.owned:
                    continue
                try:
                    inode = os.lstat(os.path.join(SHM, name)).st_ino
                except OSError:
                    continue
                if self._before.get(name) != inode:
                    self.owned[name] = inode

    def remove(self) -> list[str]:
        """Remove what the run created (still the same inode); returns the names removed."""
        removed = []
        for name, inode in sorted(self.owned.items()):
            path = os.path.join(SHM, name)
            try:
                status = os.lstat(path)
            except OSError:
                continue
            if status.st_ino != inode:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    continue
            removed.append(name)
        return removed

    def close(self) -> None:
        if self._inotify is not None:
            os.close(self._inotify)
            self._inotify = None


def touched(pid: int) -> set[str]:
    """Paths below /dev/shm that process ``pid`` maps or holds open (not the deleted ones)."""
    found = set()
    prefix = SHM + os.sep
    try:
        with open(f"/proc/{pid}/maps", "rb") as handle:
            for line in handle:
                at = line.find(prefix.encode())
                if at >= 0 and not line.rstrip().endswith(b"(deleted)"):
                    found.add(line[at:].rstrip(b"\n").decode(errors="replace"))
    except OSError:
        pass
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(prefix) and not target.endswith(" (deleted)"):
                found.add(target)
    except OSError:
        pass
    return found
