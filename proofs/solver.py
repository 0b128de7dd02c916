"""Z3 queries that cannot pass by accident.

A :class:`Query` asks whether its premises imply its claim for every value
of the free variables. :func:`decide` answers it in two solver calls:

1. the premises alone must be satisfiable; premises that contradict each
   other would make any claim "hold", so that is reported as a failure;
2. premises and the negated claim must be unsatisfiable. A model of them is
   a counterexample, reported with the value of every named variable
   (N, r, s, ...). ``unknown`` (a timeout, or a theory Z3 gives up on) is a
   failure to prove, never a pass.

Every solver call has a timeout (:data:`QUERY_TIMEOUT_MS`).

>>> import z3
>>> n, r = z3.Ints("N r")
>>> decide(Query("next of r is a rank", [n >= 2, 0 <= r, r < n], (r + 1) % n < n)).status
'proved'
>>> bad = decide(Query("r + 1 is a rank", [n >= 2, 0 <= r, r < n], r + 1 < n))
>>> bad.status, bad.counterexample["r"] == bad.counterexample["N"] - 1
('FAILED', True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Sequence

import z3

PROVED, FAILED, UNKNOWN = "proved", "FAILED", "unknown"
#: A query whose claim Z3 simplifies to True with no premises: it re-reads a
#: definition. It is run but never counted or shown as a proof.
TRIVIAL = "trivial"

#: Per solver call, in milliseconds. The default suite's slowest query takes
#: well under a second; anything near this limit is a sign of trouble.
QUERY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Query:
    """Do ``premises`` imply ``claim`` for all values of the free variables?

    ``when`` describes a situation that may never arise (for example "two
    transfers write one cell in one step"): the premises alone must still
    be satisfiable, but if the premises and ``when`` cannot hold together
    the claim holds because the situation never arises, and the query is
    proved as such."""

    name: str
    premises: Sequence[z3.BoolRef]
    claim: z3.BoolRef
    when: Sequence[z3.BoolRef] = ()


@dataclass
class Outcome:
    """What became of a proof: its status, a counterexample when it failed,
    and the queries it ran as ``(name, status, seconds)``."""

    status: str
    message: str = ""
    counterexample: dict = field(default_factory=dict)
    queries: list[tuple[str, str, float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == PROVED


def decide(query: Query, timeout_ms: int = QUERY_TIMEOUT_MS) -> Outcome:
    """Answer one query (see the module text). Each check runs on a fresh
    solver: Z3 then applies the tactic for the formula's logic (bit-blasting
    for bit-vectors), which its incremental mode does not; on the rooted
    trees that is the difference between seconds and a timeout."""
    started = time.perf_counter()

    def done(status: str, message: str = "", counterexample: dict | None = None) -> Outcome:
        seconds = time.perf_counter() - started
        return Outcome(status, message, counterexample or {}, [(query.name, status, round(seconds, 4))])

    def check(*extra):
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(*query.premises, *extra)
        return solver.check(), solver

    if z3.is_true(z3.simplify(query.claim)):
        return done(TRIVIAL)
    first, solver = check()
    if first == z3.unsat:
        return done(FAILED, f"{query.name}: the premises contradict each other, so the claim would hold vacuously")
    if first == z3.unknown:
        return done(UNKNOWN, f"{query.name}: Z3 could not decide whether the premises can hold ({solver.reason_unknown()})")
    if query.when:
        arises, solver = check(*query.when)
        if arises == z3.unsat:
            return done(PROVED, "never arises")
        if arises == z3.unknown:
            return done(UNKNOWN, f"{query.name}: Z3 could not decide whether the situation arises ({solver.reason_unknown()}); not proved")
    answer, solver = check(*query.when, z3.Not(query.claim))
    if answer == z3.unsat:
        return done(PROVED)
    if answer == z3.unknown:
        return done(UNKNOWN, f"{query.name}: Z3 returned unknown ({solver.reason_unknown()}); not proved")
    example = counterexample(solver.model(), [*query.premises, query.claim])
    shown = ", ".join(f"{k}={v}" for k, v in example.items())
    return done(FAILED, f"{query.name}: fails for {shown}", example)


def run_queries(queries: Iterable[Query | Callable[[], Outcome]], timeout_ms: int = QUERY_TIMEOUT_MS) -> Outcome:
    """Decide queries in order; the proof holds when every one is proved.

    An item may also be a function returning an :class:`Outcome` (such as
    :func:`prove_exists`). Stops at the first item not proved and reports it.
    """
    ran: list[tuple[str, str, float]] = []
    for query in queries:
        outcome = decide(query, timeout_ms) if isinstance(query, Query) else query()
        ran += outcome.queries
        if outcome.status == TRIVIAL:
            continue
        if not outcome.ok:
            outcome.queries = ran
            return outcome
    trivial = sum(1 for _, status, _ in ran if status == TRIVIAL)
    proved = len(ran) - trivial
    if proved == 0:
        return Outcome(TRIVIAL, "every query only re-reads a definition: not a proof", queries=ran)
    return Outcome(PROVED, f"{proved} queries" + (f" ({trivial} re-reading a definition, not counted)" if trivial else ""), queries=ran)


def prove_exists(
    name: str,
    premises: Sequence[z3.BoolRef],
    candidates: Sequence[tuple[str, z3.ExprRef]],
    claim_of: Callable[[z3.ExprRef], z3.BoolRef],
    search: Callable[[], dict | None],
    timeout_ms: int = QUERY_TIMEOUT_MS,
) -> Outcome:
    """Prove "for all ..., some w has claim_of(w)" by exhibiting w.

    Z3 does not decide such alternating quantifiers over nonlinear integer
    terms, so each candidate term (for example ``(c + k) % N`` for small k)
    is tried as the witness: if Z3 proves ``claim_of(candidate)`` for all
    values, the statement holds. When no candidate works, ``search`` looks
    for a genuine counterexample on small concrete values; without one the
    result is ``unknown`` (not proved), never a pass.
    """
    ran: list[tuple[str, str, float]] = []
    for label, term in candidates:
        outcome = decide(Query(f"{name}, witness {label}", premises, claim_of(term)), timeout_ms)
        ran += outcome.queries
        if outcome.ok:
            return Outcome(PROVED, f"witness {label}", queries=ran)
        if outcome.status == FAILED and "vacuously" in outcome.message:
            outcome.queries = ran
            return outcome
    found = search()
    labels = ", ".join(label for label, _ in candidates)
    if found is not None:
        shown = ", ".join(f"{k}={v}" for k, v in found.items())
        return Outcome(FAILED, f"{name}: fails for {shown}", found, ran)
    return Outcome(UNKNOWN, f"{name}: no witness among {labels} and no counterexample on small N; not proved", queries=ran)


# -- counterexamples --------------------------------------------------------------


def counterexample(model: z3.ModelRef, formulas: Sequence[z3.ExprRef]) -> dict:
    """The value of every user variable in ``formulas`` (not Z3's own helpers),
    N first, then by name."""
    names = sorted(free_constants(formulas), key=lambda c: (c.decl().name() != "N", c.decl().name()))
    return {c.decl().name(): python_value(model.eval(c, model_completion=True)) for c in names}


def free_constants(formulas: Sequence[z3.ExprRef]) -> list[z3.ExprRef]:
    """Uninterpreted constants (the free variables) of some formulas."""
    seen: dict[int, z3.ExprRef] = {}
    stack = list(formulas)
    visited: set[int] = set()
    while stack:
        e = stack.pop()
        key = e.get_id()
        if key in visited:
            continue
        visited.add(key)
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            seen[key] = e
        elif z3.is_app(e):
            stack.extend(e.children())
        elif z3.is_quantifier(e):
            stack.append(e.body())
    return list(seen.values())


def python_value(value: z3.ExprRef):
    """An int, Fraction, bool or string for a value in a model."""
    if z3.is_int_value(value) or z3.is_bv_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        fraction = Fraction(value.numerator_as_long(), value.denominator_as_long())
        return int(fraction) if fraction.denominator == 1 else str(fraction)
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    return str(value)
