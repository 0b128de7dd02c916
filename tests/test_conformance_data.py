"""Inputs built so that correct results are exact and wrong sums decode."""

from __future__ import annotations

import numpy as np
import pytest

from collspec import spec
from collspec.conformance import data
from collspec.conformance.buffers import all_inputs
from collspec.conformance.cases import Case

WORLDS = [1, 2, 3, 4, 7, 16]


@pytest.mark.parametrize("dtype", list(spec.DTYPES))
@pytest.mark.parametrize("world", WORLDS)
def test_exact_patterns_make_every_order_exact(dtype, world):
    """The spec's own error bound is 0: any correct order returns the same bits."""
    for op in ("sum", "prod", "min", "max"):
        pattern = data.PATTERN_FOR_OP[op]
        rows = [data.ROWS[pattern](dtype, world, r, 257, seed=5) for r in range(world)]
        assert not np.any(spec.error_bound(rows, op)), (op, pattern)
        exact = np.asarray(spec.exact_reduce(rows, op), dtype=np.float64)
        assert np.array_equal(exact, spec.all_reduce(rows, op)[0].astype(np.float64)), (op, pattern)


@pytest.mark.parametrize("dtype", list(spec.DTYPES))
@pytest.mark.parametrize("world", WORLDS)
def test_tally_sums_decode_into_missing_and_doubled_ranks(dtype, world):
    rows = [data.tally_row(dtype, world, r, 40, seed=9) for r in range(world)]
    width = data.tally_width(dtype, world)
    total = spec.all_reduce(rows, "sum")[0]
    times = data.tally_multiplicity(total, 0, dtype, world, 9, 40)
    assert ((times == 1).sum(axis=1) == width).all() and ((times == -1).sum(axis=1) == world - width).all()
    for victim in range(world):
        present = times[:, victim] == 1  # elements where the victim has a digit
        dropped = spec.all_reduce([r for i, r in enumerate(rows) if i != victim], "sum")[0] if world > 1 else np.zeros_like(total)
        doubled = spec.all_reduce(rows + [rows[victim]], "sum")[0]
        assert (data.tally_multiplicity(dropped, 0, dtype, world, 9, 40)[present, victim] == 0).all()
        assert (data.tally_multiplicity(doubled, 0, dtype, world, 9, 40)[present, victim] == 2).all()


def test_every_rank_gets_a_digit_everywhere_at_four_ranks():
    assert all(data.tally_width(dtype, 4) == 4 for dtype in spec.DTYPES)


def test_a_value_that_is_no_tally_sum_does_not_decode():
    times = data.tally_multiplicity(np.array([0.5, 1e9], np.float32), 0, "float32", 4, 1, 2)
    assert (times == -2).all()


@pytest.mark.parametrize("dtype", list(spec.DTYPES))
def test_the_sentinel_is_no_input_value(dtype):
    sentinel = data.sentinel(dtype).view(f"u{data.sentinel(dtype).itemsize}")
    for pattern, row in data.ROWS.items():
        if pattern == "rounding" and not spec.is_float(dtype):
            continue
        values = row(dtype, 4, 1, 1000, 3)
        assert not (values.view(sentinel.dtype) == sentinel).any(), pattern


def test_inputs_are_a_function_of_the_case_and_seed():
    case = Case("allreduce", "float32", "sum", 50, True, None, "tally")
    again = all_inputs(case, 4)
    assert all(np.array_equal(a, b) for a, b in zip(all_inputs(case, 4), again))
    other = all_inputs(Case("allreduce", "float32", "sum", 50, True, None, "tally", seed=1), 4)
    assert not np.array_equal(again[0], other[0])


def test_origin_values_name_their_rank():
    for dtype in spec.DTYPES:
        values = [data.origin_values(dtype, 4, r, np.arange(30), 0) for r in range(4)]
        assert all(((v.astype(np.int64) - 1) % 4 == r).all() for r, v in enumerate(values)), dtype


def test_guards_keep_64_byte_alignment():
    assert {data.guard(d) * spec.as_dtype(d).itemsize for d in spec.DTYPES} == {64}
