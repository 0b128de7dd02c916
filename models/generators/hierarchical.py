"""Hierarchical ring all-reduce: rings inside groups, then across them.

N = G x L ranks: group g = r // L (a node), local index l = r % L (a GPU in
it). The vector is cut into L blocks of G chunks (chunk c is in block c // G).

1. intra-group reduce-scatter: a ring over the L ranks of each group, one
   block (G chunks) per hop; local rank l ends with block l reduced over its
   group;
2. inter-group reduce-scatter: a ring over the G ranks that share local
   index l, on block l, one chunk per hop;
3. inter-group all-gather: the same ring, on block l;
4. intra-group all-gather of the blocks.

Traffic per rank is 2(N-1)/N of the vector, the lower bound, while only
2(G-1) of the 2(L-1) + 2(G-1) hops cross group boundaries. The ring index
formulas are :mod:`collspec.models.indexing`'s, applied within each ring.
The intra-group hops move a whole block, so the schedule declares a link
capacity of G chunks.

One transfer function (:class:`~collspec.models.program.Program`) with the
group size L as its option: slot j of rank r stands for chunk j of the block
it sends (slot 0 alone in the inter-group phases).
"""

from __future__ import annotations

from .. import indexing as ix
from ..program import Program, Transfer
from ..schedule import COPY, REDUCE, Schedule

PHASES = ("intra reduce-scatter", "inter reduce-scatter", "inter all-gather", "intra all-gather")


def default_group_size(n: int) -> int:
    """The largest divisor of n that is at most sqrt(n) (1 for primes)."""
    return max(d for d in range(1, int(n**0.5) + 1) if n % d == 0) if n > 0 else 1


def phase_lengths(n, size):
    """Hops of the four phases: L - 1, G - 1, G - 1, L - 1."""
    groups = ix.floordiv(n, size)
    return (size - 1, groups - 1, groups - 1, size - 1)


def program(size=1) -> Program:
    """The hierarchical ring for groups of ``size`` ranks (size divides N)."""

    def transfer(n, s, r, j):
        groups = ix.floordiv(n, size)
        g, l = ix.floordiv(r, size), r % size
        intra_next = g * size + ix.ring_next(l, size)
        inter_next = ix.ring_next(g, groups) * size + l
        first = phase_lengths(n, size)
        k1 = s - first[0]
        k2 = k1 - first[1]
        k3 = k2 - first[2]
        block_rs = ix.ring_rs_send(l, s, size) * groups + j
        block_ag = ix.ag_send(ix.ring_owner, l, k3, size) * groups + j
        cases = [
            (s < first[0], Transfer(True, intra_next, block_rs, block_rs, REDUCE)),
            (k1 < first[1], Transfer(j == 0, inter_next, l * groups + ix.ring_rs_send(g, k1, groups), l * groups + ix.ring_rs_send(g, k1, groups), REDUCE)),
            (k2 < first[2], Transfer(j == 0, inter_next, l * groups + ix.ag_send(ix.ring_owner, g, k2, groups), l * groups + ix.ag_send(ix.ring_owner, g, k2, groups), COPY)),
        ]
        result = Transfer(True, intra_next, block_ag, block_ag, COPY)
        for condition, t in reversed(cases):
            result = Transfer(*(ix.where(condition, a, b) for a, b in zip((t.active, t.dst, t.src_chunk, t.dst_chunk, t.op), (result.active, result.dst, result.src_chunk, result.dst_chunk, result.op))))
        return result

    def label(n, s):
        for phase, length in zip(PHASES, phase_lengths(n, size)):
            if s < length:
                return phase, None
            s -= length
        return PHASES[-1], None

    def steps(n):
        return sum(phase_lengths(n, size))

    def capacity(n, steps):
        return n // size if size > 1 else 1

    return Program("hierarchical-ring", "allreduce", lambda n: n, steps, lambda n: ix.floordiv(n, size), transfer, label, program,
                   params={"size": size}, capacity=capacity, meta={"group_size": size},
                   title=lambda n: f"hierarchical-ring allreduce, {n} ranks ({n // size} groups of {size})")


def allreduce(n: int, group_size: int | None = None) -> Schedule:
    size = group_size or default_group_size(n)
    if n % size:
        raise ValueError(f"group size {size} does not divide {n} ranks")
    return program(size).schedule(n)
