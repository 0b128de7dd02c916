"""Turn a concurrent plan into a synchronous models
:class:`~collspec.models.schedule.Schedule`, so that the one interpreter and
the one checker of :mod:`collspec.models` compute what it leaves in every
output buffer.

Order. Ops run level by level (:mod:`.order`): a level holds ops that are
unordered among themselves, after every op they follow. A race-free plan
computes the same values in every order consistent with happens-before,
so this one is as good as any; races are reported on their own
(:mod:`.races`). Each level becomes up to three synchronous steps:

=========  ==========================================  ====================
combine    A                                           B / C
=========  ==========================================  ====================
pairs      s_k -> d_k (copy, cell by cell)
broadcast  s0 -> every d (copy)
reduce     s0 -> register (copy)                       B: every other s into
                                                       the register (reduce);
                                                       C: register -> every d
=========  ==========================================  ====================

The register cells live on the GPU running the op (:mod:`.cells`), so a
remote source (``rre``, ``glres``) or destination (``put``, ``res``,
``ppkt``) is a transfer over the link between the two ranks, and the
checker's traffic figures count it. Packets are data here: their
synchronisation is in :mod:`.order`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..schedule import COPY, REDUCE, Schedule, Step
from .cells import PlanCells, cell_map
from .order import Order

A, B, C = 0, 1, 2


@dataclass
class Lowered:
    schedule: Schedule
    cells: PlanCells
    writers: dict  # (sync step, rank, cell) -> op index (the last one listed)


def lower(order: Order) -> Lowered:
    plan = order.plan
    # registers: per (level, gpu), reduce ops get consecutive register cells
    reg_offset, used = {}, defaultdict(int)
    for op in plan.ops:
        if op.combine == "reduce" and order.level[op.index] >= 0:
            key = (int(order.level[op.index]), op.gpu)
            reg_offset[op.index] = used[key]
            used[key] += op.srcs[0][3]
    cells = cell_map(plan, max(used.values(), default=0))
    rows = []  # (slot, src rank, src cell, dst rank, dst cell, op code, origin)

    def cell(rank, buf, first, count):
        return cells.cell(np.full(count, rank), np.full(count, buf), first + np.arange(count))

    def move(slot, src, dst, code, origin, src_cells=None, dst_cells=None):
        sc = cell(*src[:4]) if src_cells is None else src_cells
        dc = cell(*dst[:4]) if dst_cells is None else dst_cells
        k = sc.size
        rows.append(np.stack([np.full(k, slot), np.full(k, src[0]), sc, np.full(k, dst[0]), dc, np.full(k, code), np.full(k, origin)], axis=1))

    for op in plan.ops:
        lv = int(order.level[op.index])
        if lv < 0 or op.combine == "none":
            continue
        base = lv * 3
        if op.combine == "pairs":
            for s, d in zip(op.srcs, op.dsts):
                move(base + A, s, d, COPY, op.index)
        elif op.combine == "broadcast":
            for d in op.dsts:
                move(base + A, op.srcs[0], d, COPY, op.index)
        else:
            count = op.srcs[0][3]
            reg = cells.message_base + reg_offset[op.index] + np.arange(count)
            here = (op.gpu, None, 0, count)
            move(base + A, op.srcs[0], here, COPY, op.index, dst_cells=reg)
            for s in op.srcs[1:]:
                move(base + B, s, here, REDUCE, op.index, dst_cells=reg)
            for d in op.dsts:
                move(base + C, here, d, COPY, op.index, src_cells=reg)
    table = np.concatenate(rows) if rows else np.zeros((0, 7), dtype=np.int64)
    used_slots, sync = np.unique(table[:, 0], return_inverse=True)
    order_ = np.argsort(sync, kind="stable")
    table, sync = table[order_], sync[order_]
    bounds = np.searchsorted(sync, np.arange(len(used_slots) + 1))
    steps = []
    for k, slot in enumerate(used_slots.tolist()):
        t = table[bounds[k] : bounds[k + 1]]
        steps.append(Step(t[:, 1].copy(), t[:, 3].copy(), t[:, 2].copy(), t[:, 4].copy(), t[:, 5].astype(np.int8), name=f"level {slot // 3} {'ABC'[slot % 3]}"))
    writers = {(int(s), int(r), int(c)): int(o) for s, r, c, o in zip(sync.tolist(), table[:, 3].tolist(), table[:, 4].tolist(), table[:, 6].tolist())}
    schedule = Schedule(
        collective=plan.collective,
        ranks=plan.ngpus,
        chunks=cells.chunks,
        steps=tuple(steps),
        name=f"{plan.name or plan.path} ({cells.mode})",
        layout_override=cells.layout(),
        meta={"mscclpp": plan.path, "mode": cells.mode},
    )
    return Lowered(schedule, cells, writers)


def schedule_of(plan) -> Schedule:
    """The synchronous schedule of a plan that runs to completion."""
    from .order import analyse
    from .parse import PlanFormatError

    order = analyse(plan)
    if not order.complete:
        raise PlanFormatError(f"{plan.path}: some ops never run (a deadlock); run 'collspec check {plan.path}' to see which")
    return lower(order).schedule
