"""No ring all-reduce finishes in fewer than 2(N - 1) steps: bounded
synthesis queries in the style of SCCL.

The question is about every schedule, not about the code: on the directed
ring (rank p sends only to rank p + 1 mod N), with the vector cut into N
chunks and each link carrying at most one chunk per step, can any schedule
finish an all-reduce in T steps? Z3 gets, for every step t and link p, a
choice of chunk (or none) and of op (reduce or copy), and tracks for every
(rank, chunk) cell the set of ranks whose contributions it holds:

- copy: the receiver's cell becomes the sender's set (as it was at the
  start of the step);
- reduce: the receiver's cell becomes the union of both sets.

The goal is every cell of every rank holding all N ranks.

- T = 2(N - 1) - 1 is unsatisfiable. Sets are generous: a union forgets
  duplicates, so a schedule that would count a rank twice is allowed here
  too. Every real schedule is among those considered, so none exists.
- T = 2(N - 1) is satisfiable even with exact counting (a reduce may only
  combine disjoint sets, so nothing is ever counted twice). The schedule Z3
  finds is turned into a :class:`~collspec.models.schedule.Schedule` and
  must pass :func:`collspec.models.checker.check` without errors.

>>> lower_bound(3).status
'proved'
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from ..models.checker import check
from ..models.schedule import COPY, REDUCE, Schedule, Step
from .solver import COUNTEREXAMPLE, FAILED, PROVED, UNKNOWN, Outcome, Solver, new_solver, why_unknown


@dataclass
class Encoding:
    """The query for N ranks and T steps. ``carry[t][p][c]``: link p -> p+1
    carries chunk c at step t; ``reduce[t][p]``: that transfer reduces."""

    ranks: int
    steps: int
    solver: Solver
    carry: list[list[list[z3.BoolRef]]]
    reduce: list[list[z3.BoolRef]]

    def schedule(self, model: z3.ModelRef) -> Schedule:
        """The schedule a model describes, as models/ data."""
        n = self.ranks
        steps = []
        for t in range(self.steps):
            src, dst, chunk, op = [], [], [], []
            for p in range(n):
                for k in range(n):
                    if z3.is_true(model.eval(self.carry[t][p][k], model_completion=True)):
                        src.append(p)
                        dst.append((p + 1) % n)
                        chunk.append(k)
                        op.append(REDUCE if z3.is_true(model.eval(self.reduce[t][p], model_completion=True)) else COPY)
            steps.append(Step.of(src, dst, chunk, chunk, op, name=f"step {t + 1}"))
        return Schedule("allreduce", n, n, tuple(steps), name=f"Z3-synthesised ring allreduce, {n} ranks, {self.steps} steps")


def encode(n: int, steps: int, exact: bool, rlimit: int | None = None) -> Encoding:
    """Build the query (see the module text). ``exact``: reduces must
    combine disjoint sets; otherwise sets are unions (generous)."""
    solver = new_solver("QF_FD", rlimit)
    carry = [[[z3.Bool(f"carry[{t},{p},{k}]") for k in range(n)] for p in range(n)] for t in range(steps)]
    reduce = [[z3.Bool(f"reduce[{t},{p}]") for p in range(n)] for t in range(steps)]
    for t in range(steps):
        for p in range(n):
            solver.add(z3.AtMost(*carry[t][p], 1))
    # holds[q][k][x]: rank q's chunk k contains rank x's contribution
    holds = [[[z3.BoolVal(x == q) for x in range(n)] for _ in range(n)] for q in range(n)]
    for t in range(steps):
        after = []
        for q in range(n):
            p = (q - 1) % n  # the only rank that sends to q
            row = []
            for k in range(n):
                here, adds = carry[t][p][k], reduce[t][p]
                incoming, own = holds[p][k], holds[q][k]
                if exact:
                    solver.add(z3.Implies(z3.And(here, adds), z3.Not(z3.Or([z3.And(a, b) for a, b in zip(incoming, own)]))))
                cell = []
                for x in range(n):
                    value = z3.Bool(f"holds[{t + 1},{q},{k},{x}]")
                    solver.add(value == z3.If(here, z3.If(adds, z3.Or(incoming[x], own[x]), incoming[x]), own[x]))
                    cell.append(value)
                row.append(cell)
            after.append(row)
        holds = after
    solver.add(z3.And([b for q in range(n) for k in range(n) for b in holds[q][k]]))
    return Encoding(n, steps, solver, carry, reduce)


def lower_bound(n: int, rlimit: int | None = None) -> Outcome:
    """On N ranks: unsat in 2(N - 1) - 1 steps, a checked schedule in 2(N - 1)."""
    started = time.perf_counter()
    bound = 2 * (n - 1)
    ran = []

    def note(name: str, status: str) -> None:
        ran.append((name, status, round(time.perf_counter() - started, 4)))

    fewer_query = encode(n, bound - 1, exact=False, rlimit=rlimit)
    fewer = fewer_query.solver.check()
    note(f"N={n}: no schedule in {bound - 1} steps (sets, duplicates allowed)", _status(fewer, expected=z3.unsat))
    if fewer == z3.sat:
        return Outcome(FAILED, f"N={n}: Z3 found a schedule in {bound - 1} steps, below 2(N-1)", {"N": n, "steps": bound - 1}, ran, COUNTEREXAMPLE)
    if fewer != z3.unsat:
        why = why_unknown(fewer_query.solver)
        return Outcome(UNKNOWN, f"N={n}: unknown ({why}) on the {bound - 1}-step query; not proved", {"N": n}, ran, why)
    exact = encode(n, bound, exact=True, rlimit=rlimit)
    found = exact.solver.check()
    if found != z3.sat:
        status = _status(found, expected=z3.sat)
        note(f"N={n}: a schedule in {bound} steps (exact counting)", status)
        if status == UNKNOWN:
            why = why_unknown(exact.solver)
            return Outcome(status, f"N={n}: unknown ({why}) looking for a {bound}-step schedule; not proved", {"N": n, "steps": bound}, ran, why)
        return Outcome(status, f"N={n}: Z3 proved there is no {bound}-step schedule", {"N": n, "steps": bound}, ran, "no schedule in 2(N-1) steps")
    schedule = exact.schedule(exact.solver.model())
    result = check(schedule)
    errors = [v for v in result.violations if v.is_error]
    note(f"N={n}: a schedule in {bound} steps, checked by models.checker", PROVED if not errors else FAILED)
    if errors:
        return Outcome(FAILED, f"N={n}: the {bound}-step schedule Z3 found fails the checker: {errors[0]}", {"N": n}, ran, "the checker rejects Z3's schedule")
    return Outcome(PROVED, f"N={n}: none in {bound - 1} steps; one in {bound} ({schedule.transfers} transfers), checker ok", {}, ran)


def _status(answer: z3.CheckSatResult, expected: z3.CheckSatResult) -> str:
    if answer == expected:
        return PROVED
    return UNKNOWN if answer == z3.unknown else FAILED


def lower_bounds(ranks: range, rlimit: int | None = None) -> Outcome:
    """:func:`lower_bound` for every N in ``ranks``."""
    ran = []
    for n in ranks:
        outcome = lower_bound(n, rlimit)
        ran += outcome.queries
        if not outcome.ok:
            outcome.queries = ran
            return outcome
    return Outcome(PROVED, f"2(N-1) steps are needed and enough for N = {ranks.start}..{ranks.stop - 1}", queries=ran)
