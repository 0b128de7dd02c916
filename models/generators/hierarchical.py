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
formulas are :mod:`collspec.models.indexing`'s, applied within each ring
(written with ``wrap`` rather than ``%``, so that the proof for every node
count and group size is linear arithmetic: :func:`pair_transfer` works on
(group, local index) coordinates and the transfer function joins them).
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


def pair_transfer(groups, size, s, g, l, j):
    """The transfer of slot j of rank (group g, local index l) at step s, in
    coordinates: ``(active, (dst group, dst local), (block, chunk) read,
    (block, chunk) written, op)``, a chunk being chunk i of block b. Only
    additions and comparisons of each coordinate with its own range (the
    proofs evaluate it with G and L both symbolic, where g * L + l would be
    nonlinear). The ring formulas are :mod:`collspec.models.indexing`'s
    (``ring_next``, ``ring_rs_send``, ``ag_send`` with ``ring_owner``)
    written with :func:`~collspec.models.indexing.wrap` instead of ``%``
    (the same values for hops inside their phase; tests compare them)."""
    first = phase_lengths_of(groups, size)
    k1 = s - first[0]
    k2 = k1 - first[1]
    k3 = k2 - first[2]
    intra_next = (g, ix.wrap(l + 1, size))
    inter_next = (ix.wrap(g + 1, groups), l)
    rs_block = (ix.wrap(l - 1 - s, size), j)
    ag_block = (ix.wrap(l - k3, size), j)
    rs_chunk = (l, ix.wrap(g - 1 - k1, groups))
    ag_chunk = (l, ix.wrap(g - k2, groups))
    cases = [
        (s < first[0], (True, intra_next, rs_block, REDUCE)),
        (k1 < first[1], (j == 0, inter_next, rs_chunk, REDUCE)),
        (k2 < first[2], (j == 0, inter_next, ag_chunk, COPY)),
    ]
    active, dst, chunk, op = True, intra_next, ag_block, COPY
    for condition, (a, d, c, o) in reversed(cases):
        active, op = ix.where(condition, a, active), ix.where(condition, o, op)
        dst = tuple(ix.where(condition, x, y) for x, y in zip(d, dst))
        chunk = tuple(ix.where(condition, x, y) for x, y in zip(c, chunk))
    return active, dst, chunk, chunk, op


def phase_lengths_of(groups, size):
    """Hops of the four phases for G groups of L: L - 1, G - 1, G - 1, L - 1."""
    return (size - 1, groups - 1, groups - 1, size - 1)


def program(size=1) -> Program:
    """The hierarchical ring for groups of ``size`` ranks (size divides N):
    :func:`pair_transfer` on rank r = (r // L, r % L), rank (g, l) = g L + l,
    chunk (b, i) = b G + i."""

    def transfer(n, s, r, j):
        groups = ix.floordiv(n, size)
        active, (dg, dl), (sb, si), (db, di), op = pair_transfer(groups, size, s, ix.floordiv(r, size), r % size, j)
        return Transfer(active, dg * size + dl, sb * groups + si, db * groups + di, op)

    def label(n, s):
        for phase, length in zip(PHASES, phase_lengths(n, size)):
            if s < length:
                return phase, None
            s -= length
        return PHASES[-1], None

    def steps(n):
        return sum(phase_lengths(n, size))

    def capacity(n):
        """G chunks: the intra-group hops move a whole block (1 for groups of one)."""
        return ix.where(size > 1, ix.floordiv(n, size), 1)

    return Program("hierarchical-ring", "allreduce", lambda n: n, steps, lambda n: ix.floordiv(n, size), transfer, label, program,
                   params={"size": size}, link_capacity=capacity, meta={"group_size": size},
                   title=lambda n: f"hierarchical-ring allreduce, {n} ranks ({n // size} groups of {size})")


def allreduce(n: int, group_size: int | None = None) -> Schedule:
    size = group_size or default_group_size(n)
    if n % size:
        raise ValueError(f"group size {size} does not divide {n} ranks")
    return program(size).schedule(n)
