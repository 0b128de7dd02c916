"""The hierarchical ring for every node count G and every group size L.

With G and L both solver variables, rank g L + l and chunk b G + i are
products of variables: nonlinear arithmetic, which Z3 did not decide.
So the proof runs on the algorithm's own coordinate function,
:func:`collspec.models.generators.hierarchical.pair_transfer` (the
generator's transfer function is that function with ranks and chunks
joined), through a *pair program*: rank (g, l) numbered g M + l and chunk
(b, i) numbered b M + i with the constant stride M = 2**16 >= L, G, so that
splitting a number is division by a constant (linear). Shown:

- the induction of :mod:`collspec.proofs.induction` on the pair program
  (ranks: g < G, l < L; cells: b < L, i < G), G and L symbolic;
- ``pairs``: for N = G L, r -> (r // L, r % L) and (g, l) -> g L + l are
  inverse bijections between 0..N-1 and the pairs (the same for chunks,
  with G and L exchanged);
- ``joined``: the generator's transfer function at rank r is the pair
  function at (r // L, r % L) with its rank and chunks joined (with N = G L
  symbolic).

Premise: renaming ranks and cells by bijections preserves "every output
cell holds every contribution exactly once" for an all-reduce (which
treats every rank and cell alike). Scope (:data:`SCOPE`): N = G L >= 2,
1 <= G, L <= 65536.
"""

from __future__ import annotations

import z3

from ..models import indexing as ix
from ..models.generators import hierarchical as gen
from ..models.program import Program, Transfer, as_term
from .induction import Invariant
from .scope import Bound, Condition, Scope
from .solver import Query

#: M: the stride that numbers pair (a, b) as a M + b.
STRIDE = 1 << 16

#: G nodes ("groups") of L ranks ("size"), each in 1..M, N = G L >= 2
SCOPE = Scope.all_n(
    Bound("groups", ">=", 1), Bound("groups", "<=", STRIDE), Bound("size", ">=", 1), Bound("size", "<=", STRIDE),
    Condition("N = G L (G nodes of L ranks)", ("N", "groups", "size"), lambda n, groups, size: n == groups * size),
)


def _split(t):
    return ix.floordiv(t, STRIDE), t % STRIDE


def pair_program(groups, size) -> Program:
    """:func:`gen.pair_transfer` for G = ``groups`` groups of L = ``size``,
    ranks and chunks numbered with the stride M."""

    def transfer(n, s, r, j):
        g, l = _split(r)
        active, (dg, dl), (sb, si), (db, di), op = gen.pair_transfer(groups, size, s, g, l, j)
        return Transfer(active, dg * STRIDE + dl, sb * STRIDE + si, db * STRIDE + di, op)

    return Program(
        "hierarchical-ring", "allreduce", lambda n: groups * size, lambda n: sum(gen.phase_lengths_of(groups, size)), lambda n: groups,
        transfer, lambda n, s: ("pairs", None), lambda groups, size: pair_program(groups, size), params={"groups": groups, "size": size},
    )


def _ring_partial(n, start, r, x, hops):
    """A ring reduce-scatter's chunk that started at ``start``: after
    ``hops`` hops rank r holds the ranks from start to r, or itself while
    the chunk has not reached it."""
    a = ix.wrap(r - start, n)
    return ix.where(a <= hops, ix.wrap(x - start, n) <= a, x == r)


def _ring_complete(n, start, r, gathered):
    """After the reduce-scatter and ``gathered`` all-gather hops, the chunk
    that started at ``start`` is complete at r."""
    a = ix.wrap(r - start, n)
    return ix.both(gathered >= 0, ix.either(a == n - 1, a < gathered))


def pair_invariant(G, L) -> Invariant:
    """Phases 1 and 4 are ring all-reduce halves of the L local ranks of
    each group on every block (block b starts at local index b + 1); phases
    2 and 3 a ring all-reduce of the G groups on chunk i of block l (chunk
    i starts at group i + 1), among the ranks of local index l. ``G`` and
    ``L`` are the pair program's option values (Z3 variables in a proof)."""

    def holds(n, s, r, c, x, k):
        (g, l), (gx, lx), (b, i) = _split(r), _split(x), _split(c)
        k1 = s - (L - 1)
        k2 = k1 - (G - 1)
        k3 = k2 - (G - 1)
        intra = ix.both(gx == g, _ring_partial(L, ix.wrap(b + 1, L), l, lx, ix.where(k1 < 0, s, L - 1)))
        inter = ix.where(_ring_complete(G, ix.wrap(i + 1, G), g, k2), True, _ring_partial(G, ix.wrap(i + 1, G), g, gx, ix.where(k2 < 0, k1, G - 1)))
        own = ix.where(k1 >= 0, inter, intra)
        other = ix.where(ix.both(k3 >= 0, _ring_complete(L, ix.wrap(b + 1, L), l, k3)), True, intra)
        return ix.both(k == c, ix.where(b == l, own, other))

    def writer(n, s, r, c):
        (g, l), (_, i) = _split(r), _split(c)
        inter = ix.both(s >= L - 1, s < L - 1 + 2 * (G - 1))
        return ix.where(inter, ix.wrap(g - 1, G) * STRIDE + l, g * STRIDE + ix.wrap(l - 1, L)), ix.where(inter, 0, i)

    def pairs(first, second):
        return lambda params, t: [0 <= t, ix.floordiv(t, STRIDE) < params[first], t % STRIDE < params[second]]

    return Invariant(
        lambda *a: True, holds, writer, lambda n, s, r, c, x, k: writer(n, s, r, c),
        premises=SCOPE.premises[1:5] + (Condition("G + L >= 3 (G L >= 2)", ("groups", "size"), lambda groups, size: groups + size >= 3),),
        ranks=pairs("groups", "size"), cells=pairs("size", "groups"),
        cases=lambda params, s, n: [
            ("intra reduce-scatter", s < L - 1),
            ("inter reduce-scatter", s < L - 1 + G - 1),
            ("inter all-gather", s < L - 1 + 2 * (G - 1)),
        ],
    )


def renaming_queries() -> list:
    """``pairs`` and ``joined`` (module text), G and L symbolic, N = G L."""
    from ..models.generators import program

    G, L, g, l, r, s, j = z3.Ints("groups size g l r s j")
    n = z3.Int("N")
    domain = SCOPE.assertions({"N": n, "groups": G, "size": L})

    def bijection(outer, inner):
        a, b, t = z3.Ints("a b t")
        joined = a * inner + b
        return [
            z3.Implies(z3.And(0 <= a, a < outer, 0 <= b, b < inner), z3.And(0 <= joined, joined < n, joined / inner == a, joined % inner == b)),
            z3.Implies(z3.And(0 <= t, t < n), z3.And(0 <= t / inner, t / inner < outer, (t / inner) * inner + t % inner == t)),
            z3.Implies(z3.And(0 <= a, a < outer, 0 <= b, b < inner), z3.And((a * STRIDE + b) / STRIDE == a, (a * STRIDE + b) % STRIDE == b)),
        ]

    real = program("hierarchical-ring", "allreduce", size=L)
    t = real.transfer(n, s, r, j)
    active, (dg, dl), (sb, si), (db, di), op = gen.pair_transfer(n / L, L, s, r / L, r % L, j)
    steps = as_term(real.steps(n), n)
    return [
        Query("pairs: rank r <-> (r // L, r % L) and chunk c <-> (c // G, c % G) are inverse bijections for N = G L; N // L = G",
              domain, z3.And(n / L == G, n / G == L, *bijection(G, L), *bijection(L, G))),
        Query("joined: the generator's transfer at rank r is the pair transfer at (r // L, r % L), rank and chunks joined",
              domain + [0 <= r, r < n, 0 <= s, s < steps, 0 <= j, j < n / L],
              z3.And(as_term(t.active, n) == as_term(active, n),
                     z3.Implies(as_term(active, n), z3.And(t.dst == dg * L + dl, t.src_chunk == sb * (n / L) + si, t.dst_chunk == db * (n / L) + di, t.op == op)))),
    ]
