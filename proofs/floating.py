"""What floating point really guarantees for a ring all-reduce.

Z3's floating-point theory models float16 (FPSort(5, 11)) and bfloat16
(FPSort(8, 8)) bit for bit, with IEEE round-to-nearest-even additions. The
ring runs through THE interpreter over :class:`~collspec.models.algebras.Symbols`
whose leaves are Z3 floats and whose combine is ``fpAdd(RNE, a, b)``; the
rank-order sum is the spec's own ``all_reduce`` on the same leaves (through
:func:`collspec.models.layout.expected_outputs`), whose ``+`` on Z3 floats is
``fpAdd`` with Z3's default rounding mode, checked to be RNE.

Three facts, each machine-checked:

- :func:`ring_differs`: for N = 3 there are inputs where the ring's result
  is not the rank-order sum, so "bit-for-bit the same as direct exchange"
  holds only in exact arithmetic. The inputs Z3 finds are re-run with numpy
  (:class:`~collspec.models.algebras.Numbers` over the same schedule, and
  ``collspec.spec.all_reduce``); both must agree with Z3 bit for bit.
- :func:`two_ranks_agree`: for N = 2 the ring equals the rank-order sum for
  every input that is not NaN (a + b = b + a in IEEE arithmetic).
- :func:`identical_bits`: for every input (NaN and infinities included,
  NaN payloads aside), every rank ends with the same bits (bounded N; for
  all N see :func:`collspec.proofs.ring.identical_bits`).

:func:`bound_attainment` measures how close a ring's worst rounding error
comes to the bound of :mod:`collspec.spec.accuracy` (on inputs built so that
every addition rounds the same way), which shows that the bound is not
vacuous.

>>> ring_differs("float16", 3).status
'proved'
"""

from __future__ import annotations

import time

import numpy as np
import z3

from ..models.algebras import Numbers, Symbols
from ..models.generators import generate
from ..models.interpreter import run
from ..models.layout import expected_outputs
from ..models.schedule import Schedule
from ..spec.accuracy import error_bound, exact_reduce
from ..spec.collectives import all_reduce
from ..spec.dtypes import as_dtype, unit_roundoff
from .solver import COUNTEREXAMPLE, FAILED, PROVED, RESOURCE_LIMIT, UNKNOWN, Outcome, Query, decide, new_solver, why_unknown

#: dtype name -> (exponent bits, significand bits incl. the implicit one)
FORMATS = {"float16": (5, 11), "bfloat16": (8, 8)}


def fp_sort(dtype: str) -> z3.FPSortRef:
    return z3.FPSort(*FORMATS[dtype])


def fp_symbols(dtype: str) -> Symbols:
    """Inputs ``x[r,k]`` and uninitialised cells as Z3 floats; reduce is fpAdd(RNE)."""
    sort = fp_sort(dtype)
    return Symbols(
        lambda rank, k: z3.FP(f"x[{rank},{k}]", sort),
        lambda rank, cell: z3.FP(f"uninit[{rank},{cell}]", sort),
        lambda a, b: z3.fpAdd(z3.RNE(), a, b),
    )


def ring_and_rank_order(schedule: Schedule, dtype: str):
    """(leaves, computed final state, spec's outputs) over Z3 floats."""
    if not z3.get_default_rounding_mode().eq(z3.RNE()):
        raise RuntimeError("Z3's default rounding mode is not RNE; the spec's '+' on Z3 floats would not be IEEE's default")
    algebra = fp_symbols(dtype)
    layout = schedule.layout
    leaves = [algebra.leaves(rank, layout.inputs[rank]) for rank in range(schedule.ranks)]
    final = run(schedule, algebra).state
    return leaves, final, expected_outputs(schedule, leaves)


def to_numpy(model: z3.ModelRef, term: z3.FPRef, dtype: str):
    """The value of a float term in a model, as a numpy scalar of ``dtype``, bit for bit."""
    bits = model.eval(z3.fpToIEEEBV(term), model_completion=True).as_long()
    return np.array([bits], dtype=np.uint16).view(as_dtype(dtype))[0]


def ring_differs(dtype: str, n: int = 3, variant: str = "ring", rlimit: int | None = None) -> Outcome:
    """Find inputs where the ring all-reduce's result differs from the
    rank-order sum, and confirm them with numpy.

    Chunk by chunk, Z3 first looks for readable inputs (only that chunk
    non-zero, positive integers up to 2**(p+1) for p significand bits),
    then for any finite inputs. The ring's chunks start at different ranks, so some
    chunks add in rank order up to commutativity and can never differ.
    When no check finds such inputs and one ended ``unknown``, the result
    is ``unknown`` (why, in the message), never "no such inputs".
    """
    started = time.perf_counter()
    schedule = generate(variant, "allreduce", n)
    leaves, final, expected = ring_and_rank_order(schedule, dtype)
    name = f"{dtype}: some inputs give a ring result other than the rank-order sum ({variant}, N={n})"
    limits = [float(2 ** (FORMATS[dtype][1] + 1)), None]
    ran, undecided = [], []
    for limit in limits:
        for chunk in range(schedule.chunks):
            got, want = final[0, chunk], expected[0][chunk]
            solver = new_solver(rlimit=rlimit)
            solver.add([z3.And(z3.Not(z3.fpIsNaN(v)), z3.Not(z3.fpIsInf(v))) for v in (got, want)])
            for row in leaves:
                for k, v in enumerate(row):
                    solver.add(z3.Not(z3.fpIsNaN(v)), z3.Not(z3.fpIsInf(v)))
                    if limit is not None:
                        readable = z3.And(z3.fpIsPositive(v), z3.fpRoundToIntegral(z3.RNE(), v) == v, z3.fpLEQ(v, z3.FPVal(limit, v.sort())))
                        solver.add(z3.fpIsZero(v) if k != chunk else readable)
            solver.add(got != want)
            answer = solver.check()
            label = f"chunk {chunk}, " + (f"integers <= {limit:g}" if limit is not None else "any finite inputs")
            ran.append((label, str(answer), round(time.perf_counter() - started, 4)))
            if answer == z3.unknown:
                undecided.append(f"{label}: {why_unknown(solver)}")
            if answer != z3.sat:
                continue
            model = solver.model()
            values = [np.array([to_numpy(model, v, dtype) for v in row]) for row in leaves]
            ring_value, spec_value = to_numpy(model, got, dtype), to_numpy(model, want, dtype)
            example = {
                "dtype": dtype,
                "N": n,
                "chunk": chunk,
                "inputs": [[float(v) for v in row] for row in values],
                "ring": float(ring_value),
                "rank_order": float(spec_value),
            }
            problem = numpy_recheck(schedule, values, chunk, ring_value, spec_value)
            if problem:
                return Outcome(FAILED, f"{name}: Z3 and numpy disagree: {problem}", example, ran, "Z3 and numpy disagree")
            summands = ", ".join(f"{row[chunk]:g}" for row in example["inputs"])
            return Outcome(PROVED, f"chunk {chunk} = {summands} by rank: ring {float(ring_value):g}, rank order {float(spec_value):g} (numpy agrees)", example, ran)
    if undecided:
        why = RESOURCE_LIMIT if all(u.endswith(RESOURCE_LIMIT) for u in undecided) else "Z3 gave up"
        return Outcome(UNKNOWN, f"{name}: unknown ({why}): no such inputs found, {len(undecided)} checks undecided ({undecided[0]})", {"dtype": dtype, "N": n}, ran, why)
    return Outcome(FAILED, f"{name}: Z3 proved there are no such inputs", {"dtype": dtype, "N": n}, ran, "no such inputs exist")


def numpy_recheck(schedule: Schedule, values: list[np.ndarray], chunk: int, ring_value, rank_order_value) -> str:
    """Run the inputs through the interpreter over numbers and the spec;
    return what disagrees with Z3 ('' when numpy confirms it)."""
    ring = run(schedule, Numbers(values)).state
    spec = all_reduce(values)
    same = lambda a, b: np.asarray(a).tobytes() == np.asarray(b).tobytes()  # noqa: E731
    if not same(ring[0, chunk], ring_value):
        return f"numpy's ring gives {ring[0, chunk]!r}, Z3's {ring_value!r}"
    if not same(spec[0][chunk], rank_order_value):
        return f"numpy's rank-order sum is {spec[0][chunk]!r}, Z3's {rank_order_value!r}"
    if same(ring[0, chunk], spec[0][chunk]):
        return "numpy gives the same bits for both"
    if any(not same(ring[r], ring[0]) for r in range(schedule.ranks)):
        return "numpy's ranks disagree"
    return ""


def two_ranks_agree(dtype: str, rlimit: int | None = None) -> Outcome:
    """For N = 2 the ring's result is the rank-order sum, for all inputs
    that are not NaN: each chunk is one addition, and IEEE addition
    commutes. Premises: no input is NaN (Z3 has a single NaN; payloads are
    not modelled). Z3's simplifier already orders the operands of each sum
    the same way, so the claim simplifies to True: the result is
    ``trivial`` (true by the definition of IEEE addition), not a proof."""
    schedule = generate("ring", "allreduce", 2)
    leaves, final, expected = ring_and_rank_order(schedule, dtype)
    claim = z3.And([final[rank, cell] == expected[rank][cell] for rank in range(2) for cell in range(schedule.chunks)])
    premises = [z3.Not(z3.fpIsNaN(v)) for row in leaves for v in row]
    return decide(Query(f"{dtype}: N = 2 ring equals the rank-order sum", premises, claim), rlimit)


def identical_bits(dtype: str, schedule: Schedule, rlimit: int | None = None) -> Outcome:
    """Every rank ends with the same bits, for every input, when
    ``schedule`` (an all-reduce) runs over ``dtype``. A counterexample is
    re-run with numpy, which must show the same ranks disagreeing."""
    started = time.perf_counter()
    leaves, final, _ = ring_and_rank_order(schedule, dtype)
    outputs = schedule.layout.outputs
    name = f"{dtype}: every rank of {schedule.label()} holds the same bits"
    pairs = [(rank, k) for rank in range(1, schedule.ranks) for k in range(len(outputs[rank]))]
    solver = new_solver(rlimit=rlimit)
    solver.add(z3.Or([final[rank, int(outputs[rank][k])] != final[0, int(outputs[0][k])] for rank, k in pairs] or [z3.BoolVal(False)]))
    answer = solver.check()
    seconds = round(time.perf_counter() - started, 4)
    if answer == z3.unsat:
        return Outcome(PROVED, f"{len(pairs)} cells", queries=[(name, PROVED, seconds)])
    if answer == z3.unknown:
        why = why_unknown(solver)
        return Outcome(UNKNOWN, f"{name}: unknown ({why}); not proved", queries=[(name, UNKNOWN, seconds)], reason=why)
    model = solver.model()
    values = [np.array([to_numpy(model, v, dtype) for v in row]) for row in leaves]
    ring = run(schedule, Numbers(values)).state
    rows = [ring[rank, outputs[rank]] for rank in range(schedule.ranks)]
    differ = [rank for rank in range(schedule.ranks) if rows[rank].tobytes() != rows[0].tobytes()]
    example = {"dtype": dtype, "N": schedule.ranks, "inputs": [row.tolist() for row in values], "results": [row.tolist() for row in rows]}
    confirmed = f"numpy confirms: rank 0 holds {rows[0].tolist()}, rank {differ[0]} holds {rows[differ[0]].tolist()}" if differ else "numpy does not confirm it"
    return Outcome(FAILED, f"{name}: fails for inputs {example['inputs']}; {confirmed}", example, [(name, FAILED, seconds)], COUNTEREXAMPLE)


# -- how tight the error bound is ----------------------------------------------------


def adversarial_inputs(dtype: str, n: int) -> list[np.ndarray]:
    """Inputs on which a ring's additions all round the same way.

    Every chunk has N elements; element j holds 1 at rank j and
    1.125 u elsewhere (u the unit roundoff), so whichever rank a chunk's sum
    starts at, one element adds the small values onto 1 first. Each such
    addition lies just above half a unit in the last place and rounds up,
    so the rounding errors add up instead of cancelling.
    """
    u = unit_roundoff(dtype)
    wide = np.full((n, n, n), 1.125 * u)  # [rank, chunk, element]
    for j in range(n):
        wide[j, :, j] = 1.0
    return [wide[rank].astype(as_dtype(dtype)) for rank in range(n)]


def bound_attainment(dtype: str, n: int, values: list[np.ndarray] | None = None, variant: str = "ring") -> float:
    """The largest |ring - exact| / bound over all output cells of a ring
    all-reduce on ``values`` (default: :func:`adversarial_inputs`), where
    the bound is :func:`collspec.spec.error_bound`. 1 would mean the bound
    is attained; a small ratio on the worst inputs would mean it is vacuous."""
    values = adversarial_inputs(dtype, n) if values is None else values
    final = run(generate(variant, "allreduce", n), Numbers(values)).state
    exact, bound = exact_reduce(values), error_bound(values)
    worst = 0.0
    for rank in range(n):
        error = np.abs(final[rank].astype(np.float64) - exact)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bound > 0, error / bound, np.where(error > 0, np.inf, 0.0))
        worst = max(worst, float(ratio.max()))
    return worst
