"""Bounded proofs of any schedule: for all inputs, every output cell holds
exactly what the collective defines.

The schedule runs through THE interpreter (:mod:`collspec.models.interpreter`)
over :class:`~collspec.models.algebras.Symbols` whose leaves are Z3 integer
variables ``x[r,k]`` (rank r's input element k) and whose uninitialised cells
are fresh variables ``uninit[r,c]``; reduce is ``+``. What each output must
hold is :func:`collspec.models.layout.expected_outputs`: the spec's own
collective applied to the same variables. Z3 then proves every output equal
to its definition for all integer inputs.

Why integers: every cell is a sum of input variables with non-negative
integer multiplicities (no constants). Two such sums are equal for all
integer inputs exactly when they have the same multiplicities, that is the
same contributor multiset; so the proof also covers every commutative
monoid (real sums, wrapping integers, min, max, ...), and a failure comes
with concrete integers. The counterexample is chosen as readable as Z3
allows: one input set to 1, every other to 0, so the wrong output shows the
missing or extra contribution directly.

The scope is the schedule as given (its N); for all N see
:mod:`collspec.proofs.ring`.

>>> from collspec.models.generators import generate
>>> prove_schedule(generate("ring", "allreduce", 4)).status
'proved'
"""

from __future__ import annotations

import dataclasses
import time

import z3

from ..models.algebras import Symbols
from ..models.interpreter import run
from ..models.layout import ScheduleError, expected_outputs
from ..models.schedule import Schedule
from ..spec.violations import Violation
from .solver import COUNTEREXAMPLE, FAILED, PROVED, UNKNOWN, Outcome, new_solver, python_value, why_unknown

#: transfers x ranks above which a bounded proof is refused (about a minute of Z3 terms)
MAX_WORK = 2_000_000
#: wrong output cells listed in a counterexample
LIST_LIMIT = 8


def symbolic_algebra() -> Symbols:
    """Inputs ``x[r,k]`` and uninitialised cells ``uninit[r,c]`` as Z3 integers."""
    return Symbols(lambda rank, k: z3.Int(f"x[{rank},{k}]"), lambda rank, cell: z3.Int(f"uninit[{rank},{cell}]"))


def outputs_and_definition(schedule: Schedule) -> list[tuple[int, int, z3.ArithRef, z3.ArithRef]]:
    """``(rank, cell, computed, defined)`` for every output cell."""
    layout = schedule.layout
    algebra = symbolic_algebra()
    final = run(schedule, algebra).state
    leaves = [algebra.leaves(rank, layout.inputs[rank]) for rank in range(schedule.ranks)]
    expected = expected_outputs(schedule, leaves)
    return [
        (rank, int(cell), final[rank, int(cell)], expected[rank][k])
        for rank in range(schedule.ranks)
        for k, cell in enumerate(layout.outputs[rank])
    ]


def prove_schedule(schedule: Schedule, rlimit: int | None = None) -> Outcome:
    """Prove that ``schedule`` computes its collective for all inputs (each
    check within ``rlimit`` Z3 resource units, by default the current row's)."""
    started = time.perf_counter()
    work = schedule.transfers * max(schedule.ranks, 1)
    if work > MAX_WORK:
        raise ScheduleError(
            f"{schedule.label()}: {schedule.transfers} transfers on {schedule.ranks} ranks is too large for a bounded "
            f"proof (limit {MAX_WORK} transfers x ranks); 'collspec check' handles it"
        )
    cells = outputs_and_definition(schedule)
    # Z3's arithmetic normal form settles most cells; the solver gets the rest.
    open_cells = [(rank, cell, got, want) for rank, cell, got, want in cells if not _zero(z3.simplify(got - want))]
    name = f"every output of {schedule.label()} is its {schedule.collective}"

    def done(status: str, message: str = "", example: dict | None = None, reason: str = "") -> Outcome:
        seconds = round(time.perf_counter() - started, 4)
        return Outcome(status, message, example or {}, [(name, status, seconds)], reason)

    if not open_cells:
        return done(PROVED, f"{len(cells)} output cells")
    solver = new_solver(rlimit=rlimit)
    solver.add(z3.Or([got != want for _, _, got, want in open_cells]))
    answer = solver.check()
    if answer == z3.unsat:
        return done(PROVED, f"{len(cells)} output cells")
    if answer == z3.unknown:
        why = why_unknown(solver)
        return done(UNKNOWN, f"{name}: unknown ({why}); not proved", reason=why)
    model = _readable_model(open_cells, rlimit) or solver.model()
    example = _describe(schedule, model, open_cells)
    return done(FAILED, _message(schedule, example), example, COUNTEREXAMPLE)


def _zero(term: z3.ExprRef) -> bool:
    return z3.is_int_value(term) and term.as_long() == 0


def _readable_model(open_cells, rlimit: int | None) -> z3.ModelRef | None:
    """A counterexample with exactly one variable 1 and the rest 0, if Z3
    finds one (it exists whenever some cell's sum differs from its definition)."""
    variables = {v.get_id(): v for _, _, got, want in open_cells for v in _variables(got - want)}.values()
    solver = new_solver(rlimit=rlimit)
    solver.add([z3.Or(v == 0, v == 1) for v in variables])
    solver.add(z3.Sum([v for v in variables]) == 1)
    solver.add(z3.Or([got != want for _, _, got, want in open_cells]))
    return solver.model() if solver.check() == z3.sat else None


def _variables(term: z3.ExprRef) -> list[z3.ExprRef]:
    from .solver import free_constants

    return free_constants([term])


def _describe(schedule: Schedule, model: z3.ModelRef, open_cells) -> dict:
    """The inputs that are not 0, and the output cells that come out wrong."""
    names = schedule.layout.cell_name
    variables = {v.get_id(): v for _, _, got, want in open_cells for v in _variables(got - want)}.values()
    values = {str(v): python_value(model.eval(v, model_completion=True)) for v in variables}
    wrong = []
    for rank, cell, got, want in open_cells:
        have = python_value(model.eval(got, model_completion=True))
        need = python_value(model.eval(want, model_completion=True))
        if have != need:
            wrong.append({"rank": rank, "cell": cell, "name": names(cell), "got": have, "expected": need})
    return {
        "inputs": {k: v for k, v in sorted(values.items()) if v != 0 and k.startswith("x[")},
        "uninitialised": {k: v for k, v in sorted(values.items()) if v != 0 and k.startswith("uninit[")},
        "wrong_outputs": wrong[:LIST_LIMIT],
        "wrong_count": len(wrong),
    }


def _message(schedule: Schedule, example: dict) -> str:
    given = ", ".join(f"{k}={v}" for k, v in {**example["inputs"], **example["uninitialised"]}.items()) or "all inputs 0"
    first = example["wrong_outputs"][0]
    more = example["wrong_count"] - 1
    return (
        f"with {given} and every other input 0: rank {first['rank']}'s {first['name']} is {first['got']}, "
        f"the {schedule.collective} defines {first['expected']}" + (f" (and {more} more wrong cells)" if more > 0 else "")
    )


def violations(schedule: Schedule, outcome: Outcome) -> list[Violation]:
    """The report entries for a bounded proof that did not hold."""
    if outcome.ok:
        return []
    example = outcome.counterexample
    wrong = example.get("wrong_outputs") or [{}]
    first = wrong[0]
    return [
        Violation(
            "postcondition",
            f"bounded proof ({outcome.status}): {outcome.message}",
            dst=first.get("rank"),
            details={"proof": "schedule", "result": outcome.status, "scope": f"N={schedule.ranks}", "counterexample": example},
        )
    ]


def declared_owner(schedule: Schedule, owner) -> Schedule:
    """The schedule with the ownership ``owner(r, n)`` declared (for
    reduce-scatters such as ring-seed's, whose rank r ends with chunk r + 1)."""
    n = schedule.ranks
    return dataclasses.replace(schedule, owner=tuple((int(owner(rank, n)),) for rank in range(n)))
