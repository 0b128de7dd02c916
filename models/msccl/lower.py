"""Turn a concurrent MSCCL program into a synchronous models
:class:`~collspec.models.schedule.Schedule`, so that the one interpreter and
the one checker of :mod:`collspec.models` compute what it leaves in every
output buffer.

Order. Steps run level by level (:mod:`.order`): a level holds steps that
are unordered among themselves, after every step they wait for. Each level
becomes two synchronous steps, A then B. A race-free program computes the
same values in every order consistent with happens-before, so this one is
as good as any; races are reported on their own (:mod:`.races`).

Messages. What a send sends is its source *when the send runs*; the
receiver uses it when the receive runs, later, and the sender may have
overwritten its buffer in between. So every received chunk gets a cell of
its own on the receiving GPU (the message cells of :mod:`.cells`, one per
chunk a GPU receives): a send copies its source into the receiver's
message cell over the link, and the receive reads that cell.

======  ==========================================  =========================
type    A                                           B
======  ==========================================  =========================
s       src -> peer's message (copy, over the link)
r       message -> dst (copy)
rcs     message -> dst (copy); message -> peer's
        message (copy, over the link)
rrs     src into message (reduce)                   message -> peer's message
rrc     src into message (reduce)                   message -> dst (copy)
rrcs    src into message (reduce)                   message -> dst (copy);
                                                    message -> peer's message
cpy     src -> dst (copy)
re      src into dst (reduce)
nop     (nothing)
res, ra (nothing: it adds tensors outside the collective; reported)
======  ==========================================  =========================

Only sends cross a link, one transfer per chunk, so the checker's traffic
figures count every chunk once per hop. ``cnt`` > 1 moves consecutive
cells. A send whose receive is missing moves nothing (it is reported as
``unmatched``); when the counts of a pair differ, the smaller count moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..schedule import COPY, REDUCE, Schedule, Step
from .cells import CellMap, cell_map
from .order import Order
from .program import RECEIVES, TYPE_CODES, Program, spread

A, B = 0, 1


@dataclass
class Lowered:
    """The schedule, and for every transfer the XML step it comes from."""

    schedule: Schedule
    cells: CellMap
    sync_step: np.ndarray  # per transfer: its synchronous step
    dst_rank: np.ndarray
    dst_cell: np.ndarray
    origin: np.ndarray  # per transfer: the XML step

    def writer(self, sync_step: int, rank: int, cell: int) -> int | None:
        """The XML step behind the transfer that wrote ``cell`` of ``rank`` in
        ``sync_step`` (the last one listed if several did)."""
        keys, order = self._writers
        want = self._key(np.int64(sync_step), np.int64(rank), np.int64(cell))
        at = int(np.searchsorted(keys, want, side="right")) - 1
        return int(self.origin[order[at]]) if at >= 0 and keys[at] == want else None

    def _key(self, sync_step, rank, cell):
        ranks, cells = np.int64(self.schedule.ranks), np.int64(self.cells.cells)
        return (sync_step * ranks + rank) * cells + cell

    @cached_property
    def _writers(self) -> tuple[np.ndarray, np.ndarray]:
        keys = self._key(self.sync_step.astype(np.int64), self.dst_rank, self.dst_cell)
        order = np.argsort(keys, kind="stable")
        return keys[order], order


def message_cells(p: Program) -> tuple[np.ndarray, int]:
    """Per receive-type step, the offset of its first message cell among its
    GPU's message cells; and the most message cells any GPU needs."""
    receives = RECEIVES[p.type]
    count = np.where(receives, p.cnt, 0)
    total = np.bincount(p.gpu, weights=count, minlength=p.ngpus)[: p.ngpus].astype(np.int64) if p.steps else np.zeros(p.ngpus, np.int64)
    running = np.cumsum(count) - count  # steps are GPU-major
    gpu_start = np.r_[0, np.cumsum(total)[:-1]]
    offset = running - gpu_start[p.gpu] if p.steps else running
    return np.where(receives, offset, -1), int(total.max()) if total.size else 0


def lower(order: Order, mode: str) -> Lowered:
    """The synchronous schedule of ``order.program`` in ``mode`` (see module text)."""
    p = order.program
    offset, needed = message_cells(p)
    cells = cell_map(p, mode, needed)
    codes = TYPE_CODES
    parts: list[tuple] = []  # (steps, phase, src rank, src cell, dst rank, dst cell, op)

    def expand(kinds: tuple[str, ...], count=None):
        steps = np.flatnonzero(np.isin(p.type, [codes[k] for k in kinds]) & (order.level >= 0))
        item, j = spread(p.cnt[steps] if count is None else count(steps))
        return steps[item], j

    def add(steps, phase, src_rank, src_cell, dst_rank, dst_cell, op):
        parts.append((steps, phase, src_rank, src_cell, dst_rank, dst_cell, np.full(steps.size, op, dtype=np.int8)))

    g = p.gpu
    local = cells.cell
    message = lambda steps, j: cells.message_base + offset[steps] + j  # noqa: E731 - the receiving step's cells

    def peer_message(steps, j):
        receiver = order.send_match[steps]
        return g[receiver], cells.message_base + offset[receiver] + j

    def matched_count(steps):
        receiver = order.send_match[steps]
        return np.where(receiver >= 0, np.minimum(p.cnt[steps], p.cnt[np.maximum(receiver, 0)]), 0)

    # sends over the link
    s, j = expand(("s",), matched_count)
    add(s, A, g[s], local(g[s], p.src_buf[s], p.src_off[s] + j), *peer_message(s, j), COPY)
    for kind, phase in (("rcs", A), ("rrs", B), ("rrcs", B)):
        s, j = expand((kind,), matched_count)
        add(s, phase, g[s], message(s, j), *peer_message(s, j), COPY)
    # receives: reduce the local source into the message, then store it
    s, j = expand(("rrs", "rrc", "rrcs"))
    add(s, A, g[s], local(g[s], p.src_buf[s], p.src_off[s] + j), g[s], message(s, j), REDUCE)
    s, j = expand(("r", "rcs"))
    add(s, A, g[s], message(s, j), g[s], local(g[s], p.dst_buf[s], p.dst_off[s] + j), COPY)
    s, j = expand(("rrc", "rrcs"))
    add(s, B, g[s], message(s, j), g[s], local(g[s], p.dst_buf[s], p.dst_off[s] + j), COPY)
    # local steps
    for kind, op in (("cpy", COPY), ("re", REDUCE)):
        s, j = expand((kind,))
        add(s, A, g[s], local(g[s], p.src_buf[s], p.src_off[s] + j), g[s], local(g[s], p.dst_buf[s], p.dst_off[s] + j), op)

    origin = np.concatenate([x[0] for x in parts]).astype(np.int64)
    phase = np.concatenate([np.full(x[0].size, x[1]) for x in parts]).astype(np.int64)
    src_rank, src_cell, dst_rank, dst_cell = (np.concatenate([x[k] for x in parts]).astype(np.int64) for k in (2, 3, 4, 5))
    op = np.concatenate([x[6] for x in parts])
    slot = order.level[origin] * 2 + phase
    used, sync = np.unique(slot, return_inverse=True)  # drop empty synchronous steps
    by_step = np.argsort(sync, kind="stable")
    bounds = np.searchsorted(sync[by_step], np.arange(len(used) + 1))
    steps = []
    for k in range(len(used)):
        idx = by_step[bounds[k] : bounds[k + 1]]
        level, ph = divmod(int(used[k]), 2)
        steps.append(Step(src_rank[idx].astype(np.int32), dst_rank[idx].astype(np.int32), src_cell[idx].astype(np.int32), dst_cell[idx].astype(np.int32), op[idx], name=f"level {level} {'AB'[ph]}"))
    schedule = Schedule(
        collective=p.collective,
        ranks=p.ngpus,
        chunks=p.chunks,
        steps=tuple(steps),
        name=f"{p.name or p.path} ({mode})",
        root=p.root,
        layout_override=cells.layout(),
        meta={"msccl": p.path, "mode": mode},
    )
    return Lowered(schedule, cells, sync, dst_rank, dst_cell, origin)


def schedule_of(program: Program) -> Schedule:
    """The synchronous schedule of a program that runs to completion, in the
    first mode it declares (in place before out of place): what
    ``collspec.commands.check.load_schedule`` returns for an .xml file."""
    from .cells import IN_PLACE, OUT_OF_PLACE
    from .order import analyse
    from .parse import MscclFormatError

    order = analyse(program)
    if not order.complete:
        raise MscclFormatError(f"{program.path}: some steps never run (a deadlock or an unmatched receive); run 'collspec check {program.path}' to see which")
    return lower(order, IN_PLACE if program.inplace else OUT_OF_PLACE).schedule
