"""``nccl-pat``: NCCL's Parallel Aggregated Trees (reduce-scatter, all-gather).

What ``PatRSAlgorithm`` and ``PatAGAlgorithm`` (``src/include/collectives.h``)
and the PAT primitives (``src/device/prims_simple.h``) do, as one
transfer function per collective; docs/nccl.md says what is left out.

Reduce-scatter. Rank r holds, for the block of rank ``r + s`` (s the
*offset*, 0 <= s < N), a partial sum; it sends it to the rank at distance
``b = 2**d``, d the lowest set bit of s (PAT connects every rank to the
ranks at +-2**d and sends to ``rank + 2**d``), where it becomes the partial
for offset ``s - b`` of the same block. So the block of rank D is reduced
over a binomial tree of offsets: the data for D hops along the set bits of
the offset, lowest first, and a partial leaves a rank only after every
larger offset that feeds it has arrived. Offsets of N or more do not exist
for a rank count that is not a power of two: those steps are skipped.

Aggregation. With aggregation A (a power of two; NCCL doubles it while
messages are small and it is below N/2) and ``P`` the power of two at or
above N, ``delta = P / A``:

1. for ``as = delta - 1`` down to 1, one step: the offsets
   ``s = i * delta + as`` (i < A) share their lowest set bit, so every rank
   sends those (up to A) partials to the one peer ``rank + lowbit(as)``
   in one message (NCCL's phases 0 and 1);
2. then for ``scale = 1, 2, ..., A/2``, one step: the offsets
   ``s = (2i + 1) * scale * delta`` go to ``rank + scale * delta``
   (phases 2 and 3).

``delta - 1 + log2 A`` steps: P - 1 for A = 1, log2 P for A = P/2. Each
rank still sends N - 1 blocks in all. All-gather is the same tree run
backwards: the steps in reverse order, each message from ``rank + b`` to
``rank`` (``rank - 2**d`` as NCCL's PAT all-gather sends), copying.

Blocks are ``count`` elements, walked in loops of ``chunk`` elements (the
last one short); a loop runs all the steps.

>>> s = generate_pat("reduce_scatter", 8, aggregation=1, count=1)
>>> len(s.steps), [(int(a), int(b), int(c)) for a, b, c in zip(s.steps[0].src, s.steps[0].dst, s.steps[0].src_chunk)][:2]
(7, [(0, 1, 7), (1, 2, 0)])
"""

from __future__ import annotations

import numpy as np

from .. import indexing as ix
from ..layout import ScheduleError
from ..program import BITVEC, Program, Transfer
from ..schedule import COPY, REDUCE, Schedule
from .nccl_ring import _integer, most_per_link

ALGORITHM = "nccl-pat"
MAX_CELLS = 1 << 18
#: at most this many (rank, slot) points in one step and transfers in all (4096 ranks, count 1, fit)
MAX_SLOTS = 1 << 24
MAX_TRANSFERS = 1 << 25
DEFAULTS = {"chunk": 2, "count": 2}


def _nonzero(x):
    return ix.where(x == 0, 1, x)


def pow2_above(n):
    """P: the smallest power of two >= n (n >= 1)."""
    return ix.where(n <= 1, 1, 2 * ix.largest_power_of_two(_nonzero(n - 1)))


def max_aggregation(n):
    """The most aggregation NCCL reaches: doubling from 1 while below N / 2."""
    return pow2_above(_nonzero(ix.floordiv(n, 2)))


def steps_per_loop(n, aggregation):
    """delta - 1 stage-1 steps and log2 A stage-2 steps (none for one rank)."""
    delta = ix.floordiv(pow2_above(n), aggregation)
    return ix.where(n >= 2, delta - 1 + ix.floor_log2(aggregation), 0)


def hop(n, t, i, aggregation):
    """Step t of a loop, slot i of the aggregate: ``(offset s, distance b, used)``."""
    delta = ix.floordiv(pow2_above(n), aggregation)
    first = t < delta - 1
    low = delta - 1 - t  # stage 1: 'as'
    scale = ix.shift_left(1, ix.where(first, 0, t - (delta - 1)), like=t)  # stage 2
    s = ix.where(first, i * delta + low, (2 * i + 1) * scale * delta)
    b = ix.where(first, ix.lowest_set_bit(_nonzero(low)), scale * delta)
    # i < A / (2 scale), not 2 i scale < A: the product overflows the proofs' bit-vectors past 1024 ranks
    used = ix.where(first, i < aggregation, i < ix.floordiv(aggregation, _nonzero(2 * scale)))
    return s, b, ix.both(used, s < n)


def pat_program(collective: str, aggregation=None, chunk=None, count=None) -> Program:
    """The transfer function of ``collective`` (see the module text)."""
    chunk = _integer("chunk", DEFAULTS["chunk"] if chunk is None else chunk, 1, MAX_CELLS, ALGORITHM)
    count = _integer("count", DEFAULTS["count"] if count is None else count, 0, MAX_CELLS, ALGORITHM)
    if aggregation is not None:
        aggregation = _integer("aggregation", aggregation, 1, 1 << 16, ALGORITHM)
        if aggregation & (aggregation - 1):
            raise ScheduleError(f"{ALGORITHM}: option aggregation must be a power of two, got {aggregation}")
    reduce = collective == "reduce_scatter"
    loops = -(-count // chunk)

    def agg(n):
        return max_aggregation(n) if aggregation is None else aggregation

    def steps(n):
        return loops * steps_per_loop(n, agg(n))

    def transfer(n, s, r, j):
        per = _nonzero(steps_per_loop(n, agg(n)))
        loop = ix.floordiv(s, per)
        t = s - loop * per
        i, e = ix.floordiv(j, chunk), j % chunk
        offset, b, used = hop(n, t if reduce else per - 1 - t, i, agg(n))
        element = loop * chunk + e
        block = (r + offset - (0 if reduce else b)) % n
        dst = (r + b) % n if reduce else (r + n - b % n) % n
        cell = block * count + element
        return Transfer(ix.both(used, element < count), dst, cell, cell, REDUCE if reduce else COPY)

    def label(n, s):
        per = int(steps_per_loop(n, agg(n)))
        loop, t = divmod(int(s), per)
        t = t if reduce else per - 1 - t
        delta = int(pow2_above(n)) // int(agg(n))
        what = f"offsets = {delta - 1 - t} mod {delta}" if t < delta - 1 else f"offsets = odd x {(1 << (t - delta + 1)) * delta}"
        return ("reduce-scatter" if reduce else "all-gather"), f"loop {loop}: {what}"

    def capacity(n, built):
        most = 1
        for step in built:
            if len(step):
                most = max(most, most_per_link(n, step))
        return most

    return Program(
        ALGORITHM, collective, lambda n: n * count, steps, lambda n: agg(n) * chunk, transfer, label,
        lambda: pat_program(collective, aggregation, chunk, count), capacity=capacity, sort=BITVEC,
        title=lambda n: f"{ALGORITHM} {collective}, {n} ranks, aggregation {int(agg(n))}, chunk {chunk}, {count} elements per rank",
        meta={"aggregation": aggregation, "chunk": chunk, "count": count},
    )


def generate_pat(collective: str, n: int, aggregation=None, chunk=None, count=None) -> Schedule:
    made = pat_program(collective, aggregation, chunk, count)
    most = int(max_aggregation(n))
    if aggregation is not None and aggregation > most:
        raise ScheduleError(f"{ALGORITHM}: option aggregation must be at most {most} for {n} ranks (NCCL stops doubling it at N/2), got {aggregation}")
    if n * made.chunks(1) > MAX_CELLS:
        raise ScheduleError(f"{ALGORITHM}: option count gives {n * made.chunks(1)} cells, more than {MAX_CELLS}")
    width, count = int(made.width(n)), made.meta["count"]
    if n * width > MAX_SLOTS or n * (n - 1) * count > MAX_TRANSFERS:
        raise ScheduleError(f"{ALGORITHM}: ranks {n} with count {count} and chunk {made.meta['chunk']} is beyond what is enumerated "
                            f"({n * (n - 1) * count} transfers, {n * width} slots a step; at most {MAX_TRANSFERS} and {MAX_SLOTS}): "
                            "use fewer ranks, a smaller count or chunk")
    return made.schedule(n)


def generator(collective: str):
    def generate(n: int, aggregation=None, chunk=None, count=None) -> Schedule:
        return generate_pat(collective, n, aggregation=aggregation, chunk=chunk, count=count)

    return generate


def program_factory(collective: str):
    return lambda **options: pat_program(collective, **options)
