"""Data races: two ops, unordered by the memory happens-before of
:mod:`.order`, that touch one cell of one rank where at least one writes.

Accesses: an op reads its source ranges and writes its destination ranges
(on whichever rank they live: remote reads and writes count on the remote
rank). A packet write and a packet read of one cell are the LL protocol's
synchronisation, not a race; two packet writes of one cell are.

Ordering is decided exactly: every op gets the bit set of the data ops that
happen before it, built level by level over the memory edges (rows: ops
that run, columns: ops that touch data). Memory is bounded by
:data:`MAX_BITSET_BYTES`; a larger plan is refused (exit 2).
"""

from __future__ import annotations

import numpy as np

from ...spec.violations import Violation
from .cells import PlanCells
from .order import Order
from .parse import PlanFormatError

MAX_BITSET_BYTES = 512 << 20
LIST_LIMIT = 200


def accesses(order: Order, cells: PlanCells):
    """Arrays (op, rank, cell, writes, packet) of every access of ops that run."""
    rows = []
    for op in order.plan.ops:
        if order.level[op.index] < 0:
            continue
        for ranges, write in ((op.srcs, False), (op.dsts, True)):
            for rank, buf, first, count, packet in ranges:
                rows.append((op.index, rank, buf, first, count, write, packet))
    if not rows:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty.astype(bool), empty.astype(bool)
    a = np.array(rows, dtype=np.int64)
    count = a[:, 4]
    item = np.repeat(np.arange(len(a)), count)
    j = np.arange(item.size) - np.repeat(np.cumsum(count) - count, count)
    cell = cells.cell(a[item, 1], a[item, 2], a[item, 3] + j)
    return a[item, 0], a[item, 1], cell, a[item, 5].astype(bool), a[item, 6].astype(bool)


def ancestors(order: Order, data_ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bit sets: ``bits[i]`` has bit ``column[a]`` set when data op a
    happens before op i (memory order)."""
    plan = order.plan
    n = len(plan.ops)
    column = np.full(n, -1, dtype=np.int64)
    column[data_ops] = np.arange(data_ops.size)
    words = max(1, (data_ops.size + 63) // 64)
    if n * words * 8 > MAX_BITSET_BYTES:
        raise PlanFormatError(f"{plan.path}: {n} operations with {data_ops.size} data operations need more than {MAX_BITSET_BYTES >> 20} MB to decide races; refused")
    bits = np.zeros((n, words), dtype=np.uint64)
    level = order.level
    src, dst = order.mem_src, order.mem_dst
    live = (level[src] >= 0) & (level[dst] >= 0)
    src, dst = src[live], dst[live]
    if src.size == 0:
        return bits, column
    o = np.lexsort((dst, level[dst]))
    src, dst = src[o], dst[o]
    edge_level = level[dst]
    bounds = np.searchsorted(edge_level, np.arange(order.levels + 1))
    self_bit = np.zeros((n, words), dtype=np.uint64)
    has = column >= 0
    idx = np.flatnonzero(has)
    self_bit[idx, column[idx] // 64] = np.left_shift(np.uint64(1), (column[idx] % 64).astype(np.uint64))
    for lv in range(order.levels):
        e0, e1 = bounds[lv], bounds[lv + 1]
        if e1 == e0:
            continue
        s, d = src[e0:e1], dst[e0:e1]
        values = bits[s] | self_bit[s]
        starts = np.r_[0, np.flatnonzero(d[1:] != d[:-1]) + 1]
        bits[d[starts]] |= np.bitwise_or.reduceat(values, starts, axis=0)
    return bits, column


def races(order: Order, cells: PlanCells) -> list[Violation]:
    plan = order.plan
    op, rank, cell, write, packet = accesses(order, cells)
    if op.size == 0:
        return []
    data_ops = np.unique(op)
    bits, column = ancestors(order, data_ops)
    key = rank * np.int64(cells.cells) + cell
    o = np.lexsort((op, key))
    op, key, write, packet, rank, cell = op[o], key[o], write[o], packet[o], rank[o], cell[o]
    # candidate pairs: every two accesses of one cell (sorted runs), one a write
    partners = np.searchsorted(key, key, side="right") - np.arange(key.size) - 1
    found: dict[tuple[int, int], set] = {}
    more = 0
    names = cells.names()
    first, k = _spread(partners)
    second = first + 1 + k
    wa, wb = write[first], write[second]
    sync = (wa & packet[first] & ~wb & packet[second]) | (wb & packet[second] & ~wa & packet[first])
    keep = (op[first] != op[second]) & (wa | wb) & ~sync
    first, second = first[keep], second[keep]
    a, b = op[first], op[second]
    ca, cb = column[a], column[b]
    a_before_b = (bits[b, ca // 64] >> (ca % 64).astype(np.uint64)) & np.uint64(1)
    b_before_a = (bits[a, cb // 64] >> (cb % 64).astype(np.uint64)) & np.uint64(1)
    bad = np.flatnonzero((a_before_b == 0) & (b_before_a == 0))
    for x, y, at in zip(a[bad].tolist(), b[bad].tolist(), first[bad].tolist()):
        pair = (min(x, y), max(x, y))
        if pair not in found and len(found) >= LIST_LIMIT:
            more += 1
            continue
        found.setdefault(pair, set()).add((int(rank[at]), names[int(cell[at])]))
    out = [_race(plan, x, y, sorted(where)) for (x, y), where in sorted(found.items())]
    if more:
        out.append(Violation("race", f"... and {more} more unordered pairs beyond the first {LIST_LIMIT} listed", details={"more": more}))
    return out


def _spread(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items with ``counts[k]`` parts: (item of each part, part index)."""
    item = np.repeat(np.arange(counts.size), counts)
    starts = np.cumsum(counts) - counts
    return item, np.arange(item.size) - starts[item]


def _race(plan, x: int, y: int, where: list[tuple[int, str]]) -> Violation:
    a, b = plan.ops[x], plan.ops[y]
    ranks = sorted({r for r, _ in where})
    touch = "; ".join(f"GPU {r}'s " + ", ".join(n for rr, n in where if rr == r)[:200] for r in ranks)
    return Violation(
        "race",
        f"{a.describe()} and {b.describe()} both touch {touch}, at least one of them writing, and nothing orders them "
        "(ops of one thread block need a nop between them; across thread blocks a signal/wait, packet, barrier or semaphore)",
        step=a.pos, src=a.gpu, dst=ranks[0],
        details={**a.where(), "other": b.where(), "cells": [f"GPU {r} {n}" for r, n in where]},
    )
