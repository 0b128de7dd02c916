"""Direct exchange and the hub.

``direct``: every rank sends straight to every rank that needs its data, in
one step per phase. For all-reduce, broadcast and reduce the vector is one
chunk (each rank sends its whole vector: (N-1) P per rank, the picture most
people carry); reduce-scatter, all-gather and all-to-all cut it into N
chunks, one per destination, and each link carries one chunk.

``hub``: reduce everything into one rank (the hub, rank ``root``), then send
the result back out. The hub's link carries 2(N-1) P; the other links sit idle.
"""

from __future__ import annotations

import numpy as np

from ..schedule import COPY, REDUCE, Schedule, Step


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair (src, dst) with src != dst, src-major."""
    src, dst = np.divmod(np.arange(n * n), n)
    keep = src != dst
    return src[keep], dst[keep]


def _to_root(n: int, root: int, op: int, phase: str) -> Step:
    others = np.array([r for r in range(n) if r != root], dtype=int)
    return Step.of(others, root, 0, 0, op, phase=phase)


def _from_root(n: int, root: int, phase: str) -> Step:
    others = np.array([r for r in range(n) if r != root], dtype=int)
    return Step.of(root, others, 0, 0, COPY, phase=phase)


def allreduce(n: int) -> Schedule:
    src, dst = _pairs(n)
    steps = (Step.of(src, dst, 0, 0, REDUCE, phase="exchange", name="every rank sends its vector to every other"),) if n > 1 else ()
    return Schedule("allreduce", n, 1, steps, name=f"direct allreduce, {n} ranks")


def reduce_scatter(n: int) -> Schedule:
    src, dst = _pairs(n)
    steps = (Step.of(src, dst, dst, dst, REDUCE, phase="reduce-scatter"),) if n > 1 else ()
    return Schedule("reduce_scatter", n, n, steps, name=f"direct reduce_scatter, {n} ranks")


def allgather(n: int) -> Schedule:
    src, dst = _pairs(n)
    steps = (Step.of(src, dst, src, src, COPY, phase="all-gather"),) if n > 1 else ()
    return Schedule("allgather", n, n, steps, name=f"direct allgather, {n} ranks")


def alltoall(n: int) -> Schedule:
    # block d of rank s becomes block s of rank d; reads see start-of-step
    # values, so the in-place swap needs no scratch space.
    src, dst = _pairs(n)
    steps = (Step.of(src, dst, dst, src, COPY, phase="all-to-all"),) if n > 1 else ()
    return Schedule("alltoall", n, n, steps, name=f"direct alltoall, {n} ranks")


def broadcast(n: int, root: int = 0) -> Schedule:
    steps = (_from_root(n, root, "broadcast"),) if n > 1 else ()
    return Schedule("broadcast", n, 1, steps, name=f"direct broadcast, {n} ranks", root=root)


def reduce(n: int, root: int = 0) -> Schedule:
    steps = (_to_root(n, root, REDUCE, "reduce"),) if n > 1 else ()
    return Schedule("reduce", n, 1, steps, name=f"direct reduce, {n} ranks", root=root)


def hub_allreduce(n: int, root: int = 0) -> Schedule:
    steps = (_to_root(n, root, REDUCE, "reduce"), _from_root(n, root, "broadcast")) if n > 1 else ()
    return Schedule("allreduce", n, 1, steps, name=f"hub allreduce, {n} ranks (hub: rank {root})", root=root)
