"""What each built-in algorithm claims its cells hold after every step.

One :class:`~collspec.proofs.induction.Invariant` per (algorithm,
collective): ``holds(N, s, r, c, x, k)`` is true when, after s steps, cell c
of rank r holds rank x's input cell k (once). These are claims that
:mod:`collspec.proofs.induction` checks against the transfer functions the
generators enumerate; nothing here is taken on trust. Written with the
helpers of :mod:`collspec.models.indexing` so they evaluate on Z3 integers
and bit-vectors alike.
"""

from __future__ import annotations

from ..models import indexing as ix
from ..models.generators import tree as tree_gen
from ..models.generators.recursive import split
from .induction import Invariant


def _always(*args):
    return True


# -- rings ---------------------------------------------------------------------------------


def _ring_window(n, start, r, x):
    """x is among the ranks from ``start`` to r along the ring."""
    return (x - start + n) % n <= (r - start + n) % n


def ring_allreduce(shift: int, phases: int = 2) -> Invariant:
    """Chunk c starts at rank c + 1 - shift (``shift`` = owner(r) - r) and
    gathers one rank per hop: after s <= N - 1 reduce-scatter hops the rank
    at distance a <= s along that path holds the a + 1 ranks behind it. In
    the all-gather the complete chunk moves on from its owner (distance
    N - 1), one rank per hop."""

    def holds(n, s, r, c, x, k):
        start = (c + 1 - shift + n) % n
        a = (r - start + n) % n
        window = _ring_window(n, start, r, x)
        reduce_scatter = ix.where(a <= s, window, x == r)
        gathered = s - (n - 1)
        complete = ix.either(a == n - 1, a < gathered)
        state = reduce_scatter if phases == 1 else ix.where(s <= n - 1, reduce_scatter, ix.where(complete, True, window))
        return ix.both(k == c, state)

    def prev(n, s, r, c, *rest):
        return ix.ring_prev(r, n), 0

    return Invariant(_always, holds, prev, prev)


def ring_allgather() -> Invariant:
    """Rank r has block c once the block has travelled (r - c) mod N hops."""

    def defined(n, s, r, c):
        return (r - c + n) % n <= s

    def holds(n, s, r, c, x, k):
        return ix.both(defined(n, s, r, c), x == c, k == c)

    def prev(n, s, r, c, *rest):
        return ix.ring_prev(r, n), 0

    return Invariant(defined, holds, prev, prev)


# -- direct exchange and the hub ---------------------------------------------------------------


def _other(r, n):
    return (r + 1) % n


def direct(collective: str) -> Invariant:
    """One step: slot j of rank q sends to rank j."""

    if collective == "allreduce":
        return Invariant(_always, lambda n, s, r, c, x, k: ix.both(k == c, ix.either(s >= 1, x == r)), lambda n, s, r, c: (_other(r, n), r), lambda n, s, r, c, x, k: (x, r))
    if collective == "reduce_scatter":
        return Invariant(
            _always,
            lambda n, s, r, c, x, k: ix.both(k == c, ix.either(ix.both(s >= 1, c == r), x == r)),
            lambda n, s, r, c: (_other(r, n), r),
            lambda n, s, r, c, x, k: (x, r),
        )
    if collective == "allgather":

        def defined(n, s, r, c):
            return ix.either(s >= 1, c == r)

        return Invariant(defined, lambda n, s, r, c, x, k: ix.both(defined(n, s, r, c), x == c, k == c), lambda n, s, r, c: (c, r), lambda n, s, r, c, x, k: (c, r))
    # alltoall: cell c of rank r ends with rank c's block r
    return Invariant(
        _always,
        lambda n, s, r, c, x, k: ix.where(s >= 1, ix.both(x == c, k == r), ix.both(x == r, k == c)),
        lambda n, s, r, c: (c, r),
        lambda n, s, r, c, x, k: (c, r),
    )


def direct_broadcast() -> Invariant:
    return _rooted(lambda root: Invariant(
        _always,
        lambda n, s, r, c, x, k: ix.both(k == c, ix.where(s >= 1, x == root, x == r)),
        lambda n, s, r, c: (root, r),
        lambda n, s, r, c, x, k: (root, r),
    ))


def direct_reduce() -> Invariant:
    return _rooted(lambda root: Invariant(
        _always,
        lambda n, s, r, c, x, k: ix.both(k == c, ix.either(ix.both(s >= 1, r == root), x == r)),
        lambda n, s, r, c: (_other(root, n), 0),
        lambda n, s, r, c, x, k: (x, 0),
    ))


def hub() -> Invariant:
    """Step 0 reduces into the hub, step 1 copies its total back out."""
    return _rooted(lambda root: Invariant(
        _always,
        lambda n, s, r, c, x, k: ix.both(k == c, ix.either(s >= 2, ix.both(s >= 1, r == root), x == r)),
        lambda n, s, r, c: (ix.where(s == 0, _other(root, n), root), ix.where(s == 0, 0, r)),
        lambda n, s, r, c, x, k: (ix.where(s == 0, x, root), ix.where(s == 0, 0, r)),
    ))


# -- trees and hypercubes (bit-vectors) -----------------------------------------------------


def _in_subtree(p, x):
    """Heap position x is in the subtree of position p."""
    dp, dx = tree_gen.depth(p), tree_gen.depth(x)
    return ix.both(dx >= dp, ix.shift_right(x + 1, dx - dp) - 1 == p)


def tree_allreduce() -> Invariant:
    """Root 0 (positions are ranks). After s reduce steps the node at depth
    d holds its subtree once s >= D - d (its children sent at step D - d - 1),
    itself before; in the broadcast, depth d holds everything from step
    D + d on."""

    def holds(n, s, r, c, x, k):
        top, d = tree_gen.levels(n), tree_gen.depth(r)
        return ix.both(k == c, ix.where(s >= top + d, True, ix.where(s >= top - d, _in_subtree(r, x), x == r)))

    def writer(n, s, r, c):
        parent = ix.tree_parent(r)
        return ix.where(s < tree_gen.levels(n), 2 * r + 1, parent), ix.where(s < tree_gen.levels(n), 0, r - 1 - 2 * parent)

    def source(n, s, r, c, x, k):
        parent = ix.tree_parent(r)
        child = ix.shift_right(x + 1, tree_gen.depth(x) - tree_gen.depth(r) - 1) - 1
        return ix.where(s < tree_gen.levels(n), child, parent), ix.where(s < tree_gen.levels(n), 0, r - 1 - 2 * parent)

    return Invariant(_always, holds, writer, source)


def recursive_doubling_allreduce() -> Invariant:
    """With P the largest power of two <= N and E = N - P extra ranks: after
    the fold (when E > 0) and m exchanges, rank r < P holds the ranks x whose
    partner-in-P (x, or x - P) agrees with r above bit m - 1; the extra ranks
    hold their own input until the unfold copies the total to them."""

    def holds(n, s, r, c, x, k):
        p, e, levels = split(n)
        fold = ix.where(e > 0, 1, 0)
        m = ix.where(s - fold < levels, s - fold, levels)
        group = ix.where(x < p, x, x - p)
        low = ix.where(s < fold, x == r, ix.shift_right(group, m) == ix.shift_right(r, m))
        return ix.both(k == c, ix.where(r < p, low, ix.either(s >= fold + levels + 1, x == r)))

    def writer(n, s, r, c):
        p, e, levels = split(n)
        fold = ix.where(e > 0, 1, 0)
        exchange = ix.hypercube_partner(r, s - fold)
        return ix.where(s < fold, r + p, ix.where(s < fold + levels, exchange, r - p)), ix.constant(0, n)

    return Invariant(_always, holds, writer, lambda n, s, r, c, x, k: writer(n, s, r, c))


# -- options ---------------------------------------------------------------------------------

def _rooted(build):
    """An invariant that needs the program's root: built when the proof
    knows it (see :func:`invariant`)."""
    return ("rooted", build)


#: (algorithm, collective) -> invariant (or a rooted one)
INVARIANTS = {
    ("ring", "allreduce"): lambda: ring_allreduce(0),
    ("ring", "reduce_scatter"): lambda: ring_allreduce(0, phases=1),
    ("ring", "allgather"): ring_allgather,
    ("ring-seed", "allreduce"): lambda: ring_allreduce(1),
    ("direct", "allreduce"): lambda: direct("allreduce"),
    ("direct", "reduce_scatter"): lambda: direct("reduce_scatter"),
    ("direct", "allgather"): lambda: direct("allgather"),
    ("direct", "alltoall"): lambda: direct("alltoall"),
    ("direct", "broadcast"): direct_broadcast,
    ("direct", "reduce"): direct_reduce,
    ("hub", "allreduce"): hub,
    ("binary-tree", "allreduce"): tree_allreduce,
    ("recursive-doubling", "allreduce"): recursive_doubling_allreduce,
}


def invariant(algorithm: str, collective: str, root=None) -> Invariant:
    """The invariant of a built-in algorithm (``root`` for rooted ones)."""
    made = INVARIANTS[(algorithm, collective)]()
    if isinstance(made, tuple):
        return made[1](root)
    return made
