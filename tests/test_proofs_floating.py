"""Floating point: Z3's counterexamples, numpy's re-check, the worked
examples in the spec, identical bits, and the error bound (Hypothesis)."""

from __future__ import annotations

import doctest
import functools

import numpy as np
import pytest
import z3
from hypothesis import example, given, target
from hypothesis import strategies as st

import collspec.spec.floating_point as fp_doc
from collspec.models.algebras import Numbers
from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.interpreter import run
from collspec.proofs import floating
from collspec.proofs.solver import TRIVIAL, FAILED, PROVED
from collspec.spec import all_reduce, check_reduction
from collspec.spec.dtypes import as_dtype

DTYPES = ("float16", "bfloat16")


@pytest.mark.parametrize("dtype", DTYPES)
def test_z3_finds_a_ring_result_other_than_the_rank_order_sum_and_numpy_agrees(dtype):
    outcome = floating.ring_differs(dtype, 3)
    assert outcome.status == PROVED, outcome.message
    example = outcome.counterexample
    assert example["ring"] != example["rank_order"]
    values = [np.array(row, dtype=as_dtype(dtype)) for row in example["inputs"]]
    ring = run(generate("ring", "allreduce", 3), Numbers(values)).state
    spec = all_reduce(values)[0]
    chunk = example["chunk"]
    assert float(ring[0, chunk]) == example["ring"] and float(spec[chunk]) == example["rank_order"]
    assert check_reduction(ring[0], values).ok and check_reduction(spec, values).ok  # both correct


def test_z3_formats_are_the_spec_dtypes():
    from collspec.spec.dtypes import precision_bits

    for dtype, (_, significand) in floating.FORMATS.items():
        assert significand == precision_bits(dtype)
        assert floating.fp_sort(dtype).sbits() == significand


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_ranks_never_differ(dtype):
    # Z3's simplifier already rewrites both sums to one term (IEEE addition
    # commutes), so the query is true by definition and not counted as a proof
    assert floating.two_ranks_agree(dtype).status == TRIVIAL
    assert floating.ring_differs(dtype, 2).status == FAILED  # so ring_differs does not find what is not there


def _eval(term, dtype) -> float:
    """The value of a closed Z3 float term."""
    solver = z3.Solver()
    solver.check()
    return float(floating.to_numpy(solver.model(), z3.simplify(term), dtype))


@pytest.mark.parametrize(
    "dtype, chunk0, ring_value, rank_order",
    [("float16", (482, 333, 2226), 3042.0, 3040.0), ("bfloat16", (512, 114, 117), 744.0, 740.0)],
)
def test_the_spec_documentation_examples_are_z3_counterexamples(dtype, chunk0, ring_value, rank_order):
    """The numbers printed in collspec.spec.floating_point, substituted into
    the Z3 terms of the ring and of the spec: Z3's IEEE semantics give the
    same results as numpy in the documentation."""
    assert f"{chunk0[0]}, {chunk0[1]}" in fp_doc.__doc__ and f"{ring_value:g}" in fp_doc.__doc__
    schedule = generate("ring", "allreduce", 3)
    leaves, final, expected = floating.ring_and_rank_order(schedule, dtype)
    sort = floating.fp_sort(dtype)
    values = {(r, k): (chunk0[r] if k == 0 else 0) for r in range(3) for k in range(3)}
    pairs = [(leaves[r][k], z3.FPVal(v, sort)) for (r, k), v in values.items()]
    got = _eval(z3.substitute(final[0, 0], *pairs), dtype)
    want = _eval(z3.substitute(expected[0][0], *pairs), dtype)
    assert (got, want) == (ring_value, rank_order)


def test_the_spec_documentation_examples_run():
    result = doctest.testmod(fp_doc, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 10


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_rank_of_a_ring_has_identical_bits(dtype):
    for variant in ("ring", "ring-seed"):
        for n in (2, 3, 5):
            assert floating.identical_bits(dtype, generate(variant, "allreduce", n)).ok


@pytest.mark.parametrize("dtype", DTYPES)
def test_direct_exchange_can_leave_ranks_with_different_bits(dtype):
    """The identical-bits proof is not vacuous: on direct exchange it finds
    inputs where ranks differ, numpy confirms them, and the checker's
    reduction-tree fingerprint warns about the same schedule."""
    schedule = generate("direct", "allreduce", 3)
    outcome = floating.identical_bits(dtype, schedule)
    assert outcome.status == FAILED and "numpy confirms" in outcome.message
    results = outcome.counterexample["results"]
    assert any(np.asarray(row).tobytes() != np.asarray(results[0]).tobytes() for row in results)
    assert "ranks-disagree" in [v.kind for v in check(schedule).violations]


# -- the error bound, with Hypothesis ------------------------------------------------

#: the largest magnitude drawn, so that no sum of 64 values overflows
LIMITS = {"float16": 1000.0, "bfloat16": 1e30, "float32": 1e30}


@functools.lru_cache(maxsize=None)
def ring(n: int):
    return generate("ring", "allreduce", n)


@st.composite
def ring_inputs(draw):
    """Up to 64 x 64 x 3 values: Hypothesis draws the shape, the sign mix,
    the spread of magnitudes and a seed; numpy draws the values from it
    (drawing 12 000 floats one by one would exhaust Hypothesis' budget)."""
    dtype = draw(st.sampled_from(sorted(LIMITS)))
    n = draw(st.integers(2, 64))
    width = draw(st.integers(1, 3))
    low = draw(st.sampled_from([-1.0, 0.0]))  # mixed signs (cancellation) or one sign
    spread = draw(st.integers(0, 20))  # magnitudes over 2**-spread .. 1 of the limit
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = [rng.uniform(low, 1.0, size=(n, width)) * 2.0 ** -rng.integers(0, spread + 1, size=(n, width)) * LIMITS[dtype] for _ in range(n)]
    return dtype, n, [v.astype(np.float32).astype(as_dtype(dtype)) for v in values]


def _largest(dtype: str) -> tuple:
    """N = 64 with positive values near the limit: the longest sums, every one rounding."""
    rng = np.random.default_rng(64)
    values = [rng.uniform(0.5, 1.0, size=(64, 2)) * LIMITS[dtype] for _ in range(64)]
    return dtype, 64, [v.astype(np.float32).astype(as_dtype(dtype)) for v in values]


@given(ring_inputs())
@example(_largest("float16"))
@example(_largest("bfloat16"))
@example(_largest("float32"))
def test_ring_results_meet_the_error_bound(case):
    """design.md: |computed - exact| <= gamma(N-1) * sum |x_i| for every order,
    the ring's included; and every rank holds the same bits."""
    dtype, n, values = case
    final = run(ring(n), Numbers(values)).state
    for rank in range(n):
        accuracy = check_reduction(final[rank], values)
        assert accuracy.ok, (dtype, n, rank, accuracy)
        assert final[rank].tobytes() == final[0].tobytes()
    target(floating.bound_attainment(dtype, n, values), label=f"error / bound, {dtype}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("n", [2, 8, 64])
def test_the_bound_is_not_vacuous(dtype, n):
    """On inputs built so that every addition rounds the same way, the
    ring's worst error is within a factor 2 of the bound (bench/proofs_fp_bound.py
    prints the ratios; the issue asks for within 64)."""
    ratio = floating.bound_attainment(dtype, n)
    assert 0.5 <= ratio <= 1.0, ratio
