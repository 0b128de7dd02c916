"""Z3 queries that cannot pass by accident.

A :class:`Query` asks whether its premises imply its claim for every value
of the free variables. :func:`decide` answers it in two solver calls:

1. the premises alone must be satisfiable; premises that contradict each
   other would make any claim "hold", so that is reported as a failure;
2. premises and the negated claim must be unsatisfiable. A model of them is
   a counterexample, reported with the value of every named variable
   (N, r, s, ...). ``unknown`` (the resource limit reached, or a theory Z3
   gives up on) is a failure to prove, never a pass.

Every solver check has a resource limit, never a wall-clock timeout: Z3's
``rlimit`` counts its own steps, so a verdict is the same on a loaded
machine as on an idle one. A proof row sets its limit (calibrated from the
units its checks use, :data:`collspec.proofs.suite.RLIMITS`) with
:func:`within`; outside a row :data:`DEFAULT_RLIMIT` applies. While a row
runs, :func:`decide` also holds every query to the row's scope
(:mod:`collspec.proofs.scope`): a premise over N, the root or an option
alone that does not follow from the scope fails the query.

>>> import z3
>>> n, r = z3.Ints("N r")
>>> decide(Query("next of r is a rank", [n >= 2, 0 <= r, r < n], (r + 1) % n < n)).status
'proved'
>>> bad = decide(Query("r + 1 is a rank", [n >= 2, 0 <= r, r < n], r + 1 < n))
>>> bad.status, bad.counterexample["r"] == bad.counterexample["N"] - 1
('FAILED', True)
"""

from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Sequence

import z3

from .scope import SCOPE_VARIABLES, Scope

PROVED, FAILED, UNKNOWN = "proved", "FAILED", "unknown"
#: A query whose claim Z3 simplifies to True with no premises: it re-reads a
#: definition. It is run but never counted or shown as a proof.
TRIVIAL = "trivial"

#: Z3 resource units per solver check outside a proof row (``collspec prove
#: --schedule``, tests). Rows set their own (:data:`collspec.proofs.suite.RLIMITS`).
DEFAULT_RLIMIT = 50_000_000

#: why a proof is not proved (:attr:`Outcome.reason`)
COUNTEREXAMPLE = "counterexample"
RESOURCE_LIMIT = "resource limit reached"
VACUOUS = "premises contradict each other"
NARROWS = "a premise narrows the scope"


@dataclass(frozen=True)
class Query:
    """Do ``premises`` imply ``claim`` for all values of the free variables?

    ``when`` describes a situation that may never arise (for example "two
    transfers write one cell in one step"): the premises alone must still
    be satisfiable, but if the premises and ``when`` cannot hold together
    the claim holds because the situation never arises: the query is
    proved (one check of premises, ``when`` and the negated claim settles
    both cases; a separate "does it arise" check cost a solver call per
    query, most of them satisfiable and slow to find a model for).

    ``case`` is one case of an exhaustive case split
    (:func:`collspec.proofs.induction.queries` with an invariant's
    ``cases``: case i is its condition and none before it, the last case
    none of them): it is added like ``when``, but the cases together cover
    the scope, so a case condition over scope variables (``N`` even) is not
    a premise that narrows it. Only cases go there: a row that splits by
    case proves, as a query, that its cases cover the scope.

    ``pin`` fixes variables that are not scope variables at one value (a
    rank r = 0) or in one range (the cells of one channel), added like
    ``when``. It is justified by lemmas of the row that sets it, not by a
    cover: the row proves as queries that the program, the ends and the
    invariant turn with the ranks (or that one channel is another renamed),
    and its module text states the argument that carries the pinned query
    to every value (:mod:`collspec.proofs.nccl_pat_allgather`,
    :mod:`collspec.proofs.nccl_tree_allreduce`)."""

    name: str
    premises: Sequence[z3.BoolRef]
    claim: z3.BoolRef
    when: Sequence[z3.BoolRef] = ()
    case: Sequence[z3.BoolRef] = ()
    pin: Sequence[z3.BoolRef] = ()


@dataclass
class Outcome:
    """What became of a proof: its status, a counterexample when it failed,
    and the queries it ran as ``(name, status, seconds)``."""

    status: str
    message: str = ""
    counterexample: dict = field(default_factory=dict)
    queries: list[tuple[str, str, float]] = field(default_factory=list)
    #: why it is not proved: :data:`COUNTEREXAMPLE`, :data:`RESOURCE_LIMIT`, ... ("" when proved)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == PROVED


# -- resource limits and the row being proved ------------------------------------------------


@dataclass
class Row:
    """The proof row being run: its name, scope and resource limit per
    check; ``most_used`` is the most units one of its checks took."""

    name: str
    scope: Scope | None
    rlimit: int
    most_used: int = 0
    #: AST id -> (AST, its scope variables): see :func:`_scope_terms`
    seen: dict = field(default_factory=dict, repr=False)
    #: premise sets shown satisfiable (AST ids, and the premises, kept alive so the ids stay theirs)
    satisfiable: list = field(default_factory=list, repr=False)


_ROW: contextvars.ContextVar[Row | None] = contextvars.ContextVar("collspec_proof_row", default=None)


@contextmanager
def within(row: Row):
    """Run the body as proof row ``row`` (its scope and resource limit)."""
    token = _ROW.set(row)
    try:
        yield row
    finally:
        _ROW.reset(token)


def current_row() -> Row | None:
    """The proof row being run, or None."""
    return _ROW.get()


def current_rlimit() -> int:
    """The resource limit per check here: the row's, or :data:`DEFAULT_RLIMIT`."""
    row = _ROW.get()
    return row.rlimit if row is not None else DEFAULT_RLIMIT


class Solver:
    """A solver whose every check runs in a fresh Z3 context.

    Assertions are collected as usual; :meth:`check` prints them as SMT-LIB
    text and decides that text in a new context with the resource limit.
    The effort Z3 spends on a formula depends on the internal numbering of
    its terms, which in one long-lived context depends on everything built
    before: the same query took 0.85 or 13.6 million units (0.4 or 1.9 s)
    depending on which proofs ran first. From text in a fresh context the
    units (and so the verdict under a resource limit) are a function of the
    query alone. A model comes back translated into the main context, so
    ``model().eval`` takes the caller's terms."""

    def __init__(self, logic: str | None = None, rlimit: int | None = None):
        self.logic = logic
        self.rlimit = int(rlimit or current_rlimit())
        self.units = 0
        self._assertions = z3.Solver()
        self._model: z3.ModelRef | None = None
        self._reason = ""

    def add(self, *formulas) -> None:
        self._assertions.add(*formulas)

    def check(self) -> z3.CheckSatResult:
        """Decide the assertions (module text), noting the units used in the current row."""
        context = z3.Context()
        solver = z3.SolverFor(self.logic, ctx=context) if self.logic else z3.Solver(ctx=context)
        solver.set("rlimit", self.rlimit)
        solver.from_string(_canonical(self._assertions.sexpr()))
        before = _units(solver)
        answer = solver.check()
        self.units = _units(solver) - before
        row = _ROW.get()
        if row is not None:
            row.most_used = max(row.most_used, self.units)
        self._model = solver.model().translate(z3.main_ctx()) if answer == z3.sat else None
        self._reason = solver.reason_unknown() if answer == z3.unknown else ""
        return answer

    def model(self) -> z3.ModelRef:
        if self._model is None:
            raise z3.Z3Exception("no model: the last check was not sat")
        return self._model

    def reason_unknown(self) -> str:
        return self._reason


def _canonical(text: str) -> str:
    """SMT-LIB text with its declarations sorted (sorts first): Z3 prints
    them in the order of its internal term numbering, and the order in which
    a fresh context meets them steers its search."""
    lines = text.splitlines()
    declarations = sorted((line for line in lines if line.startswith("(declare-")), key=lambda line: (not line.startswith("(declare-sort"), line))
    return "\n".join(declarations + [line for line in lines if not line.startswith("(declare-")])


def new_solver(logic: str | None = None, rlimit: int | None = None) -> Solver:
    """A :class:`Solver` (for ``logic`` if given) with the resource limit
    ``rlimit`` or the current one: the only way proofs/ makes a solver."""
    return Solver(logic, rlimit)


def _units(solver: z3.Solver) -> int:
    """Z3's resource counter (one per context: a fresh solver reads it too)."""
    try:
        return int(solver.statistics().get_key_value("rlimit count"))
    except z3.Z3Exception:
        return 0


def why_unknown(solver: Solver) -> str:
    """Why ``solver`` answered unknown, in words: :data:`RESOURCE_LIMIT`
    when it ran out of resource units, else Z3's own reason."""
    reason = solver.reason_unknown()
    return RESOURCE_LIMIT if "resource limit" in reason or reason == "canceled" else reason


def decide(query: Query, rlimit: int | None = None) -> Outcome:
    """Answer one query (see the module text). Each check runs on a fresh
    solver: Z3 then applies the tactic for the formula's logic (bit-blasting
    for bit-vectors), which its incremental mode does not; on the rooted
    trees that is the difference between seconds and a timeout."""
    started = time.perf_counter()

    def done(status: str, message: str = "", counterexample: dict | None = None, reason: str = "") -> Outcome:
        seconds = time.perf_counter() - started
        return Outcome(status, message, counterexample or {}, [(query.name, status, round(seconds, 4))], reason)

    def ask(*extra):
        solver = new_solver(rlimit=rlimit)
        solver.add(*query.premises, *extra)
        return solver.check(), solver

    def unknown(solver, what: str) -> Outcome:
        why = why_unknown(solver)
        return done(UNKNOWN, f"{query.name}: unknown ({why}) {what}; not proved", reason=why if why == RESOURCE_LIMIT else f"Z3: {why}")

    if z3.is_true(z3.simplify(query.claim)):
        return done(TRIVIAL)
    narrowing = _narrowing(query, rlimit)
    if narrowing:
        return done(FAILED, f"{query.name}: {narrowing}", reason=NARROWS)
    first, solver = (z3.sat, None) if _known_satisfiable(query.premises) or _satisfiable_at_sample(query, rlimit) else ask()
    if first == z3.sat:
        _note_satisfiable(query.premises)
    if first == z3.unsat:
        return done(FAILED, f"{query.name}: the premises contradict each other, so the claim would hold vacuously", reason=VACUOUS)
    if first == z3.unknown:
        return unknown(solver, "deciding whether the premises can hold")
    answer, solver = ask(*query.when, *query.case, *query.pin, z3.Not(query.claim))
    if answer == z3.unsat:
        return done(PROVED)
    if answer == z3.unknown:
        for sample in SAMPLES:  # a counterexample at a point of the scope is as good as any
            pinned, at = ask(*query.when, *query.case, *query.pin, z3.Not(query.claim), *_pins(query, sample))
            if pinned == z3.sat:
                solver = at
                break
        else:
            return unknown(solver, "deciding the claim")
    example = counterexample(solver.model(), [*query.premises, query.claim])
    shown = ", ".join(f"{k}={v}" for k, v in example.items())
    return done(FAILED, f"{query.name}: fails for {shown}", example, COUNTEREXAMPLE)


#: a point inside every scope (N = G L = 4, root 1) where the premises of a
#: query are first tried: a model with N fixed is found quickly, and it
#: shows the premises satisfiable as well as any; only when there is none
#: there does the general check run
SAMPLE = {"N": 4, "root": 1, "groups": 2, "size": 2}
#: where a counterexample is looked for when the general check of a claim
#: ran out of resource units: points inside every scope (a model there is a
#: genuine counterexample; none there leaves the claim unknown)
SAMPLES = (SAMPLE, {"N": 6, "root": 5, "groups": 3, "size": 2}, {"N": 17, "root": 16, "groups": 17, "size": 1})


def _pins(query: Query, sample: dict) -> list:
    """``variable == value`` for each scope variable of ``sample`` in the query's premises."""
    row = _ROW.get()
    if row is None:
        return []
    pins = {c.decl().name(): c for p in query.premises if (terms := _scope_terms(p, frozenset(sample), row.seen)) for c in terms.values()}
    return [term == sample[name] for name, term in pins.items()]


def _satisfiable_at_sample(query: Query, rlimit: int | None) -> bool:
    pins = _pins(query, SAMPLE)
    if not pins:
        return False
    solver = new_solver(rlimit=rlimit)
    solver.add(*query.premises, *pins)
    return solver.check() == z3.sat


def _known_satisfiable(premises) -> bool:
    """Premises that are a subset of a set already shown satisfiable in
    this row are satisfiable (the same model): the queries of an induction
    share most of their premises, and hierarchical-ring's per-phase cases
    all of them."""
    row = _ROW.get()
    if row is None:
        return False
    ids = {p.get_id() for p in premises}
    return any(ids <= known for known, _ in row.satisfiable)


def _note_satisfiable(premises) -> None:
    row = _ROW.get()
    if row is not None:
        row.satisfiable.append((frozenset(p.get_id() for p in premises), list(premises)))


#: (scope, premise) -> whether the scope implies it (the same premise recurs in many queries)
_IMPLIED: dict[tuple[Scope, str], bool] = {}


def _narrowing(query: Query, rlimit: int | None) -> str:
    """'' when every premise (and ``when`` condition) of ``query`` over scope
    variables alone follows from the current row's scope; else which one
    does not."""
    row = _ROW.get()
    if row is None or row.scope is None:
        return ""
    names = SCOPE_VARIABLES | row.scope.variables()
    found = [(premise, terms) for premise in _conjuncts([*query.premises, *query.when]) if (terms := _scope_terms(premise, names, row.seen))]
    for premise, terms in found:
        key = (row.scope, premise.sexpr())
        if key not in _IMPLIED:
            allowed = row.scope.assertions({k: v for _, t in found for k, v in t.items()})
            if any(premise.eq(a) for a in allowed):
                _IMPLIED[key] = True
                continue
            solver = new_solver(rlimit=rlimit)
            solver.add(*allowed, z3.Not(premise))
            _IMPLIED[key] = solver.check() == z3.unsat
        if not _IMPLIED[key]:
            return (f"the premise {premise} narrows the scope '{row.scope.text()}' (it does not follow from it): "
                    "state it in the row's scope (collspec.proofs.scope) or remove it")
    return ""


def _scope_terms(expr: z3.ExprRef, names, seen: dict) -> dict:
    """The free variables of ``expr`` by name when all are scope variables
    (``names``), else {}: breadth first, stopping at the first other
    variable. An uninterpreted function (a scope's ``part(h)``) counts as a
    variable, by its declaration; quantifiers are looked into. ``seen`` caches the answer by AST (and keeps the AST alive,
    so that its id is not reused)."""
    key = (expr.get_id(), names)
    if key not in seen:
        terms: dict = {}
        queue, visited = [expr], {expr.get_id()}
        while queue:
            e = queue.pop(0)
            function = z3.is_app(e) and e.num_args() > 0 and e.decl().kind() == z3.Z3_OP_UNINTERPRETED
            if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED or function:
                if e.decl().name() not in names:
                    terms = {}
                    break
                terms[e.decl().name()] = e.decl() if function else e
            if z3.is_app(e) or z3.is_quantifier(e):
                for child in e.children():
                    if child.get_id() not in visited:
                        visited.add(child.get_id())
                        queue.append(child)
        seen[key] = (expr, terms)
    return seen[key][1]


def _conjuncts(formulas) -> list:
    """The formulas with top-level conjunctions split."""
    out, stack = [], list(formulas)[::-1]
    while stack:
        f = stack.pop()
        if z3.is_and(f):
            stack.extend(f.children()[::-1])
        elif not isinstance(f, bool):
            out.append(f)
    return out


def run_queries(queries: Iterable[Query | Callable[[], Outcome]], rlimit: int | None = None) -> Outcome:
    """Decide queries in order; the proof holds when every one is proved.

    An item may also be a function returning an :class:`Outcome` (such as
    :func:`prove_exists`). Stops at the first item that fails and reports
    it; an ``unknown`` item is reported (as the first undecided one) only
    when no later item fails, since a counterexample settles the proof.
    """
    ran: list[tuple[str, str, float]] = []
    undecided: Outcome | None = None
    for query in queries:
        outcome = decide(query, rlimit) if isinstance(query, Query) else query()
        ran += outcome.queries
        if outcome.status == TRIVIAL:
            continue
        if outcome.status == UNKNOWN:  # go on: a later query may fail with a counterexample, which settles it
            undecided = undecided or outcome
            continue
        if not outcome.ok:
            outcome.queries = ran
            return outcome
    if undecided is not None:
        undecided.queries = ran
        return undecided
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
    rlimit: int | None = None,
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
    limited = False
    for label, term in candidates:
        outcome = decide(Query(f"{name}, witness {label}", premises, claim_of(term)), rlimit)
        ran += outcome.queries
        limited = limited or outcome.reason == RESOURCE_LIMIT
        if outcome.ok:
            return Outcome(PROVED, f"witness {label}", queries=ran)
        if outcome.status == FAILED and outcome.reason in (VACUOUS, NARROWS):
            outcome.queries = ran
            return outcome
    found = search()
    labels = ", ".join(label for label, _ in candidates)
    if found is not None:
        shown = ", ".join(f"{k}={v}" for k, v in found.items())
        return Outcome(FAILED, f"{name}: fails for {shown}", found, ran, COUNTEREXAMPLE)
    why = f" ({RESOURCE_LIMIT} on a witness)" if limited else ""
    return Outcome(UNKNOWN, f"{name}: unknown: no witness among {labels}{why} and no counterexample on small N; not proved", queries=ran,
                   reason=RESOURCE_LIMIT if limited else "no witness found")


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


def replace_subterms(term: z3.ExprRef, rule: Callable[[z3.ExprRef], z3.ExprRef | None]) -> z3.ExprRef:
    """``term`` with every subterm t for which ``rule(t)`` gives a term
    replaced by it; the subterms of a replaced one are not visited (a rule
    that wants them rewritten calls this again on them). Each shared
    subterm is visited once."""
    found, stack, seen = [], [term], set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen or not z3.is_app(t):
            continue
        seen.add(t.get_id())
        new = rule(t)
        if new is not None:
            found.append((t, new))
            continue
        stack.extend(t.children())
    return z3.substitute(term, *found) if found else term


def subterms(formulas: Sequence[z3.ExprRef], wanted: Callable[[z3.ExprRef], bool]) -> list[z3.ExprRef]:
    """The distinct application subterms of ``formulas`` that ``wanted`` accepts."""
    found, stack, seen = [], list(formulas), set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen or not z3.is_app(t):
            continue
        seen.add(t.get_id())
        if wanted(t):
            found.append(t)
        stack.extend(t.children())
    return found


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
