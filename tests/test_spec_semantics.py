"""Concrete meanings the spec fixes: wrap-around, integer avg, sizes, purity."""

from __future__ import annotations

import numpy as np
import pytest

from collspec import spec
from collspec.spec.dtypes import DTYPES, bfloat16


def test_integer_sum_wraps_around():
    x = [np.array([100, 127], np.int8), np.array([100, 1], np.int8)]
    assert spec.all_reduce(x)[0].tolist() == [-56, -128]
    assert spec.all_reduce([np.array([200], np.uint8), np.array([100], np.uint8)])[0].tolist() == [44]


def test_integer_avg_is_the_exact_mean_rounded_toward_zero():
    # The wrapped int8 sum would be -56; the exact mean of 100 and 100 is 100.
    x = [np.array([100, -7, 7, -128], np.int8), np.array([100, 0, 0, -128], np.int8)]
    assert spec.all_reduce(x, "avg")[0].tolist() == [100, -3, 3, -128]
    big = [np.array([2**62], np.int64)] * 3
    assert spec.all_reduce(big, "avg")[0].tolist() == [2**62]


def test_float_avg_divides_once():
    x = [np.array([1.0], np.float16)] * 3
    assert spec.all_reduce(x, "avg")[0].tolist() == [1.0]


@pytest.mark.parametrize("op, expected", [("sum", 6), ("prod", 6), ("min", 1), ("max", 3), ("avg", 2)])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_every_op_on_every_dtype(dtype, op, expected):
    x = [np.array([v], DTYPES[dtype]) for v in (1, 2, 3)]
    out = spec.all_reduce(x, op)
    assert out[0].dtype == DTYPES[dtype]
    assert float(out[0][0]) == expected


def test_bfloat16_rounds_after_every_addition():
    # 256 + 1 is not representable in bfloat16 (8 significand bits): rounds to 256.
    x = [np.array([256.0], bfloat16), np.array([1.0], bfloat16), np.array([1.0], bfloat16)]
    assert float(spec.all_reduce(x)[0][0]) == 256.0
    assert float(spec.exact_reduce(x)[0]) == 258.0
    assert spec.check_reduction(spec.all_reduce(x)[0], x).ok


@pytest.mark.parametrize("count", [0, 1, 7])
def test_sizes_zero_one_and_prime(count):
    x = [np.arange(count, dtype=np.int32) * (r + 1) for r in range(3)]
    assert spec.all_reduce(x)[0].tolist() == (np.arange(count) * 6).tolist()
    assert [len(o) for o in spec.all_gather(x)] == [3 * count] * 3


def test_reduce_scatter_v_allows_zero_counts():
    x = [np.array([1, 2, 3]), np.array([4, 5, 6])]
    out = spec.reduce_scatter_v(x, [0, 3])
    assert [o.tolist() for o in out] == [[], [5, 7, 9]]


def test_results_never_alias_inputs_or_each_other():
    x = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    before = [r.copy() for r in x]
    out = spec.broadcast(x, 0)
    out[0][0] = 99
    assert out[1][0] == 1.0 and x[0][0] == 1.0
    out = spec.all_reduce(x)
    out[0][0] = 99
    assert out[1][0] == 4.0
    assert all(np.array_equal(a, b) for a, b in zip(x, before))


def test_single_rank_is_the_identity():
    x = [np.array([5, 6], np.int64)]
    assert spec.all_reduce(x)[0].tolist() == [5, 6]
    assert spec.reduce_scatter(x)[0].tolist() == [5, 6]
    assert spec.all_to_all(x)[0].tolist() == [5, 6]


def test_min_and_max_propagate_nan():
    x = [np.array([np.nan, 1.0]), np.array([0.0, 2.0])]
    assert np.isnan(spec.all_reduce(x, "min")[0][0])
    assert np.isnan(spec.all_reduce(x, "max")[0][0])


def test_contributions_detect_a_duplicate_a_set_would_miss():
    a, b = spec.Contributions.leaf(0, 0), spec.Contributions.leaf(1, 0)
    assert a + b + b != spec.complete(2, 0)
    assert set((a + b + b).ranks()) == set(spec.complete(2, 0).ranks())
    assert (a + b + b).compare(spec.complete(2, 0)) == ([], [(1, 0, 1)])
    assert str(a + b + b) == "0·1·1"
    assert str(spec.Contributions.leaf(0, 1) + b) == "0[1]·1[0]"
    assert str(spec.Contributions()) == "∅"
