"""Synchronous schedules as data.

A :class:`Schedule` is a list of steps; a :class:`Step` is a set of
transfers that happen at the same time. Inside a step every transfer reads
the sender's cell as it was at the start of the step, then writes the
receiver's cell:

- ``copy``: the receiver's cell becomes the message;
- ``reduce``: the receiver's cell becomes its value combined with the message.

Several reduces into one cell in one step are applied in the order listed
(which matters only for rounded floats). Sending never changes the sender's
cell. A transfer whose ``src`` equals ``dst`` is a local copy or reduce
between two cells of one rank and uses no link.

Cells are numbered per rank. In the JSON format of contracts.md each rank
has ``chunks`` cells, one per chunk of the vector; :class:`Layout` says which
cells hold a collective's inputs at the start and its outputs at the end.
Transfers are stored column-wise (numpy arrays per step) so that a schedule
of two million transfers is cheap to build, run and check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

COPY, REDUCE = 0, 1
OP_NAMES = {COPY: "copy", REDUCE: "reduce"}
OP_CODES = {"copy": COPY, "reduce": REDUCE}

INDEX = np.int64  # dtype of ranks and cell numbers (int64: flat cell indices never overflow)
#: what :meth:`Step.of` stores ranks and cell numbers in when they fit: half the
#: memory of INDEX for the 33 million transfers of a 4096-rank ring. Code that
#: multiplies them (flat cell indices) widens to INDEX first.
STEP_INDEX = np.int32
_STEP_INDEX_MAX = np.iinfo(STEP_INDEX).max


def _fits_step_index(a: np.ndarray) -> bool:
    """Whether every value of ``a`` is exactly representable in STEP_INDEX."""
    if a.size == 0 or np.can_cast(a.dtype, STEP_INDEX):
        return True
    if a.dtype.kind not in "iu":
        return False  # floats, bools, objects: let INDEX's cast decide, as before
    return -_STEP_INDEX_MAX <= int(a.min()) and int(a.max()) <= _STEP_INDEX_MAX


def transfer_dict(columns, i: int) -> dict:
    """Transfer ``i`` of anything with src, dst, src_chunk, dst_chunk and op
    arrays, as a plain dict (for messages and JSON)."""
    return {
        "src": int(columns.src[i]),
        "dst": int(columns.dst[i]),
        "src_chunk": int(columns.src_chunk[i]),
        "dst_chunk": int(columns.dst_chunk[i]),
        "op": OP_NAMES[int(columns.op[i])],
    }


@dataclass(frozen=True, eq=False)
class Step:
    """Transfers that happen at once. All arrays have one entry per transfer."""

    src: np.ndarray
    dst: np.ndarray
    src_chunk: np.ndarray
    dst_chunk: np.ndarray
    op: np.ndarray
    phase: str | None = None
    name: str | None = None

    @classmethod
    def of(cls, src, dst, src_chunk, dst_chunk, op, phase: str | None = None, name: str | None = None) -> "Step":
        """Build a step from scalars or arrays (broadcast against each other).

        ``op`` is ``COPY``, ``REDUCE``, or the names ``"copy"``/``"reduce"``.
        """
        if isinstance(op, str):
            op = OP_CODES[op]
        arrays = np.broadcast_arrays(*(np.asarray(a) for a in (src, dst, src_chunk, dst_chunk, op)))
        src, dst, sc, dc, ops = (a.ravel() for a in arrays)
        index = [src, dst, sc, dc]
        kind = STEP_INDEX if all(_fits_step_index(a) for a in index) else INDEX
        src, dst, sc, dc = (np.ascontiguousarray(a, dtype=kind) for a in index)
        return cls(src, dst, sc, dc, np.ascontiguousarray(ops, dtype=np.int8), phase, name)

    @classmethod
    def split(cls, columns, sizes, labels) -> list["Step"]:
        """Consecutive steps out of one block of transfers: ``columns`` are
        the five 1-d arrays of :meth:`of` (src, dst, src_chunk, dst_chunk,
        op) holding the steps one after another, ``sizes[k]`` transfers of
        step k, ``labels[k]`` its (phase, name). The same steps as calling
        :meth:`of` on each slice, with the conversions done once per block
        (the steps' arrays are views of the block's)."""
        src, dst, sc, dc, ops = (np.asarray(a).ravel() for a in columns)
        index = [src, dst, sc, dc]
        if not all(_fits_step_index(a) for a in index) or np.asarray(ops).dtype.kind not in "iub":
            cuts = np.cumsum(sizes)[:-1]
            parts = zip(*(np.split(a, cuts) for a in (src, dst, sc, dc, ops)))
            return [cls.of(*part, phase=phase, name=name) for part, (phase, name) in zip(parts, labels)]
        src, dst, sc, dc = (np.ascontiguousarray(a, dtype=STEP_INDEX) for a in index)
        ops = np.ascontiguousarray(ops, dtype=np.int8)
        steps, start = [], 0
        for size, (phase, name) in zip(np.asarray(sizes).tolist(), labels):
            end = start + size
            steps.append(cls(src[start:end], dst[start:end], sc[start:end], dc[start:end], ops[start:end], phase, name))
            start = end
        return steps

    @classmethod
    def concat(cls, steps: list["Step"], phase: str | None = None, name: str | None = None) -> "Step":
        """One step holding the transfers of several (in the order given)."""
        if not steps:
            return cls.of([], [], [], [], [], phase, name)
        return cls(
            *(np.concatenate([getattr(s, f) for s in steps]) for f in ("src", "dst", "src_chunk", "dst_chunk", "op")),
            phase=phase if phase is not None else steps[0].phase,
            name=name,
        )

    def __len__(self) -> int:
        return len(self.src)

    def transfer(self, i: int) -> dict:
        """Transfer ``i`` as a plain dict (for messages and JSON)."""
        return transfer_dict(self, i)

    @cached_property
    def op_kinds(self) -> tuple[bool, bool]:
        """(whether any transfer reduces, whether any copies)."""
        reduces = int(np.count_nonzero(self.op))  # any non-copy code reduces, as the interpreter reads it
        return reduces > 0, reduces < len(self.op)

    @cached_property
    def writes_once(self) -> bool:
        """Whether no two transfers write one cell (then :attr:`rounds` is
        one group, every transfer)."""
        if len(self.src) < 2:
            return True
        if int(self.dst.min()) >= 0 and int(np.bincount(self.dst).max()) <= 1:
            return True  # every rank receives once (a ring's steps): no sort
        key = np.sort(self.dst.astype(INDEX) * (int(self.dst_chunk.max()) + 1) + self.dst_chunk)
        return not bool(np.any(key[1:] == key[:-1]))

    @cached_property
    def rounds(self) -> list[np.ndarray]:
        """Transfer positions grouped so that no two in a group write one cell.

        Group k holds the k-th write into each target cell, in listed order;
        applying the groups one after another applies every cell's writes in
        the order the step lists them.
        """
        n = len(self.src)
        if n == 0:
            return []
        if self.writes_once:
            return [np.arange(n)]  # the common case: every target written once
        key = self.dst.astype(INDEX) * (int(self.dst_chunk.max()) + 1) + self.dst_chunk
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        starts = np.r_[0, np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1]
        first = np.repeat(starts, np.diff(np.r_[starts, n]))
        occurrence = np.empty(n, dtype=np.int64)
        occurrence[order] = np.arange(n) - first
        by_round = np.argsort(occurrence, kind="stable")  # positions in listed order within each round
        return np.split(by_round, np.cumsum(np.bincount(occurrence))[:-1])

    def phase_of(self, i: int) -> str:
        """The phase transfer ``i`` belongs to: the step's, else its op's.

        Without an explicit phase, reduces form the reduce phase and copies
        the gather phase, which is how a ring all-reduce splits.
        """
        if self.phase is not None:
            return self.phase
        return "reduce" if self.op[i] == REDUCE else "copy"


@dataclass(frozen=True, eq=False)
class Layout:
    """Where a collective's data lives in the ranks' cells.

    ``inputs[r][k]`` is the cell holding rank r's input element k at the
    start; ``outputs[r][k]`` the cell that must hold rank r's output element
    k at the end (empty where a rank has no output, as non-roots of reduce).
    Every other cell starts uninitialised. ``cell_names`` optionally maps a
    cell number to a display name such as ``"o[3]"``; by default cell c is
    ``"chunk c"``.
    """

    cells: int
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]
    cell_names: tuple[str, ...] | None = None

    def cell_name(self, cell: int) -> str:
        return self.cell_names[cell] if self.cell_names else f"chunk {cell}"


@dataclass(frozen=True, eq=False)
class Schedule:
    """A synchronous algorithm for one collective on a fixed number of ranks.

    ``chunks`` is the number of equal chunks the vector is cut into (and,
    with the default layout, the number of cells per rank). ``owner`` (for
    reduce_scatter) lists, per rank, the chunks it must end with; by default
    rank r owns block r of chunks/ranks chunks. A declared owner must give
    every chunk to exactly one rank, one block of consecutive chunks per rank
    (:func:`collspec.models.layout.owner_problem`), else using the schedule
    raises ScheduleError. ``link_capacity`` is how many
    chunks one directed link carries in one step. ``layout`` defaults to
    :func:`collspec.models.layout.default_layout`.
    """

    collective: str
    ranks: int
    chunks: int
    steps: tuple[Step, ...]
    name: str = ""
    owner: tuple[tuple[int, ...], ...] | None = None
    root: int = 0
    link_capacity: int = 1
    layout_override: Layout | None = field(default=None, repr=False)
    meta: dict = field(default_factory=dict, repr=False)

    @cached_property
    def layout(self) -> Layout:
        if self.layout_override is not None:
            return self.layout_override
        from .layout import default_layout

        return default_layout(self)

    @property
    def transfers(self) -> int:
        return sum(len(s) for s in self.steps)

    def label(self) -> str:
        return self.name or f"{self.collective} schedule on {self.ranks} rank{'s' * (self.ranks != 1)}"
