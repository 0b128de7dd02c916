"""Rings: ``ring`` and ``ring-seed`` (all-reduce, reduce-scatter,
all-gather) and the pipelined chain along the ring (broadcast, reduce).

Every hop, every rank sends one chunk to the next rank while receiving one
from the previous: all N links busy, one chunk each. Each algorithm is one
transfer function (:class:`~collspec.models.program.Program`) built from
:mod:`collspec.models.indexing`; the generator enumerates it and the proofs
evaluate it, so both see the same code.
"""

from __future__ import annotations

from .. import indexing as ix
from ..program import Program, Transfer
from ..schedule import COPY, REDUCE, Schedule

OWNERS = {"ring": ix.ring_owner, "ring-seed": ix.ring_seed_owner}
#: What the receiver does with a chunk in each phase.
REDUCE_SCATTER_OP = REDUCE
ALL_GATHER_OP = COPY

RS, AG = "reduce-scatter", "all-gather"


def _chunks(n):
    return n


def _one(n):
    return 1


def _hops(n):
    return ix.ring_hops(n)


def _two_phases(n):
    return 2 * ix.ring_hops(n)


def _phase_transfer(phase: str, owner, r, hop, n) -> Transfer:
    """Rank r's one transfer at ``hop`` of a ring phase."""
    if phase == RS:
        dst, src_chunk, dst_chunk = ix.rs_transfer(owner, r, hop, n)
        return Transfer(True, dst, src_chunk, dst_chunk, REDUCE_SCATTER_OP)
    dst, src_chunk, dst_chunk = ix.ag_transfer(owner, r, hop, n)
    return Transfer(True, dst, src_chunk, dst_chunk, ALL_GATHER_OP)


def _either_phase(n, s, first: Transfer, second: Transfer) -> Transfer:
    """``first`` during the reduce-scatter's hops, then ``second``."""
    in_first = s < ix.ring_hops(n)
    return Transfer(
        ix.where(in_first, first.active, second.active),
        ix.where(in_first, first.dst, second.dst),
        ix.where(in_first, first.src_chunk, second.src_chunk),
        ix.where(in_first, first.dst_chunk, second.dst_chunk),
        ix.where(in_first, first.op, second.op),
    )


def _label(phases: tuple[str, ...], first_hops: tuple[int, ...]):
    def label(n, s):
        k = min(int(s) // max(int(ix.ring_hops(n)), 1), len(phases) - 1)
        hop = int(s) - k * int(ix.ring_hops(n))
        return phases[k], f"{phases[k]} hop {(first_hops[k] if first_hops[k] else n) + hop}"

    return label


def allreduce_program(variant: str = "ring") -> Program:
    owner = OWNERS[variant]

    def transfer(n, s, r, j):
        hops = ix.ring_hops(n)
        return _either_phase(n, s, _phase_transfer(RS, owner, r, s, n), _phase_transfer(AG, owner, r, s - hops, n))

    return Program(variant, "allreduce", _chunks, _two_phases, _one, transfer, _label((RS, AG), (1, 0)), lambda: allreduce_program(variant),
                   title=lambda n: f"{variant} allreduce, {n} ranks")


def reduce_scatter_program(variant: str = "ring") -> Program:
    """Rank r ends with chunk owner(r). For ``ring-seed`` that is r + 1, which
    the checker reports against the reduce-scatter postcondition (rank r owns
    chunk r) unless the schedule declares that ownership."""
    owner = OWNERS[variant]
    return Program(variant, "reduce_scatter", _chunks, _hops, _one, lambda n, s, r, j: _phase_transfer(RS, owner, r, s, n), _label((RS,), (1,)),
                   lambda: reduce_scatter_program(variant), title=lambda n: f"{variant} reduce_scatter, {n} ranks")


def allgather_program(variant: str = "ring") -> Program:
    # The all-gather collective starts with rank r holding block r.
    return Program(variant, "allgather", _chunks, _hops, _one, lambda n, s, r, j: _phase_transfer(AG, ix.ring_owner, r, s, n), _label((AG,), (1,)),
                   lambda: allgather_program(variant), title=lambda n: f"{variant} allgather, {n} ranks")


def chain_program(collective: str, root=0, chunks=None) -> Program:
    """Pipelined chain along the ring: from ``root`` to the rank before it
    (broadcast, copies), or from the rank after ``root`` around to ``root``
    (reduce, reduces). The p-th sender forwards chunk t - p at step t;
    ``chunks`` (default N) is how many pieces the vector is cut into."""
    toward_root = collective == "reduce"
    op, phase = (REDUCE, "reduce") if toward_root else (COPY, "broadcast")

    def count(n):
        return n if chunks is None else chunks

    def transfer(n, t, r, j):
        q = ix.chain_position(r, root, n)
        order = q - 1 if toward_root else q
        sends = q >= 1 if toward_root else q <= n - 2
        chunk = ix.chain_chunk(order, t)
        return Transfer(ix.both(sends, chunk >= 0, chunk < count(n)), ix.ring_next(r, n), chunk, chunk, op)

    params = {"root": root} if chunks is None else {"root": root, "chunks": chunks}
    return Program(
        "ring", collective, count, lambda n: count(n) + n - 2, _one, transfer, lambda n, s: (phase, None),
        lambda **p: chain_program(collective, **p), params=params, root=root,
        title=lambda n: f"ring (pipelined chain) {collective}, {n} ranks",
    )


def allreduce(n: int, variant: str = "ring") -> Schedule:
    return allreduce_program(variant).schedule(n)


def reduce_scatter(n: int, variant: str = "ring") -> Schedule:
    return reduce_scatter_program(variant).schedule(n)


def allgather(n: int, variant: str = "ring") -> Schedule:
    return allgather_program(variant).schedule(n)


def broadcast(n: int, root: int = 0, chunks: int | None = None) -> Schedule:
    return chain_program("broadcast", root, chunks).schedule(n)


def reduce(n: int, root: int = 0, chunks: int | None = None) -> Schedule:
    return chain_program("reduce", root, chunks).schedule(n)
