"""What each built-in algorithm claims its cells hold after every step.

One :class:`~collspec.proofs.induction.Invariant` per (algorithm,
collective): ``holds(N, s, r, c, x, k)`` is true when, after s steps, cell c
of rank r holds rank x's input cell k (once). These are claims that
:mod:`collspec.proofs.induction` checks against the transfer functions the
generators enumerate; nothing here is taken on trust. Written with the
helpers of :mod:`collspec.models.indexing` so they evaluate on Z3 integers
and bit-vectors alike.

Nothing here imports generator code: the coordinates the claims use (a
tree position's depth, the rank at a position, the hypercube's largest
power of two) and the ownership a row declares are stated below, so that a
change to a generator cannot change what its proof expects.
"""

from __future__ import annotations

from ..models import indexing as ix
from .induction import Invariant
from .scope import Declared

# -- declared ownership --------------------------------------------------------------------

#: ring-seed's reduce-scatter leaves rank r with chunk r + 1 (the worked
#: example's rotation), not the spec's chunk r: the rows about it are proved
#: against this declaration, which their scope states
RING_SEED_OWNS = Declared("rank r owns chunk r + 1 (declared)", lambda r, n: (r + 1) % n)


def spec_owner(r, n):
    """The spec's reduce-scatter: rank r ends with chunk (block) r."""
    return r % n


#: ring variant -> (the chunk rank r completes in the reduce-scatter, the premises that declare it)
OWNERS = {"ring": (spec_owner, ()), "ring-seed": (RING_SEED_OWNS.value, (RING_SEED_OWNS,))}

# -- coordinates ---------------------------------------------------------------------------


def depth(p):
    """The depth of heap position p: floor(log2(p + 1)) (the root, p = 0, at depth 0)."""
    return ix.floor_log2(p + 1)


def levels(n):
    """D = floor(log2 N): the depth of the deepest of the positions 0..N-1."""
    return ix.floor_log2(n)


def position(r, root, n):
    """Rank r's position in a tree rooted at ``root``: (r - root) mod N for
    ranks r, root < N, written as one conditional subtraction (a modulus by
    symbolic N is what Z3 did not decide in the rooted bit-vector proofs)."""
    if isinstance(root, int) and root == 0:
        return r
    return ix.where(r >= root, r - root, r + n - root)


def rank_at(p, root, n):
    """The rank at position p of a tree rooted at ``root``: (p + root) mod N for p < N."""
    if isinstance(root, int) and root == 0:
        return p
    return ix.where(p + root < n, p + root, p + root - n)


def split(n):
    """(P, E, log2 P): the largest power of two P <= N, the E = N - P extra ranks."""
    return ix.largest_power_of_two(n), n - ix.largest_power_of_two(n), ix.floor_log2(n)


def virtual(c, p):
    """The rank below P that finishes chunk c: c for c < P, c - P above."""
    return ix.where(c < p, c, c - p)


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


def ring_seed_reduce_scatter() -> Invariant:
    """ring-seed's reduce-scatter leaves rank r with chunk r + 1: proved
    against that declared ownership (:data:`RING_SEED_OWNS`), which the
    scope states."""
    from dataclasses import replace

    owner = RING_SEED_OWNS.value
    return replace(ring_allreduce(1, phases=1), output=lambda n, C, r, c, root: c == owner(r, n), premises=(RING_SEED_OWNS,))


def ring_allgather() -> Invariant:
    """Rank r has block c once the block has travelled (r - c) mod N hops."""

    def defined(n, s, r, c):
        return (r - c + n) % n <= s

    def holds(n, s, r, c, x, k):
        return ix.both(defined(n, s, r, c), x == c, k == c)

    def prev(n, s, r, c, *rest):
        return ix.ring_prev(r, n), 0

    return Invariant(defined, holds, prev, prev)


def _chain_prev(n, s, r, c, *rest):
    return ix.ring_prev(r, n), 0


def chain_broadcast() -> Invariant:
    """The pipelined chain from ``root`` along the ring (chunks = N): the
    rank at position q >= 1 receives chunk c at step c + q - 1, so after s
    steps it holds root's chunk c once c + q <= s, its own input before."""
    return _rooted(lambda root: Invariant(
        _always,
        lambda n, s, r, c, x, k: ix.both(k == c, ix.where(ix.either(r == root, c + ix.chain_position(r, root, n) <= s), x == root, x == r)),
        _chain_prev,
        _chain_prev,
    ))


def chain_reduce() -> Invariant:
    """The chain from the rank after ``root`` around to ``root`` (chunks =
    N): position q >= 2 receives chunk c at step c + q - 2 and then holds
    positions 1..q; the root receives it at step c + N - 2 and then holds
    everything; before, each holds its own input."""

    def build(root):
        def holds(n, s, r, c, x, k):
            q, qx = ix.chain_position(r, root, n), ix.chain_position(x, root, n)
            at_root = ix.where(c + n - 1 <= s, True, x == r)
            on_chain = ix.where(c + q - 1 <= s, ix.both(qx >= 1, qx <= q), x == r)
            return ix.both(k == c, ix.where(q == 0, at_root, on_chain))

        return Invariant(_always, holds, _chain_prev, _chain_prev)

    return _rooted(build)


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
    dp, dx = depth(p), depth(x)
    return ix.both(dx >= dp, ix.shift_right(x + 1, dx - dp) - 1 == p)


def tree_allreduce() -> Invariant:
    """Root 0 (positions are ranks). After s reduce steps the node at depth
    d holds its subtree once s >= D - d (its children sent at step D - d - 1),
    itself before; in the broadcast, depth d holds everything from step
    D + d on."""

    def holds(n, s, r, c, x, k):
        top, d = levels(n), depth(r)
        return ix.both(k == c, ix.where(s >= top + d, True, ix.where(s >= top - d, _in_subtree(r, x), x == r)))

    def writer(n, s, r, c):
        parent = ix.tree_parent(r)
        return ix.where(s < levels(n), 2 * r + 1, parent), ix.where(s < levels(n), 0, r - 1 - 2 * parent)

    def source(n, s, r, c, x, k):
        parent = ix.tree_parent(r)
        child = ix.shift_right(x + 1, depth(x) - depth(r) - 1) - 1
        return ix.where(s < levels(n), child, parent), ix.where(s < levels(n), 0, r - 1 - 2 * parent)

    return Invariant(_always, holds, writer, source)


def _tree(root, n):
    """(position of a rank, rank at a position) in the tree rooted at ``root``."""
    return (lambda r: position(r, root, n)), (lambda p: rank_at(p, root, n))


def tree_reduce() -> Invariant:
    """The reduce half of :func:`tree_allreduce` on positions relative to
    ``root``: after s steps the node at depth d holds its subtree once
    s >= D - d, itself before."""

    def build(root):
        def holds(n, s, r, c, x, k):
            pos, _ = _tree(root, n)
            p = pos(r)
            return ix.both(k == c, ix.where(s >= levels(n) - depth(p), _in_subtree(p, pos(x)), x == r))

        def writer(n, s, r, c):
            pos, rank = _tree(root, n)
            return rank(2 * pos(r) + 1), ix.constant(0, n)

        def source(n, s, r, c, x, k):
            pos, rank = _tree(root, n)
            p, px = pos(r), pos(x)
            return rank(ix.shift_right(px + 1, depth(px) - depth(p) - 1) - 1), ix.constant(0, n)

        return Invariant(_always, holds, writer, source)

    return _rooted(build)


def tree_broadcast() -> Invariant:
    """The broadcast half of :func:`tree_allreduce` from ``root``: the node
    at depth d holds root's data from step d on, its own input before."""

    def build(root):
        def holds(n, s, r, c, x, k):
            pos, _ = _tree(root, n)
            return ix.both(k == c, ix.where(s >= depth(pos(r)), x == root, x == r))

        def writer(n, s, r, c, *rest):
            pos, rank = _tree(root, n)
            p = pos(r)
            parent = ix.tree_parent(p)
            return rank(parent), p - 1 - 2 * parent

        return Invariant(_always, holds, writer, writer)

    return _rooted(build)


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


def _clamp(v, low, high):
    return ix.where(v < low, low, ix.where(v > high, high, v))


def _bit(b, like):
    """2**b on ``like``'s sort."""
    return ix.shift_left(1, b, like=like)


def _hd_halved(n, m, r, c, x):
    """After m halving steps (bit-vectors), cell c of rank r < P holds x
    when group(x) XOR r is zero on the low L - m bits (r's responsibility
    shrinks one bit per step) and on every bit up to the highest bit where
    virtual(c) and r differ (chunk c left r's responsibility at that bit's
    step and kept its state since)."""
    p, _, levels = split(n)
    g = ix.bit_xor(virtual(x, p), r)
    d = ix.bit_xor(virtual(c, p), r)
    low = (g & (_bit(levels - m, n) - 1)) == 0
    below_split = ix.either(g == 0, (g & -g) > d)
    return ix.both(low, below_split)


def _hd_writer(allreduce: bool):
    """Fold from r + P; halving step k from r's partner across bit L-1-k;
    doubling step k across bit k; unfold from r - P. Slot = chunk."""

    def writer(n, s, r, c):
        p, e, levels = split(n)
        f = ix.where(e > 0, 1, 0)
        k = s - f
        halving = ix.hypercube_partner(r, levels - 1 - k)
        later = ix.where(k - levels < levels, ix.hypercube_partner(r, k - levels), r - p) if allreduce else r - p
        return ix.where(s < f, r + p, ix.where(k < levels, halving, later)), c

    return writer


def halving_doubling(collective: str) -> Invariant:
    """With P, E, L as in recursive doubling: the fold reduces rank P + i
    into rank i; after m halving steps rank r < P holds, for each chunk, the
    ranks given by :func:`_hd_halved`; after m doubling steps the chunks
    agreeing with r above bit m - 1 are complete; the unfold gives extra rank
    P + i everything (all-reduce) or its chunk P + i (reduce-scatter)."""
    allreduce = collective == "allreduce"

    def holds(n, s, r, c, x, k):
        p, e, levels = split(n)
        f = ix.where(e > 0, 1, 0)
        m = _clamp(s - f, 0, levels)
        halved = _hd_halved(n, m, r, c, x)
        if allreduce:
            m2 = _clamp(s - f - levels, 0, levels)
            doubled = ix.both(s >= f + levels, ix.shift_right(virtual(c, p), m2) == ix.shift_right(r, m2))
            halved = ix.where(doubled, True, halved)
        low = ix.where(s < f, x == r, halved)
        done = ix.both(s >= 2 * f + (2 if allreduce else 1) * levels, True if allreduce else c == r)
        return ix.both(k == c, ix.where(r < p, low, ix.either(done, x == r)))

    writer = _hd_writer(allreduce)
    return Invariant(_always, holds, writer, lambda n, s, r, c, x, k: writer(n, s, r, c))


def recursive_doubling_allgather() -> Invariant:
    """Rank r < P has, after the fold and m exchanges, the chunks c whose
    virtual rank agrees with r above bit m - 1 (before the fold: chunk r);
    extra rank P + i has its own chunk until the unfold brings the rest."""

    def defined(n, s, r, c):
        p, e, levels = split(n)
        f = ix.where(e > 0, 1, 0)
        m = _clamp(s - f, 0, levels)
        low = ix.where(s < f, c == r, ix.shift_right(virtual(c, p), m) == ix.shift_right(r, m))
        return ix.where(r < p, low, ix.either(s >= 2 * f + levels, c == r))

    def holds(n, s, r, c, x, k):
        return ix.both(defined(n, s, r, c), x == c, k == c)

    def writer(n, s, r, c):
        p, e, levels = split(n)
        f = ix.where(e > 0, 1, 0)
        return ix.where(s < f, r + p, ix.where(s < f + levels, ix.hypercube_partner(r, s - f), r - p)), c

    return Invariant(defined, holds, writer, lambda n, s, r, c, x, k: writer(n, s, r, c))


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
    ("ring", "broadcast"): chain_broadcast,
    ("ring", "reduce"): chain_reduce,
    ("ring-seed", "allreduce"): lambda: ring_allreduce(1),
    ("ring-seed", "reduce_scatter"): lambda: ring_seed_reduce_scatter(),
    ("direct", "allreduce"): lambda: direct("allreduce"),
    ("direct", "reduce_scatter"): lambda: direct("reduce_scatter"),
    ("direct", "allgather"): lambda: direct("allgather"),
    ("direct", "alltoall"): lambda: direct("alltoall"),
    ("direct", "broadcast"): direct_broadcast,
    ("direct", "reduce"): direct_reduce,
    ("hub", "allreduce"): hub,
    ("hub", "broadcast"): direct_broadcast,
    ("hub", "reduce"): direct_reduce,
    ("binary-tree", "allreduce"): tree_allreduce,
    ("binary-tree", "reduce"): tree_reduce,
    ("binary-tree", "broadcast"): tree_broadcast,
    ("recursive-doubling", "allreduce"): recursive_doubling_allreduce,
    ("recursive-doubling", "allgather"): recursive_doubling_allgather,
    ("halving-doubling", "allreduce"): lambda: halving_doubling("allreduce"),
    ("halving-doubling", "reduce_scatter"): lambda: halving_doubling("reduce_scatter"),
}


#: rooted programs proved at root 0 by induction and for every other root as
#: a renaming of that instance (:func:`collspec.proofs.induction.rotation_queries`):
#: (algorithm, collective) -> the (position, rank) renaming stated above,
#: which the rotation query compares the generator's transfer function with.
#: A symbolic root puts a division by symbolic N into every bit-vector
#: query, which Z3 did not decide in minutes.
ROTATED = {
    ("binary-tree", "reduce"): (position, rank_at),
    ("binary-tree", "broadcast"): (position, rank_at),
}


def invariant(algorithm: str, collective: str, root=None, params=None) -> Invariant:
    """The invariant of a built-in algorithm. Rooted ones take ``root`` (or
    ``params["root"]``): the value (a Z3 variable in a proof) of the
    program's option, as :func:`collspec.models.program.symbolic` returns
    it. hierarchical-ring's is :func:`collspec.proofs.hierarchical.pair_invariant`."""
    made = INVARIANTS[(algorithm, collective)]()
    if isinstance(made, tuple):  # ("rooted", build)
        return made[1](dict(params or {}).get("root", root))
    return made
