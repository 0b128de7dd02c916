"""How rank processes report to the coordinator: one JSON-lines file per rank.

Files work the same under every launcher (the coordinator's own children,
mpiexec's, torchrun's) and survive the death of the writer. A line is
written with one ``write`` on a file opened for appending, and a reader
takes only complete lines.

=========  ==========================================================
event      meaning
=========  ==========================================================
ready      set up: process group initialised, backend instantiated
start      case ``case`` begins
done       case ``case`` ended with ``status`` ok, unsupported, n/a or
           error (``reason`` says why: :mod:`.rank`); for ok its buffers are in
           :func:`buffers_path`, for a timing run ``seconds`` is the time
           of one call
finished   every case ran; the process is about to exit
fatal      set-up failed (``usage`` true: the backend could not be loaded)
exit       written by the guard: the rank process ended with ``code``
           or ``signal``
=========  ==========================================================
"""

from __future__ import annotations

import json
import os
import signal
import time


def path(launch_dir: str, rank: int) -> str:
    return os.path.join(launch_dir, f"events.{rank}")


def buffers_path(launch_dir: str, case_index: int, rank: int) -> str:
    return os.path.join(launch_dir, f"case{case_index}.rank{rank}.bin")


class Writer:
    """Appends events to one rank's file."""

    def __init__(self, launch_dir: str, rank: int):
        self._fd = os.open(path(launch_dir, rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, event: str, **fields) -> None:
        line = json.dumps({"e": event, "t": time.time(), **fields}) + "\n"
        os.write(self._fd, line.encode())


class Reader:
    """Reads the new complete events of every rank's file."""

    def __init__(self, launch_dir: str, world: int):
        self._paths = [path(launch_dir, r) for r in range(world)]
        self._offsets = [0] * world
        self._partial = [b""] * world

    def poll(self) -> list[tuple[int, dict]]:
        out = []
        for rank, file in enumerate(self._paths):
            try:
                with open(file, "rb") as handle:
                    handle.seek(self._offsets[rank])
                    data = handle.read()
            except FileNotFoundError:
                continue
            self._offsets[rank] += len(data)
            *lines, self._partial[rank] = (self._partial[rank] + data).split(b"\n")
            out.extend((rank, json.loads(line)) for line in lines if line.strip())
        return out


def record_exit(launch_dir: str, rank: int, returncode: int) -> int:
    """Write the ``exit`` event of a rank process (``returncode`` < 0: killed by that signal).

    Returns the status a shell would report (128 + signal for a signal).
    """
    if returncode < 0:
        Writer(launch_dir, rank)("exit", code=None, signal=signal.Signals(-returncode).name)
        return 128 - returncode
    Writer(launch_dir, rank)("exit", code=returncode, signal=None)
    return returncode
