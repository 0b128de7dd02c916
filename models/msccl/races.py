"""Data races: two steps on one GPU, unordered by happens-before, that touch
an overlapping buffer range where at least one of them writes.

Which steps read and write what: a step reads its source if its type reads
one (``s``, ``rrs``, ``rrc``, ``rrcs``, ``cpy``, ``re``), reads its
destination if it reduces into it in place (``re``, ``res``), and writes its
destination if its type stores one (``r``, ``rcs``, ``rrc``, ``rrcs``,
``cpy``, ``re``, ``res``); ``cnt`` chunks from the offset. Buffers are
compared as cells of a :class:`~.cells.CellMap`, so in place the input and
output buffers that alias are the same memory. A connection's own buffer is
private to its two steps and never races.

Ordering is decided with vector clocks over the thread blocks, computed level
by level over the happens-before graph (:mod:`.order`): step a happens before
step b exactly when b's clock has reached a's position in a's thread block.
"""

from __future__ import annotations

import numpy as np

from ...spec.violations import Violation
from .cells import CellMap
from .order import Order
from .program import NOP, READS_DST, READS_SRC, WRITES_DST, Program, spread

#: clock entries held at once (rows x thread-block columns), about 64 MB
CLOCK_BUDGET = 16_000_000
#: candidate pairs examined at once
PAIR_SLICE = 4_000_000
LIST_LIMIT = 1000


def accesses(p: Program, runs: np.ndarray, cells: CellMap) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (step, gpu, cell, writes?) access of the steps in ``runs``."""
    t = p.type[runs]
    parts = []
    for mask, buf, off, write in (
        (READS_SRC[t], p.src_buf, p.src_off, False),
        (READS_DST[t], p.dst_buf, p.dst_off, False),
        (WRITES_DST[t], p.dst_buf, p.dst_off, True),
    ):
        steps = runs[mask]
        item, j = spread(p.cnt[steps])
        step = steps[item]
        cell = cells.cell(p.gpu[step], buf[step], off[step] + j)
        parts.append((step, cell, np.full(step.size, write)))
    step = np.concatenate([a for a, _, _ in parts]).astype(np.int64)
    cell = np.concatenate([b for _, b, _ in parts]).astype(np.int64)
    write = np.concatenate([c for _, _, c in parts])
    return step, p.gpu[step], cell, write


def candidate_pairs(p: Program, order: Order, cells: CellMap, gpus: np.ndarray):
    """Pairs of steps of different thread blocks on one of ``gpus`` sharing
    a cell, one of them writing it: yields arrays (a, b, cell) with a < b,
    one row per shared cell, in slices of at most :data:`PAIR_SLICE`
    candidate rows. (Two steps of one thread block never race: program
    order puts the earlier one before the later.)"""
    runs = np.flatnonzero((order.level >= 0) & (p.type != NOP) & np.isin(p.gpu, gpus))
    step, gpu, cell, write = accesses(p, runs, cells)
    key = gpu * np.int64(cells.cells) + cell
    tb = p.tb[step]
    o = np.lexsort((tb, key))  # by cell, then thread block: only pairs across blocks are enumerated
    key, step, write, cell, tb = key[o], step[o], write[o], cell[o], tb[o]
    n = key.size
    change = np.ones(n, dtype=bool)
    change[1:] = (key[1:] != key[:-1]) | (tb[1:] != tb[:-1])
    block_end = np.r_[np.flatnonzero(change)[1:], n][np.cumsum(change) - 1] if n else np.zeros(0, np.int64)
    partners = np.searchsorted(key, key, side="right") - block_end  # later accesses of the cell by other blocks
    bounds = np.cumsum(partners)
    start = 0
    while start < n:
        stop = max(int(np.searchsorted(bounds, bounds[start] - partners[start] + PAIR_SLICE, side="right")), start + 1)
        first, k = spread(partners[start:stop])
        first = first + start
        second = block_end[first] + k
        keep = write[first] | write[second]
        a, b = step[first[keep]], step[second[keep]]
        yield np.minimum(a, b), np.maximum(a, b), cell[first[keep]]
        start = stop


def gpu_batches(p: Program) -> list[np.ndarray]:
    """GPUs grouped so that one group's clocks fit :data:`CLOCK_BUDGET`."""
    tb_per_gpu = np.bincount(p.tb_gpu, minlength=p.ngpus)[: p.ngpus]
    budget = max(1, CLOCK_BUDGET // max(p.steps, 1))
    batches, batch, width = [], [], 0
    for g in range(p.ngpus):
        if batch and width + tb_per_gpu[g] > budget:
            batches.append(np.array(batch))
            batch, width = [], 0
        batch.append(g)
        width += int(tb_per_gpu[g])
    if batch:
        batches.append(np.array(batch))
    return batches


def unordered(p: Program, clock: np.ndarray, column: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For pairs of steps on GPUs of the clock's batch: is neither before the other?"""
    a_before_b = clock[b, column[p.tb[a]]] > p.pos[a]
    b_before_a = clock[a, column[p.tb[b]]] > p.pos[b]
    return ~(a_before_b | b_before_a)


def vector_clocks(order: Order, gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clocks over the thread blocks of ``gpus``: ``clock[i, column[tb]]`` is
    one more than the last position in ``tb`` that happens before or is
    step i (0: none)."""
    p = order.program
    in_batch = np.isin(p.tb_gpu, gpus)
    column = np.full(p.threadblocks, -1, dtype=np.int64)
    column[in_batch] = np.arange(int(in_batch.sum()))
    width = int(in_batch.sum())
    clock = np.zeros((p.steps, width), dtype=np.int32)
    level = order.level
    src, dst = order.edge_src, order.edge_dst
    live = level[dst] >= 0
    src, dst = src[live], dst[live]
    by_level = np.argsort(level[dst], kind="stable")
    src, dst = src[by_level], dst[by_level]
    edge_level = level[dst]
    nodes = np.flatnonzero(level >= 0)
    nodes = nodes[np.argsort(level[nodes], kind="stable")]
    node_level = level[nodes]
    levels = int(level.max()) + 1 if level.size else 0
    edge_bounds = np.searchsorted(edge_level, np.arange(levels + 1))
    node_bounds = np.searchsorted(node_level, np.arange(levels + 1))
    own_col = column[p.tb]
    for lv in range(levels):
        e0, e1 = edge_bounds[lv], edge_bounds[lv + 1]
        if e1 > e0:
            d, s = dst[e0:e1], src[e0:e1]
            o = np.argsort(d, kind="stable")
            d, s = d[o], s[o]
            starts = np.r_[0, np.flatnonzero(d[1:] != d[:-1]) + 1]
            clock[d[starts]] = np.maximum.reduceat(clock[s], starts, axis=0)
        here = nodes[node_bounds[lv] : node_bounds[lv + 1]]
        mine = here[own_col[here] >= 0]
        clock[mine, own_col[mine]] = p.pos[mine] + 1
    return clock, column


def races(order: Order, maps: list[CellMap]) -> list[Violation]:
    """Race violations for every mode in ``maps`` (a pair racing in several
    modes is reported once, naming the modes)."""
    p = order.program
    found: dict[tuple[int, int], dict] = {}
    more = 0  # racing pairs beyond the listed ones (counted per shared cell)
    names = {cells.mode: cells.names() for cells in maps}
    for gpus in gpu_batches(p):
        clock = None  # computed for the first candidate pair: one thread block per GPU has none
        for cells in maps:
            for a, b, cell in candidate_pairs(p, order, cells, gpus):
                if a.size == 0:
                    continue
                if clock is None:
                    clock, column = vector_clocks(order, gpus)
                rows = np.flatnonzero(unordered(p, clock, column, a, b))
                if len(found) >= LIST_LIMIT:
                    more += rows.size
                    continue
                for x, y, c in zip(a[rows].tolist(), b[rows].tolist(), cell[rows].tolist()):
                    entry = found.get((x, y))
                    if entry is None:
                        if len(found) >= LIST_LIMIT:
                            more += 1
                            continue
                        entry = found[(x, y)] = {"modes": [], "cells": set()}
                    if cells.mode not in entry["modes"]:
                        entry["modes"].append(cells.mode)
                    entry["cells"].add(names[cells.mode][c])
    violations = [_race(p, x, y, sorted(entry["cells"], key=_cell_sort), entry["modes"]) for (x, y), entry in sorted(found.items())]
    if more:
        violations.append(Violation("race", f"... and more unordered accesses ({more} beyond the first {LIST_LIMIT} pairs of steps listed)", details={"more": more}))
    return violations


def _cell_sort(name: str):
    buffer, _, rest = name.partition("[")
    return (buffer, int(rest.rstrip("]")) if rest.rstrip("]").isdigit() else 0)


def _race(p: Program, x: int, y: int, cells: list[str], modes: list[str]) -> Violation:
    wx, wy = p.where(x), p.where(y)
    touch = ", ".join(cells[:8]) + (f" and {len(cells) - 8} more" if len(cells) > 8 else "")
    mode = " and ".join(modes)
    return Violation(
        "race",
        f"GPU {wx['gpu']} ({mode}): {p.describe(x)} and {p.describe(y)} both touch {touch}, at least one of them writing, "
        f"and nothing orders them; add a dependency (depid/deps) so that one waits for the other",
        step=wx["step"],
        src=wx["gpu"],
        dst=wx["gpu"],
        details={**wx, "other": {"tb": wy["tb"], "step": wy["step"], "type": wy["type"], "line": wy["line"]}, "cells": cells, "modes": modes},
    )
