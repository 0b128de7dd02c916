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
  the proof. Channel 1 is carried from channel 0 by lemmas (below).

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

Two channels: what is proved vs argued. Channel 1 runs tree 1, which is
tree 0 with its labels renamed (a mirror for even N, a shift for odd N);
deciding its cells' queries directly took Z3 about six times what channel
0's take. So the induction's queries about one cell (r, c) are decided for
channel 0's cells only (``c`` < 2, a :attr:`Query.pin`), and Z3 decides,
on the generator's own transfer function for every N of the scope
(:func:`channel_queries`):

1. ``channels``: the program has 2 x 3 slots, and an active transfer of a
   slot of channel h (slot j div 3 = h) reads and writes cells of channel h
   only (2h and 2h + 1);
2. ``renaming``: tree 1's rank of a label and label of a rank (restated
   here, :func:`_rank`, :func:`_label`) are inverse bijections of 0..N-1;
3. ``channel 1`` (split by the parity of N and the slot's role, an
   exhaustive case split): slot j + 3 of the rank with tree-1 label y does
   what slot j of rank y does (same activity and op), its destination the
   rank of tree-1 label of slot j's destination, its cells two on.

The queries about one transfer (in-range, same-index, reads-data) and the
ends (base, end) are decided for every slot and every cell.

The argument that carries channel 0 to channel 1 (not a Z3 query), under
the interpreter's semantics (all reads see the start of a step, a copy
replaces its cell, a reduce adds multisets): by 1, a channel's cells are
written only by its own slots, which read only its cells, so the cells of
each channel evolve on their own. Channel 0's cells are closed under
"read by a writer of", so the induction restricted to them (the pinned
queries, with the unpinned ones) shows that after every step each holds the
invariant's contributions, and at the end (the ``end`` query, every cell)
each holds every rank's same cell exactly once. By 2 and 3, the map
(rank y -> tree 1's rank of label y, cell c -> c + 2, slot j -> j + 3) is a
bijection from channel 0's transfers onto channel 1's that maps each step
of channel 0 onto the same step of channel 1; channel 1's cells start from
the images of channel 0's inputs (every cell its own contribution). So,
by induction on the steps, cell c + 2 of that rank holds the image of
what cell c of rank y holds, with the same multiplicities: every rank's
cell c + 2 exactly once (the rank map is a bijection), and adds only into
the same index (same-index, every slot). Measured on z3-solver 5.4.1, 2
shared cores: the row's channel-1 queries took about 190 of its 220 s of
CPU (load 6); the lemmas take about 6 s.

Premises beyond the induction's: none; the options are the ones named in the
scope (the count is a constant of the program, not tied to N). What stays
bounded: other channel counts, chunks and counts are the ``builtin.nccl-tree``
row's (N <= 6, or 16 under ``--full``).
"""

from __future__ import annotations

import z3

from ..models import indexing as ix
from ..models.generators import nccl_tree
from ..models.program import BITVEC_WIDTH
from .induction import Invariant
from .scope import Fixed
from .solver import Query

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


def _options(name) -> dict:
    """The options of row ``name``, or ``name`` itself when it is an options
    dict (the one-cell program of :mod:`collspec.proofs.nccl_tree_sizes`)."""
    return OPTIONS[name] if isinstance(name, str) else name


def premises(name) -> tuple:
    """The options the row's program fixes, as premises of its scope
    (:mod:`collspec.proofs.scope`): in its text, and what a test builds the
    generator's schedule with."""
    o = _options(name)
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


def invariant(name) -> Invariant:
    """The claim of the module text for the program of row ``name`` (or of
    the options dict ``name``)."""
    o = _options(name)
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

    return Invariant(defined=lambda n, s, r, c: True, holds=holds, writer=writer, source=source, premises=premises(name))


# -- two channels: channel 1 is channel 0 renamed (module text) ---------------------------------


#: the induction's queries about one transfer (slot j of rank q): decided for every slot
_SENDER_QUERIES = ("in-range", "same-index", "reads-data")
#: the induction's queries about every cell at once (the ends): decided for every cell
_END_QUERIES = ("base", "end")


def _per_channel(name: str) -> tuple[int, int, int]:
    """(channels, cells per channel, slots per channel) of row ``name``."""
    o = OPTIONS[name]
    parts = o.get("parts", [o["count"]])
    return o["channels"], parts[0], o["chunk"] * ROLES


def channel_queries(name: str) -> list:
    """The lemmas that carry channel 0's cell queries to channel 1 (module
    text), on the generator's transfer function, every N of the scope:

    - ``channels``: the program has ``channels`` x ``chunk`` x 3 slots, and an
      active transfer of a slot of channel h (slot j div (chunk x 3) = h)
      reads and writes cells of channel h only (h per .. h per + per - 1);
    - ``renaming`` (two queries): tree 1's rank of a label (restated here,
      :func:`_rank`) and its label of a rank (:func:`_label`) are inverse
      bijections of 0..N-1;
    - ``channel 1``: slot j + chunk x 3 of the rank with tree-1 label y is
      slot j (of channel 0) of rank y with its destination renamed to the
      rank of that label and its cells moved by one part (same activity
      and op)."""
    from ..models.program import Transfer, as_term, symbolic
    from .induction import _by_case, scope_of

    channels, per, width = _per_channel(name)
    if channels == 1:
        return []
    assert channels == 2, "the renaming is stated for channel 1 on tree 1, channel 0 on tree 0"
    made = program(name)
    sym, v = symbolic(made)
    n, s, r, j = v["N"], v["s"], v["r"], v["j"]
    y = z3.BitVec("y", n.size())
    domain = scope_of(made, premises(name)).assertions(v)
    steps, slots = (as_term(f(n), n) for f in (sym.steps, sym.width))

    def at(rank, slot):
        t = sym.transfer(n, s, rank, slot)
        return Transfer(*(as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)))

    mine = at(r, j)
    h = z3.UDiv(j, width)
    inside = [z3.And(h * per <= cell, cell < h * per + per) for cell in (mine.src_chunk, mine.dst_chunk)]
    found = [Query("channels: the slots are channels x chunk x 3, and a slot of channel h reads and writes only channel h's cells",
                   domain + [0 <= s, s < steps, 0 <= r, r < n, 0 <= j, j < slots],
                   z3.And(slots == channels * width, z3.Implies(as_term(mine.active, None), z3.And(*inside))))]
    label, rank = _label(r, n, 1), _rank(y, n, 1)
    found += [
        Query("renaming: tree 1's label of a rank is a label, and its rank is that rank", domain + [0 <= r, r < n],
              z3.And(0 <= label, label < n, _rank(label, n, 1) == r)),
        Query("renaming: tree 1's rank of a label is a rank, and its label is that label", domain + [0 <= y, y < n],
              z3.And(0 <= rank, rank < n, _label(rank, n, 1) == y)),
    ]
    zero, one = at(y, j), at(rank, j + width)
    role = z3.URem(j, ROLES)
    even = n % 2 == 0
    cases = [("even N, up", z3.And(even, role == 0)), ("even N, child 0", z3.And(even, role == 1)), ("even N, child 1", even),
             ("odd N, up", role == 0), ("odd N, child 0", role == 1)]
    found += _by_case(Query(
        "channel 1: slot j + chunk x 3 of tree 1's rank of label y is slot j of rank y, destination renamed, cells one part on",
        domain + [0 <= s, s < steps, 0 <= y, y < n, 0 <= j, j < width],
        z3.And(as_term(one.active, None) == as_term(zero.active, None),
               z3.Implies(as_term(zero.active, None),
                          z3.And(one.dst == _rank(zero.dst, n, 1), one.src_chunk == zero.src_chunk + per, one.dst_chunk == zero.dst_chunk + per,
                                 one.op == zero.op)))), cases)
    return found


def induction_queries(name: str) -> list:
    """The induction's queries for row ``name``: for two channels, those
    about a cell (r, c) asked for channel 0's cells only (``c`` below one
    part: a :attr:`Query.pin`, carried to channel 1 by
    :func:`channel_queries` and the module text), the others for every slot
    and cell."""
    from dataclasses import replace

    from .induction import queries

    asked = queries(program(name), invariant(name))
    channels, per, _ = _per_channel(name)
    if channels == 1:
        return asked
    c = z3.BitVec("c", BITVEC_WIDTH)
    return [query if query.name.startswith(_SENDER_QUERIES + _END_QUERIES)
            else replace(query, name=f"{query.name} [channel 0: c < {per}]", pin=[*query.pin, c < per]) for query in asked]


def prove(name: str):
    """Row ``name``: the spec's postcondition check, the channel lemmas, then
    the induction (each check within the row's resource limit,
    ``proofs.suite.RLIMITS``)."""
    from .induction import spec_check
    from .solver import run_queries

    return run_queries([spec_check("allreduce"), *channel_queries(name), *induction_queries(name)])
