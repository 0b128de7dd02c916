"""Every contribution exactly once, for every N: one induction for every algorithm.

An algorithm is its transfer function (:class:`~collspec.models.program.Program`);
the generator enumerates it and this module evaluates the same function on
Z3 terms, N symbolic. What an algorithm *claims* is an :class:`Invariant`:
after s steps, which cells hold data (``defined``) and which contributions
each holds (``holds(N, s, r, c, x, k)``: cell c of rank r holds rank x's
input cell k, once). The invariant is a claim, not a premise: the queries
below check it against the transfer function at every step, so a wrong
invariant fails just like a wrong algorithm.

Queries, for symbolic N (and the program's options), a symbolic step s with
0 <= s < steps(N), ranks r, q, q2, x < N, cells c, k < chunks(N) and slots
j, j2 < width(N); T(q, j) is the transfer of slot j of rank q at step s, and
"T writes (r, c)" means it is active with destination r and cell c:

- ``in-range``: an active transfer names a rank, two cells and an op that exist;
- ``same-index``: every reduce adds into the cell index it read (chunks only
  ever add into the same-index column);
- ``reads-data``: a transfer reads a cell that holds data, and a reduce
  adds into one;
- ``copy-alone``: a copy is the only write into its cell in its step;
- ``disjoint-writers``: two writes into one cell bring no common contribution;
- ``adds-new``: a reduce brings nothing the cell already holds;
- ``keeps-arrivals`` and ``reduce-keeps``: after the step the cell holds what
  arrived, and a reduced cell also what it held;
- ``writer``: the invariant's witness writes (r, c) whenever any slot does;
- ``unwritten-unchanged``: a cell nobody writes keeps its state;
- ``nothing-else``: whatever a written cell holds after the step arrived
  in the step (from the invariant's witness slot) or was kept by a reduce;
- ``base``: before step 0 the cells are the collective's inputs;
- ``end``: after the last step every output cell holds data and exactly the
  contributions the collective defines.

Together, by induction on s, these say: every cell's contributor multiset
after every step is the invariant's set (each contribution at most once),
and at the end every output is exactly its collective. The step from the
queries to that statement is the one premise about code not evaluated here:
the interpreter's semantics (:mod:`collspec.models.interpreter`: all reads
see the start of the step, a copy replaces the cell, a reduce adds the
multisets). What each collective must hold at the end (:data:`EXPECTED`) is
the spec's definition restated over symbolic N; :func:`spec_agrees` checks
the restatement against the spec's own functions for N = 1..6 on every run.

What a row covers is its :class:`~collspec.proofs.scope.Scope`
(:func:`scope_of`): N >= 2 (and N <= 65536 on bit-vectors), every root
where the root is symbolic, and the invariant's own premises. The queries'
assertions on N and the options are that scope's, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import z3

from ..models import indexing as ix
from ..models.program import BITVEC, BITVEC_WIDTH, COPY, REDUCE, Program, Transfer, as_term, symbolic
from .scope import Bound, Scope
from .solver import FAILED, PROVED, Outcome, Query

#: The most ranks a bit-vector proof covers (the generators accept no more).
MAX_RANKS = 1 << 16


@dataclass(frozen=True)
class Invariant:
    """An algorithm's claim about its cells after each step (module text).

    ``writer(N, s, r, c)`` and ``source(N, s, r, c, x, k)`` return a slot
    ``(q, j)``: one that writes cell (r, c) at step s whenever any slot
    does, and the one that brings contribution (x, k) into it. ``premises``
    are extra premises (:mod:`collspec.proofs.scope` objects: bounds on the
    options, options the proved program fixes, a declared ownership); they
    become part of the row's scope, in its text and its assertions.
    ``output(n, C, r, c, root)`` replaces the collective's output cells
    (a declared ownership, stated in ``premises``).
    """

    defined: Callable
    holds: Callable
    writer: Callable
    source: Callable
    premises: tuple = ()
    output: Callable | None = None
    ranks: Callable | None = None
    cells: Callable | None = None
    cases: Callable | None = None


# -- what the collectives start from and end with, over symbolic N ------------------------


def _block(n, chunks):
    """K: chunks per rank's block (allgather's inputs, reduce-scatter's outputs)."""
    return ix.floordiv(chunks, n)


#: collective -> (input cell?(n, C, r, c, root), output cell?(...), expected(n, C, r, c, x, k, root))
EXPECTED = {
    "allreduce": (lambda n, C, r, c, root: True, lambda n, C, r, c, root: True, lambda n, C, r, c, x, k, root: k == c),
    "reduce_scatter": (
        lambda n, C, r, c, root: True,
        lambda n, C, r, c, root: ix.floordiv(c, _block(n, C)) == r,
        lambda n, C, r, c, x, k, root: k == c,
    ),
    "allgather": (
        lambda n, C, r, c, root: ix.floordiv(c, _block(n, C)) == r,
        lambda n, C, r, c, root: True,
        lambda n, C, r, c, x, k, root: ix.both(k == c, x == ix.floordiv(c, _block(n, C))),
    ),
    "broadcast": (lambda n, C, r, c, root: True, lambda n, C, r, c, root: True, lambda n, C, r, c, x, k, root: ix.both(k == c, x == root)),
    "reduce": (lambda n, C, r, c, root: True, lambda n, C, r, c, root: r == root, lambda n, C, r, c, x, k, root: k == c),
    "alltoall": (
        lambda n, C, r, c, root: True,
        lambda n, C, r, c, root: True,
        lambda n, C, r, c, x, k, root: ix.both(x == ix.floordiv(c, _block(n, C)), k == r * _block(n, C) + c % _block(n, C)),
    ),
}


def spec_agrees(collective: str, ranks=range(1, 7)) -> str | None:
    """Check :data:`EXPECTED` against the spec for concrete N: the spec's
    collective on contributor sets (via the checker's own expected outputs)
    must put exactly the predicted contributions into every output cell.
    Returns a description of the first disagreement, or None."""
    from collections import Counter

    from ..models.layout import expected_outputs
    from ..models.schedule import Schedule

    is_input, is_output, expected = EXPECTED[collective]
    for n in ranks:
        schedule = Schedule(collective, n, n, ())
        layout = schedule.layout
        for r in range(n):
            if sorted(int(c) for c in layout.inputs[r]) != [c for c in range(n) if bool(is_input(n, n, r, c, 0))]:
                return f"{collective}, N={n}: rank {r}'s input cells differ from the layout's"
            if [int(c) for c in layout.outputs[r]] != [c for c in range(n) if bool(is_output(n, n, r, c, 0))]:
                return f"{collective}, N={n}: rank {r}'s output cells differ from the layout's"
        leaves = [np.array([Counter({(r, int(c)): 1}) for c in layout.inputs[r]] + [None], dtype=object)[:-1] for r in range(n)]
        want = expected_outputs(schedule, leaves)
        for r in range(n):
            for i, c in enumerate(layout.outputs[r]):
                got = {(x, k): 1 for x in range(n) for k in range(n) if bool(expected(n, n, r, int(c), x, k, 0))}
                if Counter(got) != want[r][i]:
                    return f"{collective}, N={n}: rank {r} cell {int(c)} must hold {dict(want[r][i])}, the restatement says {got}"
    return None


# -- the queries ---------------------------------------------------------------------------


#: how the scope bounds an option that is a solver variable
OPTION_BOUNDS = {"root": (Bound("root", ">=", 0), Bound("root", "<", "N"))}


def scope_of(program: Program, extra: tuple = ()) -> Scope:
    """What a proof about ``program`` covers: N >= 2 (<= 65536 on
    bit-vectors), each symbolic option over its range, and ``extra`` (an
    invariant's premises). An option without a range here must be bounded
    by ``extra``."""
    premises = [Bound("N", ">=", 2)] + ([Bound("N", "<=", MAX_RANKS)] if program.sort == BITVEC else [])
    stated = Scope(tuple(extra)).variables()
    for name in program.params:
        if name in OPTION_BOUNDS:
            premises += OPTION_BOUNDS[name]
        elif name not in stated:
            raise ValueError(f"{program.algorithm} {program.collective}: option {name!r} is symbolic but no premise states its range")
    return Scope(tuple(premises)) + tuple(extra)


def queries(program: Program, invariant: Invariant) -> list:
    """The induction's queries for one program (see the module text); every
    assertion on N and the options is :func:`scope_of`'s."""
    sym, v = symbolic(program)
    bv = program.sort == BITVEC
    make = (lambda name: z3.BitVec(name, BITVEC_WIDTH)) if bv else z3.Int
    n, s, r, j = v["N"], v["s"], v["r"], v["j"]
    q, c, x, k, q2, j2 = (make(name) for name in ("q", "c", "x", "k", "q2", "j2"))
    params = {name: v[name] for name in program.params}
    root = params.get("root", 0)
    chunks, steps, width = (as_term(f(n), n) for f in (sym.chunks, sym.steps, sym.width))
    is_input, is_output, expected = EXPECTED[program.collective]
    if invariant.output is not None:
        is_output = invariant.output

    def rank(*vs):
        if invariant.ranks is not None:
            return [b for t in vs for b in invariant.ranks(params, t)]
        return [b for t in vs for b in (0 <= t, t < n)]

    def cell(*vs):
        if invariant.cells is not None:
            return [b for t in vs for b in invariant.cells(params, t)]
        return [b for t in vs for b in (0 <= t, t < chunks)]

    def slot(*vs):
        return [b for t in vs for b in (0 <= t, t < width)]

    domain = scope_of(program, invariant.premises).assertions(v)
    at_step = domain + [0 <= s, s < steps]

    def T(rank_, slot_):
        t = sym.transfer(n, s, rank_, slot_)
        return Transfer(*(as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)))

    def writes(t, r_, c_):
        return z3.And(_bool(t.active), t.dst == r_, t.dst_chunk == c_)

    def holds(step, r_, c_):
        return as_term(invariant.holds(n, step, r_, c_, x, k), n)

    def defined(step, r_, c_):
        return as_term(invariant.defined(n, step, r_, c_), n)

    t1, t2 = T(q, j), T(q2, j2)
    wq, wj = (as_term(v, n) for v in invariant.writer(n, s, r, c))
    w = T(wq, wj)
    sq, sj = (as_term(v, n) for v in invariant.source(n, s, r, c, x, k))
    src = T(sq, sj)
    contribution = rank(x) + cell(k)
    base = domain + rank(r) + cell(c)
    two_writers = at_step + rank(r, q, q2) + cell(c) + slot(j, j2)
    second_writer = [writes(t1, r, c), writes(t2, r, c), z3.Or(q != q2, j != j2)]
    one_writer = at_step + rank(r, q) + cell(c) + slot(j) + [writes(t1, r, c)]
    final = steps
    asked = [
        Query(
            "in-range: an active transfer names a rank, two cells and an op that exist",
            at_step + rank(q) + slot(j) + [_bool(t1.active)],
            z3.And(*rank(t1.dst), *cell(t1.src_chunk, t1.dst_chunk), z3.Or(t1.op == COPY, t1.op == REDUCE)),
        ),
        Query("same-index: every reduce adds into the cell index it read", at_step + rank(q) + slot(j) + [_bool(t1.active)], t1.src_chunk == t1.dst_chunk, [t1.op == REDUCE]),
        Query(
            "reads-data: a transfer reads a cell holding data, and a reduce adds into one",
            at_step + rank(q) + slot(j) + [_bool(t1.active)],
            z3.And(defined(s, q, t1.src_chunk), z3.Implies(t1.op == REDUCE, defined(s, t1.dst, t1.dst_chunk))),
        ),
        Query("copy-alone: a copy is the only write into its cell in its step", two_writers, t1.op == REDUCE, second_writer),
        Query(
            "disjoint-writers: two writes into one cell bring no common contribution",
            two_writers + contribution,
            z3.Not(z3.And(holds(s, q, t1.src_chunk), holds(s, q2, t2.src_chunk))),
            second_writer,
        ),
        Query(
            "adds-new: a reduce brings nothing the cell already holds",
            one_writer + contribution,
            z3.Not(z3.And(holds(s, r, c), holds(s, q, t1.src_chunk))),
            [t1.op == REDUCE],
        ),
        Query(
            "keeps-arrivals: after the step the cell holds data and what arrived",
            one_writer + contribution,
            z3.And(defined(s + 1, r, c), z3.Implies(holds(s, q, t1.src_chunk), holds(s + 1, r, c))),
        ),
        Query("reduce-keeps: a reduced cell still holds what it held", one_writer + contribution, z3.Implies(holds(s, r, c), holds(s + 1, r, c)), [t1.op == REDUCE]),
        Query("writer: the invariant's witness writes the cell whenever any slot does", one_writer, z3.And(*rank(wq), *slot(wj), writes(w, r, c))),
        Query(
            "unwritten-unchanged: a cell nobody writes keeps its state",
            at_step + rank(r) + cell(c) + contribution,
            z3.And(defined(s + 1, r, c) == defined(s, r, c), holds(s + 1, r, c) == holds(s, r, c)),
            [z3.Not(z3.And(*rank(wq), *slot(wj), writes(w, r, c)))],
        ),
        Query(
            "nothing-else: what a written cell holds after the step arrived in it or was kept by a reduce",
            at_step + rank(r) + cell(c) + contribution + rank(wq) + slot(wj) + [writes(w, r, c), holds(s + 1, r, c)],
            z3.Or(
                z3.And(*rank(sq), *slot(sj), writes(src, r, c), holds(s, sq, src.src_chunk)),
                z3.And(w.op == REDUCE, holds(s, r, c)),
            ),
        ),
        Query(
            "base: before step 0 the cells are the collective's inputs",
            base + contribution,
            z3.And(
                defined(0, r, c) == _bool(is_input(n, chunks, r, c, root)),
                holds(0, r, c) == z3.And(_bool(is_input(n, chunks, r, c, root)), x == r, k == c),
            ),
        ),
        Query(
            "end: after the last step every output cell holds exactly its collective's contributions",
            base + contribution + [_bool(is_output(n, chunks, r, c, root))],
            z3.And(defined(final, r, c), holds(final, r, c) == _bool(expected(n, chunks, r, c, x, k, root))),
        ),
    ]
    if invariant.cases is None:
        return asked
    cases = invariant.cases(params, s, n)
    return [split for query in asked for split in (_by_case(query, cases) if not query.name.startswith(("base", "end")) else [query])]


def _by_case(query: Query, cases: list) -> list:
    """``query`` once per case (see :class:`Invariant`): case i is its
    condition and none before it, and a last case is none of them."""
    split, before = [], []
    for label, condition in [*cases, ("otherwise", None)]:
        here = [*before] + ([condition] if condition is not None else [])
        split.append(Query(f"{query.name} [{label}]", query.premises, query.claim, query.when, [*query.case, *here]))
        if condition is not None:
            before.append(z3.Not(condition))
    return split


def spec_check(collective: str) -> Callable[[], Outcome]:
    """:func:`spec_agrees` as a proof step."""

    def run() -> Outcome:
        problem = spec_agrees(collective)
        name = f"the symbolic postcondition of {collective} is the spec's (N = 1..6)"
        if problem:
            return Outcome(FAILED, f"{name}: {problem}", queries=[(name, FAILED, 0.0)])
        return Outcome(PROVED, queries=[(name, PROVED, 0.0)])

    return run


def _bool(value):
    return as_term(value, None)


def with_options(program: Program, **fixed) -> Program:
    """``program`` with the options ``fixed`` set to constants (not symbolic
    in a proof); its other options stay symbolic."""
    from dataclasses import replace

    rebuilt = program.factory(**{**program.params, **fixed})
    return replace(rebuilt, params={k: v for k, v in rebuilt.params.items() if k not in fixed})


def at_root_zero(program: Program) -> Program:
    """``program`` with its root fixed to 0 (no symbolic root)."""
    return with_options(program, root=0)


def rotation_queries(program: Program, position: Callable, rank: Callable) -> list:
    """For a rooted program whose root-0 instance the induction proves: the
    queries that it is, for every root, that instance with ranks renamed.
    ``position(r, root, N)`` and ``rank(p, root, N)`` are the renaming,
    stated in :mod:`collspec.proofs.invariants` (not imported from the
    generator: the rotation query compares the generator's transfer
    function against it). Shown, for
    symbolic N, root, s, rank r and slot j:

    - ``renaming`` (three queries): position and rank are inverse bijections
      of 0..N-1, and the root is at position 0;
    - ``rotation``: T_root(r, j) is T_0(position(r), j) with its destination
      renamed by ``rank`` (same activity, cells and op).

    The step from these to "every root computes its collective" is the
    premise that renaming ranks by a bijection that maps 0 to the root maps
    a correct rooted collective at root 0 to the same collective at root
    (the spec's rooted collectives treat ranks alike apart from the root)."""
    sym, v = symbolic(program)
    zero = at_root_zero(program)
    n, s, r, j, root = v["N"], v["s"], v["r"], v["j"], v["root"]
    bv = program.sort == BITVEC
    p = z3.BitVec("p", BITVEC_WIDTH) if bv else z3.Int("p")
    steps, width = (as_term(f(n), n) for f in (sym.steps, sym.width))
    domain = scope_of(program).assertions(v)
    pr, rp = as_term(position(r, root, n), n), as_term(rank(p, root, n), n)
    mine = sym.transfer(n, s, r, j)
    base = zero.transfer(n, s, pr, j)
    mine = Transfer(*(as_term(f, n) for f in (mine.active, mine.dst, mine.src_chunk, mine.dst_chunk, mine.op)))
    base = Transfer(*(as_term(f, n) for f in (base.active, base.dst, base.src_chunk, base.dst_chunk, base.op)))
    renamed = as_term(rank(base.dst, root, n), n)
    return [
        Query("renaming: position maps the ranks into 0..N-1 and rank undoes it", domain + [0 <= r, r < n],
              z3.And(0 <= pr, pr < n, as_term(rank(pr, root, n), n) == r)),
        Query("renaming: rank maps the positions into 0..N-1 and position undoes it", domain + [0 <= p, p < n],
              z3.And(0 <= rp, rp < n, as_term(position(rp, root, n), n) == p)),
        Query("renaming: the root is at position 0", domain, as_term(position(root, root, n), n) == 0),
        Query(
            "rotation: the transfer of rank r at every root is the root-0 transfer of its position, destination renamed",
            domain + [0 <= s, s < steps, 0 <= r, r < n, 0 <= j, j < width],
            z3.And(
                _bool(mine.active) == _bool(base.active),
                z3.Implies(_bool(mine.active), z3.And(mine.dst == renamed, mine.src_chunk == base.src_chunk, mine.dst_chunk == base.dst_chunk, mine.op == base.op)),
            ),
        ),
    ]
