"""nccl-tree's all-reduce computes every contribution exactly once, for every N <= 65536.

The induction of :mod:`collspec.proofs.induction` on ``nccl-tree``'s own
transfer function (:func:`collspec.models.generators.nccl_tree.tree_program`),
N symbolic in 2..65536 on bit-vectors, at fixed options (:data:`OPTIONS`):

- ``one-channel``: 1 channel, chunk 1, count 2: one tree (tree 0), two
  chunks in the pipeline;
- ``two-channels``: 2 channels, chunk 1, count 4, parts 2 and 2 given:
  channel 0 on tree 0 with cells 0, 1, channel 1 on tree 1 with cells 2,
  3, two chunks each. NCCL 2.30's own split puts 4 elements of a
  collective alone in its plan on one channel; the parts given are how it
  splits a collective that shares its plan with others (its channels
  start where the previous one's traffic ended), and they keep tree 1 in
  the proof.

The invariant below is stated from NCCL's tree definitions
(``ncclGetBtree`` / ``ncclGetDtree`` in ``src/graph/trees.cc``, the
``runTreeSplit`` pipeline in ``src/device/all_reduce.h``), written here
again rather than taken from the generator, so that a wrong generator
helper fails a query instead of agreeing with itself:

- labels: tree 0 gives rank r label r; tree 1 gives it N - 1 - r for even N
  and r - 1 mod N for odd N.
- tree 0 on labels: label 0 is the root, at level R = ceil(log2 N); a label
  y > 0 with lowest set bit b is at level log2 b, its parent is
  ``(y ^ b) | 2b`` or ``y ^ b`` when that is N or more, and its subtree is
  the labels z with y - b < z < y + b (the root's: all labels). Its left
  child is y - b/2 (level log2 b - 1), its right child the one above it,
  at level min(log2 b - 1, floor(log2(N - 1 - y))); the root's one child
  is to its right, at level R - 1.
- timing: chunk kk of a channel goes up from a label at level L at step
  kk + L (a reduce into the parent's cell) and down from it at step
  kk + 2R - L (a copy into each child's cell).

So after s steps, with d = s - kk, cell c (chunk kk of its channel, tree
t) of the rank with label y holds rank x's cell c (label z) exactly once
when: d >= 2R - level(parent(y)) + 1 (the copy from the parent has arrived;
for the root d >= R: its child's reduce has), or z = y, or z is in the left
child's subtree (y - b < z < y) and d >= level(y), or in the right child's
(y < z < y + b) and d > level of the right child. Every cell holds only
same-index contributions.

Premises beyond the induction's: none; the options are the ones named in the
scope (the count is a constant of the program, not tied to N). What stays
bounded: other channel counts, chunks and counts are the ``builtin.nccl-tree``
row's (N <= 6, or 16 under ``--full``).
"""

from __future__ import annotations

import z3

from ..models import indexing as ix
from ..models.generators import nccl_tree
from .induction import Invariant
from .scope import Fixed

ROLES = 3  # the slot layout (channel, element, role) the invariant's witnesses name

#: row suffix -> the options of the proved program
OPTIONS = {
    "one-channel": {"channels": 1, "chunk": 1, "count": 2},
    "two-channels": {"channels": 2, "chunk": 1, "count": 4, "parts": [2, 2]},
}


def row(name: str) -> str:
    """The ``collspec prove`` row of option set ``name`` (``--full`` only)."""
    return f"nccl-tree.allreduce-{name}-exactly-once"


def program(name: str):
    """The transfer function a row proves: nccl-tree's, at :data:`OPTIONS`."""
    return nccl_tree.tree_program(**OPTIONS[name])


def premises(name: str) -> tuple:
    """The options the row's program fixes, as premises of its scope
    (:mod:`collspec.proofs.scope`): in its text, and what a test builds the
    generator's schedule with."""
    o = OPTIONS[name]
    given = (Fixed("parts", lambda n: o["parts"], f"parts {', '.join(map(str, o['parts']))} (given, as NCCL 2.30 splits a collective that shares its plan)"),
             ) if "parts" in o else ()
    return (
        Fixed("channels", lambda n: o["channels"], f"{o['channels']} channel{'s' if o['channels'] > 1 else ''}"),
        Fixed("chunk", lambda n: o["chunk"], f"chunk {o['chunk']}"),
        Fixed("count", lambda n: o["count"], f"count {o['count']}"),
    ) + given


# -- the trees, restated (module text) -------------------------------------------------------


def _root_level(n):
    """R = ceil(log2 N) for N >= 2."""
    return ix.floor_log2(n - 1) + 1


def _low(y, n):
    """The lowest set bit of label y; 2^R for the root."""
    return ix.where(y == 0, ix.shift_left(1, _root_level(n), like=n), y & -y)


def _level(y, n):
    return ix.floor_log2(_low(y, n))


def _parent(y, n):
    b = y & -y
    up = (y ^ b) | (2 * b)
    return ix.where(up >= n, y ^ b, up)


def _right_level(y, n):
    """Level of y's right child (when it has one)."""
    return ix.where(y == 0, _root_level(n) - 1, ix.where(_level(y, n) - 1 < ix.floor_log2(n - 1 - y), _level(y, n) - 1, ix.floor_log2(n - 1 - y)))


def _right_child(y, n):
    return y + ix.shift_left(1, _right_level(y, n), like=n)


def _label(r, n, tree):
    if tree == 0:
        return r
    return ix.where(n % 2 == 0, n - 1 - r, ix.where(r == 0, n - 1, r - 1))


def _rank(y, n, tree):
    if tree == 0:
        return y
    return ix.where(n % 2 == 0, n - 1 - y, ix.where(y == n - 1, 0, y + 1))


def _full_at(y, n):
    """d from which label y's cell holds every contribution."""
    return ix.where(y == 0, _root_level(n), 2 * _root_level(n) - _level(_parent(y, n), n) + 1)


# -- the invariant --------------------------------------------------------------------------


def invariant(name: str) -> Invariant:
    """The claim of the module text for the program of row ``name``."""
    o = OPTIONS[name]
    channels, chunk, count = o["channels"], o["chunk"], o["count"]
    parts = o.get("parts", [count])  # one channel: the whole vector, as NCCL 2.30 splits it
    per = parts[0]  # equal parts: channel h holds cells h per .. h per + per - 1
    assert len(parts) == channels and parts == [per] * channels, "the invariant is stated for equal parts on every channel"
    trees = [0 if 2 * h < channels else 1 for h in range(channels)]

    def where_is(c):
        """(channel, chunk kk, element e) of cell c."""
        h = 0
        for i in range(1, channels):
            h = ix.where(c >= i * per, i, h)
        inside = c - h * per
        return h, ix.floordiv(inside, chunk), inside % chunk if chunk > 1 else 0

    def per_tree(h, pick):
        """pick(tree) on the tree of channel h (a Z3 term when h is)."""
        if channels == 1:
            return pick(trees[0])
        out = pick(trees[-1])
        for i in range(channels - 2, -1, -1):
            out = ix.where(h == i, pick(trees[i]), out)
        return out

    def holds(n, s, r, c, x, k):
        h, kk, _ = where_is(c)

        def in_tree(tree):
            y, z = _label(r, n, tree), _label(x, n, tree)
            d, b = s - kk, _low(y, n)
            return z3.Or(
                d >= _full_at(y, n),
                z == y,
                z3.And(y - b < z, z < y, d >= _level(y, n)),
                z3.And(y < z, z < y + b, d > _right_level(y, n)),
            )

        return z3.And(k == c, per_tree(h, in_tree))

    def slot(h, e, role):
        return (h * chunk + e) * ROLES + role

    def witness(n, s, r, c, below):
        """(rank, slot): the parent's copy at d = full_at - 1, else the child ``below(y)`` picks."""
        h, kk, e = where_is(c)

        def rank_of(tree):
            y = _label(r, n, tree)
            p = _parent(y, n)
            down = z3.And(y != 0, s - kk == _full_at(y, n) - 1)
            return ix.where(down, _rank(p, n, tree), _rank(below(tree, y, n, s - kk), n, tree))

        def slot_of(tree):
            y = _label(r, n, tree)
            down = z3.And(y != 0, s - kk == _full_at(y, n) - 1)
            return ix.where(down, slot(h, e, ix.where(y < _parent(y, n), 1, 2)), slot(h, e, 0))

        return per_tree(h, rank_of), per_tree(h, slot_of)

    def writer(n, s, r, c):
        def below(tree, y, n, d):
            left = z3.And(y != 0, d == _level(y, n) - 1)
            return ix.where(left, y - z3.LShR(_low(y, n), 1), _right_child(y, n))

        return witness(n, s, r, c, below)

    def source(n, s, r, c, x, k):
        def below(tree, y, n, d):
            z = _label(x, n, tree)
            return ix.where(z < y, y - z3.LShR(_low(y, n), 1), _right_child(y, n))

        return witness(n, s, r, c, below)

    def cases(params, s, n):
        """One query per channel (and per parity of N on tree 1): the
        induction's cell is the variable ``c`` of
        :func:`collspec.proofs.induction.queries`, named here."""
        if channels == 1:
            return []
        c = z3.BitVec("c", s.size())
        split = []
        for h in range(channels - 1):
            split.append((f"channel {h}", c < (h + 1) * per))
            if trees[h] == 1:
                split.append((f"channel {h}, even N", n % 2 == 0))
        if trees[-1] == 1:
            split.append((f"channel {channels - 1}, even N", n % 2 == 0))
        return split

    return Invariant(defined=lambda n, s, r, c: True, holds=holds, writer=writer, source=source, premises=premises(name), cases=cases)


def prove(name: str):
    """Row ``name``: the spec's postcondition check, then the induction
    (each check within the row's resource limit, ``proofs.suite.RLIMITS``)."""
    from .induction import queries, spec_check
    from .solver import run_queries

    return run_queries([spec_check("allreduce"), *queries(program(name), invariant(name))])
