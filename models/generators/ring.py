"""Rings: ``ring`` and ``ring-seed`` (all-reduce, reduce-scatter,
all-gather) and the pipelined chain along the ring (broadcast, reduce).

Every hop, every rank sends one chunk to the next rank while receiving one
from the previous: all N links busy, one chunk each. The chunks come from
:mod:`collspec.models.indexing`, whose functions the proofs verify.
"""

from __future__ import annotations

import numpy as np

from .. import indexing as ix
from ..schedule import COPY, REDUCE, Schedule, Step

OWNERS = {"ring": ix.ring_owner, "ring-seed": ix.ring_seed_owner}
#: What the receiver does with a chunk in each phase.
REDUCE_SCATTER_OP = REDUCE
ALL_GATHER_OP = COPY


def _phase(n: int, owner, transfer, op: int, phase: str, first_hop: int) -> list[Step]:
    """The N - 1 hops of one ring phase; ``transfer`` is rs_transfer or ag_transfer."""
    r = np.arange(n)
    steps = []
    for s in range(ix.ring_hops(n)):
        dst, src_chunk, dst_chunk = transfer(owner, r, s, n)
        steps.append(Step.of(r, dst, src_chunk, dst_chunk, op, phase=phase, name=f"{phase} hop {first_hop + s}"))
    return steps


def _reduce_scatter_steps(n: int, owner) -> list[Step]:
    return _phase(n, owner, ix.rs_transfer, REDUCE_SCATTER_OP, "reduce-scatter", 1)


def _all_gather_steps(n: int, owner, first_hop: int = 1) -> list[Step]:
    return _phase(n, owner, ix.ag_transfer, ALL_GATHER_OP, "all-gather", first_hop)


def allreduce(n: int, variant: str = "ring") -> Schedule:
    owner = OWNERS[variant]
    steps = _reduce_scatter_steps(n, owner) + _all_gather_steps(n, owner, first_hop=n)
    return Schedule("allreduce", n, n, tuple(steps), name=f"{variant} allreduce, {n} ranks")


def reduce_scatter(n: int, variant: str = "ring") -> Schedule:
    """Rank r ends with chunk owner(r). For ``ring-seed`` that is r + 1, which
    the checker reports against the reduce-scatter postcondition (rank r owns
    chunk r) unless the schedule declares that ownership."""
    return Schedule("reduce_scatter", n, n, tuple(_reduce_scatter_steps(n, OWNERS[variant])), name=f"{variant} reduce_scatter, {n} ranks")


def allgather(n: int, variant: str = "ring") -> Schedule:
    # The all-gather collective starts with rank r holding block r.
    return Schedule("allgather", n, n, tuple(_all_gather_steps(n, ix.ring_owner)), name=f"{variant} allgather, {n} ranks")


def _chain(n: int, root: int, chunks: int, toward_root: bool) -> list[Step]:
    """Pipelined chain along the ring: from ``root`` to the rank before it
    (broadcast, copies), or from the rank after ``root`` around to ``root``
    (reduce, reduces). The p-th sender forwards chunk t - p at step t."""
    r = np.arange(n)
    q = ix.chain_position(r, root, n)
    order = q - 1 if toward_root else q  # p: which sender this rank is
    sends = (q >= 1) if toward_root else (q <= n - 2)
    op, phase = (REDUCE, "reduce") if toward_root else (COPY, "broadcast")
    steps = []
    for t in range(chunks + n - 2):
        chunk = ix.chain_chunk(order, t)
        active = sends & (chunk >= 0) & (chunk < chunks)
        src = r[active]
        steps.append(Step.of(src, ix.ring_next(src, n), chunk[active], chunk[active], op, phase=phase))
    return steps


def broadcast(n: int, root: int = 0, chunks: int | None = None) -> Schedule:
    chunks = chunks or max(n, 1)
    return Schedule("broadcast", n, chunks, tuple(_chain(n, root, chunks, False)), name=f"ring (pipelined chain) broadcast, {n} ranks", root=root)


def reduce(n: int, root: int = 0, chunks: int | None = None) -> Schedule:
    chunks = chunks or max(n, 1)
    return Schedule("reduce", n, chunks, tuple(_chain(n, root, chunks, True)), name=f"ring (pipelined chain) reduce, {n} ranks", root=root)
