"""The conformance checker, fed broken buffers directly (no processes).

Every test builds what a correct backend leaves in every rank's buffers,
breaks one thing the way a buggy backend would, and asserts the exact
violation: kind, ranks and element.
"""

from __future__ import annotations

import numpy as np
import pytest

from collspec import spec
from collspec.conformance.buffers import initial_images, inside, layout_of
from collspec.conformance.cases import Case
from collspec.conformance.checks import judge
from collspec.conformance.collectives import COLLECTIVES, Exact, Reduced
from collspec.conformance.data import guard

WORLD = 4


def correct(case: Case, world: int = WORLD) -> list[dict[str, np.ndarray]]:
    """Every rank's images after a correct call: the spec's results in the output views."""
    inputs = [initial_images(case, world, r) for r in range(world)]
    rows = [images[layout_of(case, world, r).input.storage][inside(layout_of(case, world, r).input, case.dtype)].copy()
            for r, images in enumerate(inputs)]
    expectations = COLLECTIVES[case.collective].expect(case, world, rows)
    for rank, images in enumerate(inputs):
        out = layout_of(case, world, rank).output
        expectation = expectations[rank]
        if isinstance(expectation, Reduced):
            images[out.storage][inside(out, case.dtype)] = expectation.canonical
        elif isinstance(expectation, Exact):
            images[out.storage][inside(out, case.dtype)] = expectation.values
    return inputs


def output(finals, case, rank):
    view = layout_of(case, WORLD, rank).output
    return finals[rank][view.storage][inside(view, case.dtype)]


def kinds(violations):
    return sorted(v.kind for v in violations)


ALL_CASES = [
    Case("allreduce", "bfloat16", "sum", 7, True, None, "tally"),
    Case("allreduce", "int8", "avg", 7, True, None, "spread"),
    Case("allreduce", "float16", "sum", 99, True, None, "rounding"),
    Case("reduce_scatter", "float32", "prod", 9, False, None, "powers"),
    Case("reduce_scatter", "uint8", "max", 9, True, None, "spread"),
    Case("allgather", "int64", None, 10, True, None, "origin"),
    Case("allgather", "float64", None, 10, False, None, "origin"),
    Case("broadcast", "int32", None, 5, True, 2, "origin"),
    Case("reduce", "float16", "min", 5, True, 1, "spread"),
    Case("alltoall", "uint8", None, 8, False, None, "origin"),
    Case("allreduce", "float32", "sum", 0, True, None, "tally"),
]


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_a_correct_backend_passes(case):
    assert judge(case, WORLD, correct(case)) == []


def test_a_dropped_rank_decodes_as_missing_contribution():
    case = Case("allreduce", "int32", "sum", 6, True, None, "tally")
    finals = correct(case)
    rows = [initial_images(case, WORLD, r)["buffer"][inside(layout_of(case, WORLD, r).input, case.dtype)] for r in range(WORLD)]
    for rank in range(WORLD):
        output(finals, case, rank)[3] -= rows[2][3]
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "missing-contribution"
    assert violation.details["contributors"] == [2]
    assert violation.details["element"] == 3 and violation.details["elements"] == 1
    assert violation.details["ranks"] == [0, 1, 2, 3]


def test_a_doubled_rank_decodes_as_duplicate_contribution_in_every_dtype_that_fits():
    for dtype in spec.DTYPES:
        case = Case("reduce_scatter", dtype, "sum", 8, False, None, "tally")
        finals = correct(case)
        row = initial_images(case, WORLD, 1)["input"][inside(layout_of(case, WORLD, 1).input, dtype)]
        output(finals, case, 3)[1] += row[7]  # rank 3 owns rows 6..7: element 1 is row 7
        (violation,) = judge(case, WORLD, finals)
        assert (violation.kind, violation.details["contributors"], violation.details["ranks"], violation.details["element"]) == (
            "duplicate-contribution", [1], [3], 1), dtype


def test_a_misplaced_reduce_scatter_block_is_a_postcondition_naming_the_block():
    case = Case("reduce_scatter", "float32", "sum", 8, False, None, "tally")
    finals = correct(case)
    output(finals, case, 0)[:] = output(finals, case, 2)
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "postcondition"
    assert violation.details["ranks"] == [0] and violation.details["holds_block"] == 2


def test_swapped_all_gather_blocks_are_named():
    case = Case("allgather", "int8", None, 8, False, None, "origin")
    finals = correct(case)
    out = output(finals, case, 1)
    out[0:2], out[2:4] = out[2:4].copy(), out[0:2].copy()
    found = judge(case, WORLD, finals)
    assert kinds(found) == ["postcondition", "postcondition"]
    assert {(v.details["block"], v.details["holds_block"]) for v in found} == {(0, 1), (1, 0)}
    assert all(v.details["ranks"] == [1] for v in found)


def test_an_unwritten_output_element_still_holds_the_sentinel():
    case = Case("alltoall", "float32", None, 8, False, None, "origin")
    finals = correct(case)
    output(finals, case, 3)[5] = np.nan
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "postcondition" and violation.details["region"] == "output"
    assert violation.details["element"] == 5 and violation.details["ranks"] == [3]


def test_writing_past_the_output_hits_the_guard():
    case = Case("reduce_scatter", "int32", "sum", 8, False, None, "tally")
    finals = correct(case)
    g = guard("int32")
    finals[2]["output"][g + 2] = 7  # the output has 2 elements: this is the first after it
    (violation,) = judge(case, WORLD, finals)
    assert (violation.kind, violation.details["region"], violation.details["ranks"]) == ("postcondition", "guard-after", [2])


def test_an_out_of_place_input_must_not_change():
    case = Case("allgather", "float64", None, 8, False, None, "origin")
    finals = correct(case)
    finals[0]["input"][guard("float64") + 1] = 0.0
    (violation,) = judge(case, WORLD, finals)
    assert (violation.kind, violation.details["region"], violation.details["element"]) == ("postcondition", "input", 1)


def test_in_place_reduce_scatter_must_leave_the_rest_of_the_input():
    case = Case("reduce_scatter", "int32", "sum", 8, True, None, "tally")
    finals = correct(case)
    finals[1]["input"][guard("int32") + 7] += 1  # rank 1 owns rows 2..3; row 7 is rank 3's
    (violation,) = judge(case, WORLD, finals)
    assert (violation.kind, violation.details["region"], violation.details["element"], violation.details["ranks"]) == (
        "postcondition", "input", 7, [1])


def test_a_touched_non_root_buffer_of_reduce_is_a_postcondition():
    case = Case("reduce", "float32", "sum", 5, True, 0, "tally")
    finals = correct(case)
    output(finals, case, 3)[4] = 1.5
    (violation,) = judge(case, WORLD, finals)
    assert (violation.kind, violation.details["region"], violation.details["element"], violation.details["ranks"]) == (
        "postcondition", "non-root", 4, [3])


def test_a_wrong_product_is_a_wrong_value_with_the_bound():
    case = Case("allreduce", "float32", "prod", 5, True, None, "powers")
    finals = correct(case)
    for rank in range(WORLD):
        output(finals, case, rank)[2] *= 2
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "wrong-value"
    assert violation.details["element"] == 2 and violation.details["bound"] == 0.0
    assert violation.details["got"] == 2 * violation.details["expected"]


def test_float_sums_within_the_bound_pass_but_ranks_must_agree():
    case = Case("allreduce", "float16", "sum", 99, True, None, "rounding")
    finals = correct(case)
    got = output(finals, case, 2)
    got[10] = np.nextafter(got[10], np.float16(np.inf))  # one ulp: inside gamma(3) * sum|x|
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "ranks-disagree"
    assert violation.details["element"] == 10 and violation.details["groups"] == [[0, 1, 3], [2]]


def test_a_float_sum_off_by_more_than_the_bound_is_a_wrong_value():
    case = Case("allreduce", "float32", "sum", 99, True, None, "rounding")
    finals = correct(case)
    for rank in range(WORLD):
        output(finals, case, rank)[42] += 0.01
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "wrong-value" and violation.details["element"] == 42
    assert 0 < violation.details["bound"] < violation.details["error"]


@pytest.mark.parametrize("divide", ["wrapped sum, floor", "exact sum, floor"])
def test_integer_avg_is_the_exact_mean_rounded_toward_zero(divide):
    case = Case("allreduce", "int8", "avg", 64, True, None, "spread")
    finals = correct(case)
    rows = [initial_images(case, WORLD, r)["buffer"][inside(layout_of(case, WORLD, r).input, "int8")] for r in range(WORLD)]
    with np.errstate(over="ignore"):
        total = sum(r.astype(np.int8) for r in rows) if divide.startswith("wrapped") else sum(r.astype(np.int64) for r in rows)
    other = (total // WORLD).astype(np.int8)  # what a library that divides differently returns
    differs = np.flatnonzero(other != output(finals, case, 0))
    assert differs.size  # the inputs are built so that these libraries disagree with the spec
    for rank in range(WORLD):
        output(finals, case, rank)[:] = other
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "wrong-value" and violation.details["element"] == differs[0]
