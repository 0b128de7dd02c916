"""Binary trees: reduce up a heap-ordered binary tree, broadcast down it.

Tree position p has children 2p+1 and 2p+2; position p is rank
(p + root) mod N. Reduce runs level by level from the deepest; a parent
reduces both children's chunks in the same step. Broadcast runs the other
way. All-reduce is the two in sequence, 2 * depth steps. The vector is one
chunk; a parent sends to two children, so the tree is not bandwidth-optimal
(the checker warns) but its depth is only log2 N.
"""

from __future__ import annotations

import numpy as np

from ..indexing import tree_parent
from ..schedule import COPY, REDUCE, Schedule, Step


def _levels(n: int) -> list[np.ndarray]:
    """Positions 1..n-1 grouped by depth (depth 1 first)."""
    if n <= 1:
        return []
    depth = np.floor(np.log2(np.arange(1, n) + 1)).astype(int)
    return [np.arange(1, n)[depth == d] for d in range(1, int(depth.max()) + 1)]


def _rank(p, root: int, n: int):
    return (p + root) % n


def _up(n: int, root: int) -> list[Step]:
    return [
        Step.of(_rank(level, root, n), _rank(tree_parent(level), root, n), 0, 0, REDUCE, phase="reduce", name=f"reduce level {d}")
        for d, level in reversed(list(enumerate(_levels(n), start=1)))
    ]


def _down(n: int, root: int) -> list[Step]:
    return [
        Step.of(_rank(tree_parent(level), root, n), _rank(level, root, n), 0, 0, COPY, phase="broadcast", name=f"broadcast level {d}")
        for d, level in enumerate(_levels(n), start=1)
    ]


def allreduce(n: int) -> Schedule:
    return Schedule("allreduce", n, 1, tuple(_up(n, 0) + _down(n, 0)), name=f"binary-tree allreduce, {n} ranks")


def reduce(n: int, root: int = 0) -> Schedule:
    return Schedule("reduce", n, 1, tuple(_up(n, root)), name=f"binary-tree reduce, {n} ranks", root=root)


def broadcast(n: int, root: int = 0) -> Schedule:
    return Schedule("broadcast", n, 1, tuple(_down(n, root)), name=f"binary-tree broadcast, {n} ranks", root=root)
