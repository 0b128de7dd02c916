"""The memory ceiling, and the up-front refusal of work that would pass it.

``collspec check`` and ``collspec prove --schedule`` take
``--max-memory SIZE`` (default: half of the machine's memory, or of the
cgroup's limit when lower). Before a large allocation the work is
estimated from the input's size (figures measured on collspec itself:
docs/limits.md) and refused with exit status 2 when the estimate is over
the ceiling, naming the estimate, the ceiling and what drove it. Running
out of memory anyway is exit 2 too, never a traceback.
"""

from __future__ import annotations

import os

from .spec.errors import CollspecError

#: the default ceiling, as a fraction of the machine's (or cgroup's) memory
DEFAULT_FRACTION = 0.5

# Measured costs (docs/limits.md; bench/hostile_inputs.py and bench/limits.py)
#: bytes of parsed JSON per byte of text, per '{' and per '[' and per '"'
JSON_BYTES_PER_BYTE, JSON_BYTES_PER_OBJECT, JSON_BYTES_PER_LIST, JSON_BYTES_PER_QUOTE = 8, 240, 64, 25

#: checker bytes per cell (ranks x cells: fingerprint state, expected outputs, link keys)
CHECK_BYTES_PER_CELL = 128
#: checker bytes per transfer (columns, link-repeat key, arrivals)
CHECK_BYTES_PER_TRANSFER = 64

_ceiling: int | None = None


class LimitError(CollspecError):
    """Work refused up front: its estimate is over a limit (exit 2)."""


def machine_memory() -> int:
    """Bytes of memory of this machine, or of the cgroup when it has less."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def ceiling() -> int:
    """The memory ceiling in bytes (``--max-memory`` or the default)."""
    return _ceiling if _ceiling is not None else int(machine_memory() * DEFAULT_FRACTION)


def add_options(parser) -> None:
    parser.add_argument(
        "--max-memory", metavar="SIZE",
        help=f"refuse (exit 2) work estimated to need more memory than SIZE (e.g. 8G; default {int(DEFAULT_FRACTION * 100)}%% of the machine's memory)",
    )


def configure(args) -> None:
    """Set the ceiling from ``--max-memory`` (absent: the default)."""
    global _ceiling
    text = getattr(args, "max_memory", None)
    if text is None:
        _ceiling = None
        return
    from .units import parse_size

    value = parse_size(text)
    if value < 1 << 20:
        raise CollspecError(f"--max-memory {text}: give at least 1M")
    _ceiling = value


def memory_hint() -> str:
    return f"the memory ceiling is {_size(ceiling())} (--max-memory); check a smaller instance or raise it"


def _size(nbytes: float) -> str:
    from .units import format_size

    return format_size(int(nbytes))


def admit(subject: str, estimate: float, what: str) -> None:
    """Refuse (LimitError) when ``estimate`` bytes are over the ceiling;
    ``what`` says what the estimate counts."""
    limit = ceiling()
    if estimate > limit:
        raise LimitError(f"{subject}: {what} needs about {_size(estimate)}, over the {_size(limit)} memory ceiling (--max-memory); check a smaller instance or raise it")


def file_bytes() -> int:
    """The most bytes an input file may have: the format limit, and no more
    than the ceiling (the text itself is held while it is read)."""
    from .inputs import MAX_FILE_BYTES

    return min(MAX_FILE_BYTES, ceiling())


def json_bytes(data: bytes) -> int:
    """An upper estimate of the memory the parsed JSON of ``data`` takes."""
    return (JSON_BYTES_PER_BYTE * len(data) + JSON_BYTES_PER_OBJECT * data.count(b"{")
            + JSON_BYTES_PER_LIST * data.count(b"[") + JSON_BYTES_PER_QUOTE * data.count(b'"'))


def admit_check(schedule, subject: str) -> None:
    """Refuse checking ``schedule`` when its estimate is over the ceiling."""
    cells = schedule.ranks * int(schedule.layout.cells)
    estimate = CHECK_BYTES_PER_CELL * cells + CHECK_BYTES_PER_TRANSFER * schedule.transfers
    admit(subject, estimate, f"checking {schedule.ranks} ranks x {schedule.layout.cells} cells and {schedule.transfers} transfers")


def admit_proof(schedule, subject: str) -> None:
    """Refuse a bounded proof of ``schedule`` over the proofs' work limit:
    every output cell's term and every transfer, each over up to ranks inputs."""
    from .proofs.schedules import MAX_WORK  # the proofs' own limit, on transfers x ranks there

    work = (schedule.transfers + schedule.ranks * int(schedule.layout.cells)) * max(schedule.ranks, 1)
    if work > MAX_WORK:
        raise LimitError(
            f"{subject}: a bounded proof of {schedule.ranks} ranks x {schedule.layout.cells} cells and {schedule.transfers} transfers "
            f"needs (transfers + cells) x ranks = {work} terms, over the {MAX_WORK} limit; 'collspec check' handles it"
        )
    admit_check(schedule, subject)
