"""Direct exchange and the hub.

``direct``: every rank sends straight to every rank that needs its data, in
one step per phase. For all-reduce, broadcast and reduce the vector is one
chunk (each rank sends its whole vector: (N-1) P per rank, the picture most
people carry); reduce-scatter, all-gather and all-to-all cut it into N
chunks, one per destination, and each link carries one chunk.

``hub``: reduce everything into one rank (the hub, rank ``root``), then send
the result back out. The hub's link carries 2(N-1) P; the other links sit idle.

Each is one transfer function (:class:`~collspec.models.program.Program`):
slot j of rank r sends to rank j (or to the root, in slot 0).
"""

from __future__ import annotations

from .. import indexing as ix
from ..program import Program, Transfer
from ..schedule import COPY, REDUCE, Schedule


def _ranks(n):
    return n


def _one(n):
    return 1


def _one_step(n):
    """One step, none for a single rank."""
    return ix.where(n > 1, 1, 0)


def _fixed(phase: str, name: str | None = None):
    return lambda n, s: (phase, name)


#: collective -> (chunks, phase, step name, transfer(n, r, j)); slot j sends to rank j != r
_EXCHANGES = {
    "allreduce": (_one, "exchange", "every rank sends its vector to every other", lambda n, r, j: Transfer(j != r, j, 0, 0, REDUCE)),
    "reduce_scatter": (_ranks, "reduce-scatter", None, lambda n, r, j: Transfer(j != r, j, j, j, REDUCE)),
    "allgather": (_ranks, "all-gather", None, lambda n, r, j: Transfer(j != r, j, r, r, COPY)),
    # block d of rank s becomes block s of rank d; reads see start-of-step
    # values, so the in-place swap needs no scratch space.
    "alltoall": (_ranks, "all-to-all", None, lambda n, r, j: Transfer(j != r, j, j, r, COPY)),
}


def exchange_program(collective: str) -> Program:
    chunks, phase, name, transfer = _EXCHANGES[collective]
    return Program("direct", collective, chunks, _one_step, _ranks, lambda n, s, r, j: transfer(n, r, j), _fixed(phase, name),
                   lambda: exchange_program(collective), title=lambda n: f"direct {collective}, {n} ranks")


def _to_root(root, r, j):
    return Transfer(ix.both(r != root, j == 0), root, 0, 0, REDUCE)


def _from_root(root, r, j):
    return Transfer(ix.both(r == root, j != root), j, 0, 0, COPY)


def broadcast_program(root=0) -> Program:
    return Program("direct", "broadcast", _one, _one_step, _ranks, lambda n, s, r, j: _from_root(root, r, j), _fixed("broadcast"),
                   lambda root: broadcast_program(root), params={"root": root}, root=root, title=lambda n: f"direct broadcast, {n} ranks")


def reduce_program(root=0) -> Program:
    return Program("direct", "reduce", _one, _one_step, _one, lambda n, s, r, j: _to_root(root, r, j), _fixed("reduce"),
                   lambda root: reduce_program(root), params={"root": root}, root=root, title=lambda n: f"direct reduce, {n} ranks")


def hub_program(root=0) -> Program:
    """Step 0: every other rank reduces into the hub; step 1: the hub copies back."""

    def transfer(n, s, r, j):
        up, down = _to_root(root, r, j), _from_root(root, r, j)
        first = s == 0
        return Transfer(*(ix.where(first, a, b) for a, b in zip((up.active, up.dst, up.src_chunk, up.dst_chunk, up.op), (down.active, down.dst, down.src_chunk, down.dst_chunk, down.op))))

    return Program("hub", "allreduce", _one, lambda n: 2 * _one_step(n), _ranks, transfer, lambda n, s: ("reduce" if s == 0 else "broadcast", None),
                   lambda root: hub_program(root), params={"root": root}, root=root, title=lambda n: f"hub allreduce, {n} ranks (hub: rank {root})")


def allreduce(n: int) -> Schedule:
    return exchange_program("allreduce").schedule(n)


def reduce_scatter(n: int) -> Schedule:
    return exchange_program("reduce_scatter").schedule(n)


def allgather(n: int) -> Schedule:
    return exchange_program("allgather").schedule(n)


def alltoall(n: int) -> Schedule:
    return exchange_program("alltoall").schedule(n)


def broadcast(n: int, root: int = 0) -> Schedule:
    return broadcast_program(root).schedule(n)


def reduce(n: int, root: int = 0) -> Schedule:
    return reduce_program(root).schedule(n)


def hub_allreduce(n: int, root: int = 0) -> Schedule:
    return hub_program(root).schedule(n)
