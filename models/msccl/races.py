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


def candidate_pairs(p: Program, order: Order, cells: CellMap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of distinct steps on one GPU sharing a cell, one of them
    writing it, as arrays (a, b, cell) with a < b, one row per shared cell."""
    runs = np.flatnonzero((order.level >= 0) & (p.type != NOP))
    step, gpu, cell, write = accesses(p, runs, cells)
    key = gpu * np.int64(cells.cells) + cell
    o = np.argsort(key, kind="stable")
    key, step, write, cell = key[o], step[o], write[o], cell[o]
    n = key.size
    group_end = np.searchsorted(key, key, side="right")
    first, k = spread(group_end - np.arange(n) - 1)
    second = first + 1 + k
    keep = (write[first] | write[second]) & (step[first] != step[second])
    a, b = step[first[keep]], step[second[keep]]
    return np.minimum(a, b), np.maximum(a, b), cell[first[keep]]


def unordered(order: Order, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For pairs of steps on the same GPU: is neither before the other?"""
    p = order.program
    result = np.zeros(a.size, dtype=bool)
    if a.size == 0:
        return result
    gpus = p.gpu[a]
    tb_per_gpu = np.bincount(p.tb_gpu, minlength=p.ngpus)[: p.ngpus]
    budget = max(1, CLOCK_BUDGET // max(p.steps, 1))
    batch: list[int] = []
    width = 0
    for g in np.unique(gpus).tolist():
        if batch and width + tb_per_gpu[g] > budget:
            _answer(order, batch, a, b, gpus, result)
            batch, width = [], 0
        batch.append(g)
        width += int(tb_per_gpu[g])
    _answer(order, batch, a, b, gpus, result)
    return result


def _answer(order: Order, batch: list[int], a, b, gpus, result) -> None:
    p = order.program
    clock, column = vector_clocks(order, np.asarray(batch))
    pick = np.isin(gpus, batch)
    x, y = a[pick], b[pick]
    x_before_y = clock[y, column[p.tb[x]]] > p.pos[x]
    y_before_x = clock[x, column[p.tb[y]]] > p.pos[y]
    result[pick] = ~(x_before_y | y_before_x)


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
    span = np.int64(max(p.steps, 1))
    for cells in maps:
        a, b, cell = candidate_pairs(p, order, cells)
        if a.size == 0:
            continue
        unique, inverse = np.unique(a * span + b, return_inverse=True)
        racing = unordered(order, unique // span, unique % span)
        names = cells.names()
        rows = np.flatnonzero(racing[inverse])
        for x, y, c in zip(a[rows].tolist(), b[rows].tolist(), cell[rows].tolist()):
            entry = found.setdefault((x, y), {"modes": [], "cells": set()})
            if cells.mode not in entry["modes"]:
                entry["modes"].append(cells.mode)
            entry["cells"].add(names[c])
    violations = []
    for (x, y), entry in sorted(found.items())[:LIST_LIMIT]:
        violations.append(_race(p, x, y, sorted(entry["cells"], key=_cell_sort), entry["modes"]))
    if len(found) > LIST_LIMIT:
        violations.append(
            Violation("race", f"... and {len(found) - LIST_LIMIT} more unordered pairs of steps (only the first {LIST_LIMIT} are listed)", details={"count": len(found)})
        )
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
