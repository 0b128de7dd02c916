"""``nccl-tree``: NCCL's double binary tree all-reduce, as one transfer function.

The trees are the ones NCCL builds (``ncclGetBtree`` and ``ncclGetDtree``
in ``src/graph/trees.cc``; see docs/nccl.md), here over N ranks with one
rank per node.

- Tree 0 (``ncclGetBtree``) on labels 0..N-1: rank 0 is the root; a label
  x > 0 with lowest set bit b sits at level log2(b). Its parent is
  ``(x ^ b) | 2b``, or ``x ^ b`` when that is N or more; its children are
  ``x - b/2`` and ``x + b'`` for the largest power of two ``b' <= b/2``
  that stays below N (none for odd x). The root's one child is the largest
  power of two below N. Written closed form (:func:`btree_parent`,
  :func:`btree_child`) so that numpy and Z3 evaluate the same thing; the
  tests compare it with a literal transcription of NCCL's loop.
- Tree 1 (``ncclGetDtree``): the mirror of tree 0 (rank r has label
  N - 1 - r) for even N, tree 0 shifted by one (rank r has label r - 1 mod
  N) for odd N.
- Channels: the vector is cut into contiguous channel parts of
  ``divUp(count, C)`` elements (the last one the rest; not NCCL's host
  split, which ``nccl-ring`` models: see docs/nccl.md); the first half of the channels run on tree 0, the rest on
  tree 1 (``connectTrees`` in ``src/graph/connect.cc`` puts channel c and
  c + nChannels on the two trees). Each channel walks its part in chunks of
  ``chunk`` elements (the last one short).
- Schedule (``runTreeSplit`` in ``src/device/all_reduce.h``: the reduce up
  and the broadcast down run at once, the root reduces and sends down in one
  primitive). A rank at level L sends chunk k to its parent (reduce) at step
  k + L, after every child (levels below L) has sent it; the root, at level
  R = ceil(log2 N), has chunk k complete after step k + R - 1 and every rank
  copies chunk k to its children at step k + 2R - L. Up and down overlap in
  the pipeline: K chunks take K + 2R - 1 steps.

Slots: ``(channel, element of the chunk, role)`` with role 0 the send up,
1 and 2 the sends to child 0 and child 1.

>>> s = generate_tree(6, channels=2, chunk=1, count=4)
>>> [t["parent"] for t in s.meta["trees"]]
[[-1, 2, 4, 2, 0, 4], [1, 5, 3, 1, 3, -1]]
"""

from __future__ import annotations

import numpy as np

from .. import indexing as ix
from ..program import BITVEC, Program, Transfer
from ..schedule import COPY, REDUCE, Schedule
from .nccl_ring import MAX_CHANNELS, Layout, _integer, most_per_link

ALGORITHM = "nccl-tree"
#: cells stay well inside the proofs' 20-bit vectors
MAX_CELLS = 1 << 17
DEFAULTS = {"channels": 2, "chunk": 2, "count": 12}
ROLES = 3


def _nonzero(x):
    return ix.where(x == 0, 1, x)


def root_level(n):
    """R: the root's level, ceil(log2 N) (0 for one rank)."""
    return ix.where(n >= 2, ix.floor_log2(_nonzero(n - 1)) + 1, 0)


def btree_level(x, n):
    """Level of label x in tree 0: log2 of its lowest set bit, R for the root."""
    return ix.where(x == 0, root_level(n), ix.floor_log2(ix.lowest_set_bit(_nonzero(x))))


def btree_parent(x, n):
    """Parent label of x >= 1 in tree 0 (``ncclGetBtree``'s ``up``)."""
    b = ix.lowest_set_bit(_nonzero(x))
    above = ix.floordiv(x, 2 * b) % 2 == 1  # x already has bit 2b: (x ^ b) | 2b = x - b
    return ix.where(above, x - b, ix.where(x + b < n, x + b, x - b))


def btree_child(x, n, which):
    """Child ``which`` (0 or 1) of label x in tree 0, -1 for none
    (``ncclGetBtree``'s ``down0``/``down1``)."""
    b = ix.lowest_set_bit(_nonzero(x))
    half = ix.floordiv(b, 2)
    room = n - 1 - x  # how far right a child may go
    right = ix.where(half < ix.largest_power_of_two(_nonzero(room)), half, ix.largest_power_of_two(_nonzero(room)))
    root_child = ix.where(n >= 2, ix.largest_power_of_two(_nonzero(n - 1)), -1)
    inner0 = ix.where(half >= 1, x - half, -1)
    inner1 = ix.where(ix.both(half >= 1, room >= 1), x + right, -1)
    return ix.where(x == 0, ix.where(which == 0, -1, root_child), ix.where(which == 0, inner0, inner1))


def to_label(r, n, tree):
    """Rank r's label in tree 0 or 1 (mirror for even N, shift for odd N)."""
    other = ix.where(n % 2 == 0, n - 1 - r, (r + n - 1) % n)
    return ix.where(tree == 0, r, other)


def to_rank(x, n, tree):
    """The rank with label x (-1 stays -1)."""
    other = ix.where(n % 2 == 0, n - 1 - x, (x + 1) % n)
    return ix.where(x < 0, -1, ix.where(tree == 0, x, other))


def tree_of(channel, channels):
    """The tree channel c runs on: the first half on tree 0, the rest on tree 1."""
    return ix.where(2 * channel >= channels, 1, 0)


def parents(n: int) -> list[list[int]]:
    """Both trees as parent arrays over ranks (-1 for the root)."""
    ranks = np.arange(n, dtype=np.int64)
    out = []
    for tree in (0, 1):
        x = to_label(ranks, n, tree)
        parent = to_rank(ix.where(x == 0, -1, btree_parent(x, n)), n, tree)
        out.append([int(p) for p in parent])
    return out


def trees(n: int) -> list[dict]:
    """Both trees over ranks: ``{"parent": [...], "children": [[...], ...]}``
    (-1 for the root's parent; each rank's children in NCCL's down0, down1
    order). Numpy over all ranks at once: N = 65536 in well under a second."""
    ranks = np.arange(n, dtype=np.int64)
    out = []
    for tree in (0, 1):
        x = to_label(ranks, n, tree)
        parent = to_rank(ix.where(x == 0, -1, btree_parent(x, n)), n, tree)
        kids = np.stack([to_rank(btree_child(x, n, w), n, tree) for w in (0, 1)], axis=1)
        out.append({"parent": parent.tolist(), "children": [[int(k) for k in row if k >= 0] for row in kids.tolist()]})
    return out


def tree_facts(n: int) -> dict:
    """Check that both trees are spanning binary trees over the n ranks, with
    :func:`btree_child` and :func:`btree_parent` describing the same edges,
    and say which ranks forward (have a child) in both trees. Numpy over all
    ranks at once; raises ValueError naming the first broken property."""
    ranks = np.arange(n, dtype=np.int64)
    interior = []
    for tree in (0, 1):
        x = to_label(ranks, n, tree)
        parent = to_rank(ix.where(x == 0, -1, btree_parent(x, n)), n, tree)
        kids = np.stack([to_rank(btree_child(x, n, w), n, tree) for w in (0, 1)])
        if np.count_nonzero(parent == -1) != 1:
            raise ValueError(f"N={n} tree {tree}: {np.count_nonzero(parent == -1)} roots")
        if ((parent < -1) | (parent >= n) | (parent == ranks)).any():
            raise ValueError(f"N={n} tree {tree}: a parent out of range")
        # every child names its parent, and every non-root is some rank's child exactly once
        listed = kids[kids >= 0]
        owner = np.broadcast_to(ranks, kids.shape)[kids >= 0]
        if not np.array_equal(parent[listed], owner):
            raise ValueError(f"N={n} tree {tree}: a child's parent is not the rank that lists it")
        if listed.size != n - 1 or np.unique(listed).size != n - 1:
            raise ValueError(f"N={n} tree {tree}: children lists do not cover the n - 1 non-roots once each")
        # no cycle: 2**17 > 65536 steps up from any rank reach past the root
        jump = np.where(parent < 0, n, parent)
        jump = np.append(jump, n)
        for _ in range(17):
            jump = jump[jump]
        if (jump[:n] != n).any():
            raise ValueError(f"N={n} tree {tree}: a cycle")
        interior.append((kids >= 0).any(axis=0))
    both = np.flatnonzero(interior[0] & interior[1])
    return {"ranks": n, "interior_in_both": both.tolist()}


def tree_program(channels=None, chunk=None, count=None) -> Program:
    """The transfer function (see the module text)."""
    layout = layout_of(channels, chunk, count)
    C, K = layout.channels, layout.chunk

    def steps(n):
        rounds = ix.floordiv(layout.most(n) + K - 1, K)
        return ix.where(n >= 2, rounds + 2 * root_level(n) - 1, 0)

    def transfer(n, s, r, j):
        c = ix.floordiv(j, K * ROLES)
        e = ix.floordiv(j, ROLES) % K
        role = j % ROLES
        tree = tree_of(c, C)
        x = to_label(r, n, tree)
        level = btree_level(x, n)
        up = role == 0
        k = ix.where(up, s - level, s - 2 * root_level(n) + level)
        peer = ix.where(up, ix.where(x == 0, -1, btree_parent(x, n)), btree_child(x, n, role - 1))
        cell_in_part = k * K + e
        active = ix.both(peer >= 0, k >= 0, cell_in_part < layout.part(c, n))
        cell = layout.off(c, n) + cell_in_part
        return Transfer(active, to_rank(peer, n, tree), cell, cell, ix.where(up, REDUCE, COPY))

    def label(n, s):
        return "reduce up / broadcast down", f"pipeline step {int(s)}"

    def capacity(n, built):
        most = 1
        for step in built:
            if len(step):
                most = max(most, most_per_link(n, step))
        return most

    return Program(
        ALGORITHM, "allreduce", lambda n: layout.count, steps, lambda n: C * K * ROLES, transfer, label,
        lambda: tree_program(channels, chunk, count), capacity=capacity, sort=BITVEC,
        title=lambda n: f"{ALGORITHM} allreduce, {n} ranks, {C} channels, chunk {K}, {layout.count} elements",
        meta={"channels": C, "chunk": K, "count": layout.count},
    )


def layout_of(channels=None, chunk=None, count=None) -> Layout:
    channels = _integer("channels", DEFAULTS["channels"] if channels is None else channels, 1, MAX_CHANNELS, ALGORITHM)
    chunk = _integer("chunk", DEFAULTS["chunk"] if chunk is None else chunk, 1, MAX_CELLS, ALGORITHM)
    count = _integer("count", DEFAULTS["count"] if count is None else count, 0, MAX_CELLS, ALGORITHM)
    per = -(-count // channels)
    parts = [max(0, min(per, count - c * per)) for c in range(channels)]
    return Layout("allreduce", count, channels, chunk, 1, None, 0, equal=parts)


def generate_tree(n: int, channels=None, chunk=None, count=None) -> Schedule:
    """The ``nccl-tree`` all-reduce on n ranks, its trees in ``meta["trees"]``."""
    schedule = tree_program(channels, chunk, count).schedule(n)
    schedule.meta["trees"] = trees(n)
    layout = layout_of(channels, chunk, count)
    schedule.meta["channel_table"] = [{"tree": int(tree_of(c, layout.channels)), "count": int(p)} for c, p in enumerate(layout.parts(n)) if int(p)]
    return schedule


def program_factory(**options) -> Program:
    return tree_program(**options)
