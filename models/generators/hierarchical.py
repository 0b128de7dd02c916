"""Hierarchical ring all-reduce: rings inside groups, then across them.

N = G x L ranks: group g = r // L (a node), local index l = r % L (a GPU in
it). The vector is cut into L blocks of G chunks (chunk c is in block c // G).

1. intra-group reduce-scatter: a ring over the L ranks of each group, one
   block (G chunks) per hop; local rank l ends with block l reduced over its
   group;
2. inter-group reduce-scatter then 3. inter-group all-gather: a ring over the
   G ranks that share local index l, on block l, one chunk per hop;
4. intra-group all-gather of the blocks.

Traffic per rank is 2(N-1)/N of the vector, the lower bound, while only
2(G-1) of the 2(L-1) + 2(G-1) hops cross group boundaries. The ring index
formulas are :mod:`collspec.models.indexing`'s, applied within each ring.
The intra-group hops move a whole block, so the schedule declares a link
capacity of G chunks.
"""

from __future__ import annotations

import numpy as np

from .. import indexing as ix
from ..schedule import COPY, REDUCE, Schedule, Step


def default_group_size(n: int) -> int:
    """The largest divisor of n that is at most sqrt(n) (1 for primes)."""
    return max(d for d in range(1, int(n**0.5) + 1) if n % d == 0) if n > 0 else 1


def allreduce(n: int, group_size: int | None = None) -> Schedule:
    size = group_size or default_group_size(n)
    if n % size:
        raise ValueError(f"group size {size} does not divide {n} ranks")
    groups = n // size
    r = np.arange(n)
    g, l = r // size, r % size
    intra_next = g * size + ix.ring_next(l, size)
    inter_next = ix.ring_next(g, groups) * size + l
    block = np.arange(groups)

    def blocks(b):  # every chunk of block b, for each rank: shape (ranks, G)
        return (b[:, None] * groups + block[None, :]).ravel()

    steps = []
    for s in range(size - 1):
        chunk = blocks(ix.ring_rs_send(l, s, size))
        steps.append(Step.of(np.repeat(r, groups), np.repeat(intra_next, groups), chunk, chunk, REDUCE, phase="intra reduce-scatter"))
    for s in range(groups - 1):
        chunk = l * groups + ix.ring_rs_send(g, s, groups)
        steps.append(Step.of(r, inter_next, chunk, chunk, REDUCE, phase="inter reduce-scatter"))
    for s in range(groups - 1):
        chunk = l * groups + ix.ag_send(ix.ring_owner, g, s, groups)
        steps.append(Step.of(r, inter_next, chunk, chunk, COPY, phase="inter all-gather"))
    for s in range(size - 1):
        chunk = blocks(ix.ag_send(ix.ring_owner, l, s, size))
        steps.append(Step.of(np.repeat(r, groups), np.repeat(intra_next, groups), chunk, chunk, COPY, phase="intra all-gather"))
    return Schedule(
        "allreduce",
        n,
        n,
        tuple(steps),
        name=f"hierarchical-ring allreduce, {n} ranks ({groups} groups of {size})",
        link_capacity=groups if size > 1 else 1,
        meta={"group_size": size},
    )
