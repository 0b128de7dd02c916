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
    REG = -1  # buffer code of a register range (first = register offset)
    rows = []  # (slot, src rank, src buffer, src first, count, dst rank, dst buffer, dst first, op code, origin)
    for op in plan.ops:
        lv = int(order.level[op.index])
        if lv < 0 or op.combine == "none":
            continue
        base, i = lv * 3, op.index
        if op.combine == "pairs":
            for s, d in zip(op.srcs, op.dsts):
                rows.append((base + A, s[0], s[1], s[2], s[3], d[0], d[1], d[2], COPY, i))
        elif op.combine == "broadcast":
            s = op.srcs[0]
            for d in op.dsts:
                rows.append((base + A, s[0], s[1], s[2], s[3], d[0], d[1], d[2], COPY, i))
        else:
            s, reg = op.srcs[0], reg_offset[i]
            rows.append((base + A, s[0], s[1], s[2], s[3], op.gpu, REG, reg, COPY, i))
            for s in op.srcs[1:]:
                rows.append((base + B, s[0], s[1], s[2], s[3], op.gpu, REG, reg, REDUCE, i))
            for d in op.dsts:
                rows.append((base + C, op.gpu, REG, reg, d[3], d[0], d[1], d[2], COPY, i))
    r = np.array(rows, dtype=np.int64).reshape(-1, 10)
    count = r[:, 4]
    item = np.repeat(np.arange(len(r)), count)
    j = np.arange(item.size) - np.repeat(np.cumsum(count) - count, count)
    t = r[item]

    def cells_of(rank, buf, first):
        reg = buf == REG
        plain = cells.cell(rank, np.where(reg, 0, buf), first + j)
        return np.where(reg, cells.message_base + first + j, plain)

    src_cell = cells_of(t[:, 1], t[:, 2], t[:, 3])
    dst_cell = cells_of(t[:, 5], t[:, 6], t[:, 7])
    used_slots, sync = np.unique(t[:, 0], return_inverse=True)
    o = np.argsort(sync, kind="stable")
    t, sync, src_cell, dst_cell = t[o], sync[o], src_cell[o], dst_cell[o]
    bounds = np.searchsorted(sync, np.arange(len(used_slots) + 1))
    steps = []
    for k, slot in enumerate(used_slots.tolist()):
        a, b = bounds[k], bounds[k + 1]
        steps.append(Step(t[a:b, 1].copy(), t[a:b, 5].copy(), src_cell[a:b].copy(), dst_cell[a:b].copy(), t[a:b, 8].astype(np.int8), name=f"level {slot // 3} {'ABC'[slot % 3]}"))
    writers = dict(zip(zip(sync.tolist(), t[:, 5].tolist(), dst_cell.tolist()), t[:, 9].tolist()))
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
