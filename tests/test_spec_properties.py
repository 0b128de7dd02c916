"""Hypothesis properties of the spec, over 1..32 ranks, every dtype and op."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from collspec import spec
from collspec.spec.dtypes import is_float

from strategies import FLOAT_DTYPES, INT_DTYPES, rank_inputs

OPS = st.sampled_from(spec.OPS)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@given(rank_inputs(divisible=True), OPS)
def test_reduce_scatter_then_all_gather_is_all_reduce(case, op):
    x, _ = case
    combined = spec.all_gather(spec.reduce_scatter(x, op))
    direct = spec.all_reduce(x, op)
    assert all(same_bits(a, b) for a, b in zip(combined, direct))


@given(rank_inputs(), OPS, st.data())
def test_all_reduce_is_reduce_then_broadcast(case, op, data):
    x, _ = case
    root = data.draw(st.integers(0, len(x) - 1))
    reduced = spec.reduce(x, root, op)
    relayed = spec.broadcast([reduced[root] if r == root else np.zeros_like(x[r]) for r in range(len(x))], root)
    assert all(same_bits(a, b) for a, b in zip(relayed, spec.all_reduce(x, op)))


@given(rank_inputs())
def test_all_gather_of_slices_reassembles_the_inputs(case):
    x, _ = case
    n = len(x)
    for out in spec.all_gather(x):
        assert len(out) == n * len(x[0])
        for rank in range(n):
            assert same_bits(out[rank * len(x[0]) : (rank + 1) * len(x[0])], x[rank])


@given(rank_inputs(divisible=True))
def test_all_to_all_twice_is_the_identity(case):
    x, _ = case
    assert all(same_bits(a, b) for a, b in zip(spec.all_to_all(spec.all_to_all(x)), x))


@given(rank_inputs(), OPS)
def test_every_rank_holds_identical_bits(case, op):
    x, _ = case
    out = spec.all_reduce(x, op)
    assert all(same_bits(o, out[0]) for o in out)


@given(rank_inputs(dtypes=INT_DTYPES), st.randoms(use_true_random=False))
def test_integer_sum_is_invariant_under_permuting_ranks(case, random):
    x, _ = case
    permuted = list(x)
    random.shuffle(permuted)
    assert same_bits(spec.all_reduce(permuted)[0], spec.all_reduce(x)[0])


@given(rank_inputs(dtypes=FLOAT_DTYPES, integral=True), st.randoms(use_true_random=False))
def test_exact_float_sum_is_invariant_under_permuting_ranks(case, random):
    # Small integers: every partial sum is representable, arithmetic is exact.
    x, _ = case
    permuted = list(x)
    random.shuffle(permuted)
    assert same_bits(spec.all_reduce(permuted)[0], spec.all_reduce(x)[0])


@given(rank_inputs(dtypes=FLOAT_DTYPES), st.randoms(use_true_random=False))
def test_any_rank_order_stays_within_the_error_bound(case, random):
    x, _ = case
    permuted = list(x)
    random.shuffle(permuted)
    got = spec.all_reduce(permuted)[0]
    accuracy = spec.check_reduction(got, x, "sum")
    assert accuracy.ok, accuracy


@given(rank_inputs(), st.just("avg"))
def test_avg_is_sum_over_n_within_the_bound(case, op):
    x, _ = case
    avg = spec.all_reduce(x, op)[0]
    if is_float(x[0].dtype):
        accuracy = spec.check_reduction(avg, x, "avg")
        assert accuracy.ok, accuracy
    else:
        n = len(x)
        sums = [sum(int(r.flat[i]) for r in x) for i in range(x[0].size)]
        toward_zero = [abs(s) // n * (1 if s >= 0 else -1) for s in sums]
        assert [int(v) for v in avg.flat] == toward_zero


@given(rank_inputs(divisible=True, dtypes=INT_DTYPES))
def test_symbolic_all_reduce_holds_every_contribution_once(case):
    x, _ = case
    n, count = len(x), len(x[0])
    out = spec.all_reduce(spec.symbolic_inputs(n, count))
    assert all(out[r][i] == spec.complete(n, i) for r in range(n) for i in range(count))
