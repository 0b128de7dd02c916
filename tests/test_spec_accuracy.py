"""The exact reference and the error bound of design.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from collspec import spec
from collspec.spec.dtypes import bfloat16


def test_gamma_matches_its_definition_and_runs_out():
    u = 2.0**-11
    assert spec.gamma(3, u) == 3 * u / (1 - 3 * u)
    assert spec.gamma(0, u) == 0.0
    assert spec.gamma(256, 2.0**-8) == math.inf  # bfloat16 at 257 ranks: no guarantee left


def test_bound_is_gamma_times_sum_of_magnitudes():
    x = [np.array([0.1], np.float32), np.array([-0.2], np.float32), np.array([0.3], np.float32)]
    magnitude = sum(abs(float(r[0])) for r in x)
    bound = float(spec.error_bound(x, "sum")[0])
    core = spec.gamma(2, 2.0**-24) * magnitude
    assert core <= bound <= core * (1 + 1e-6)


def test_values_on_a_common_grid_must_be_exact():
    x = [np.array([3.0, 2047.0, 0.75, 0.0], np.float16), np.array([-5.0, 3.0, 1024.5, 0.0], np.float16)]
    bound = spec.error_bound(x, "sum")
    # |3| + |-5| <= 2**11: exact. 2047 + 3 > 2**11: may round. 0.75 and 1024.5
    # lie on the 2**-2 grid, but 1025.25 > 2**(11-2): may round. 0 + 0: exact.
    assert bound.tolist()[0] == 0.0 and bound[1] > 0.0 and bound[2] > 0.0 and bound[3] == 0.0
    halves = [np.array([1.5], np.float32)] * 4
    assert spec.error_bound(halves, "sum")[0] == 0.0
    assert spec.error_bound([np.array([3.0]), np.array([-6.0])], "prod")[0] == 0.0


def test_a_missing_rank_is_outside_the_bound_and_named():
    x = [np.full(4, 1.5, np.float32) for _ in range(4)]
    got = spec.all_reduce(x)[0]
    got[2] -= 1.5  # one rank's contribution missing at element 2
    acc = spec.check_reduction(got, x)
    assert not acc.ok
    assert acc.index == (2,) and acc.expected == 6.0 and acc.got == 4.5 and acc.bound == 0.0


def test_integers_compare_exactly():
    x = [np.array([1, 2], np.int32), np.array([3, 4], np.int32)]
    assert spec.check_reduction(np.array([4, 6], np.int32), x).ok
    acc = spec.check_reduction(np.array([4, 7], np.int32), x)
    assert (acc.ok, acc.index, acc.expected, acc.got) == (False, (1,), 6.0, 7.0)


def test_float64_reference_is_exactly_rounded():
    x = [np.array([1e16]), np.array([1.0]), np.array([-1e16])]
    assert spec.exact_reduce(x)[0] == 1.0
    assert spec.all_reduce(x)[0][0] == 0.0  # rank order loses the 1.0 ...
    assert spec.check_reduction(spec.all_reduce(x)[0], x).ok  # ... which the bound allows


def test_overflow_and_nan_must_match_in_kind():
    big = [np.array([60000.0], np.float16)] * 2
    assert spec.check_reduction(np.array([np.inf], np.float16), big).ok
    assert not spec.check_reduction(np.array([-np.inf], np.float16), big).ok
    nan = [np.array([np.nan], np.float32), np.array([1.0], np.float32)]
    assert spec.check_reduction(np.array([np.nan], np.float32), nan).ok
    assert not spec.check_reduction(np.array([1.0], np.float32), nan).ok


@pytest.mark.parametrize("dtype", [np.float16, bfloat16, np.float32])
def test_avg_bound_admits_sum_then_divide_and_premultiply(dtype):
    rng = np.random.default_rng(1)
    n = 7
    x = [rng.uniform(-1, 1, 64).astype(np.float32).astype(dtype) for _ in range(n)]
    summed = spec.all_reduce(x, "avg")[0]
    inv = np.asarray(1.0 / n, dtype=dtype)
    premultiplied = x[0] * inv
    for r in x[1:]:
        premultiplied = (premultiplied + r * inv).astype(dtype)
    assert spec.check_reduction(summed, x, "avg").ok
    assert spec.check_reduction(premultiplied.astype(dtype), x, "avg").ok


def test_check_reduction_on_a_block():
    x = [np.array([1.0, 2.0, 3.0, 4.0])] * 2
    assert spec.check_reduction(np.array([6.0, 8.0]), x, rows=slice(2, 4)).ok


def test_an_average_that_underflows_to_zero_is_correct_and_a_wrong_one_is_not():
    """float16 avg of 0 and the smallest subnormal (2**-24): the exact
    2**-25 rounds to 0 (ties to even). A relative bound alone calls that
    wrong; the underflow term (module text) accepts it, and still refuses
    a result one subnormal further off."""
    x = [np.array([0.0], np.float16), np.array([2.0**-24], np.float16)]
    got = spec.all_reduce(x, "avg")[0]
    assert float(got[0]) == 0.0
    assert spec.check_reduction(got, x, "avg").ok
    assert not spec.check_reduction(np.array([2.0**-22], np.float16), x, "avg").ok


def test_a_product_whose_partial_products_underflow_is_not_exact():
    """2**-20 * 2**-20 in float16 underflows to 0: odd parts of 1 do not make
    the product exact there (its bound is no longer 0), while 2**-5 * 2**-5
    stays exact (bound 0)."""
    tiny = [np.array([2.0**-20], np.float16)] * 2
    got = spec.all_reduce(tiny, "prod")[0]
    assert float(got[0]) == 0.0 and float(spec.error_bound(tiny, "prod")[0]) > 0
    assert spec.check_reduction(got, tiny, "prod").ok
    small = [np.array([2.0**-5], np.float16)] * 2
    assert float(spec.error_bound(small, "prod")[0]) == 0.0
