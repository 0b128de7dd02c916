"""The one interpreter, over numbers, contributor sets and fingerprints."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collspec import spec
from collspec.models.algebras import Fingerprints, Numbers, contributions
from collspec.models.generators import ALGORITHMS, generate
from collspec.models.interpreter import run
from collspec.models.schedule import Schedule, Step
from collspec.spec.contributions import Contributions
from collspec.spec.dtypes import bfloat16

PAIRS = [(a, c) for a, table in ALGORITHMS.items() for c in table if (a, c) != ("ring-seed", "reduce_scatter")]


def outputs(schedule, state):
    return [state[r][schedule.layout.outputs[r]] for r in range(schedule.ranks)]


@given(st.sampled_from(PAIRS), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_integer_numbers_equal_the_spec(pair, n, seed):
    algorithm, collective = pair
    schedule = generate(algorithm, collective, n)
    rng = np.random.default_rng(seed)
    values = [rng.integers(-100, 100, size=len(schedule.layout.inputs[r])).astype(np.int64) for r in range(n)]
    got = outputs(schedule, run(schedule, Numbers(values)).state)
    from collspec.models.layout import expected_outputs

    want = expected_outputs(schedule, values)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_floats_round_after_every_hop():
    # fp16: the ring adds chunk c starting at rank c+1, so its order differs
    # from the rank-order sum; the result stays within the error bound.
    n = 4
    schedule = generate("ring", "allreduce", n)
    x = [np.array([2048.0, 1.0, 1.0, 1.0], np.float16), np.array([1.0, 2048.0, 1.0, 1.0], np.float16),
         np.array([1.0, 1.0, 2048.0, 1.0], np.float16), np.array([1.0, 1.0, 1.0, 2048.0], np.float16)]
    got = run(schedule, Numbers(x)).state
    rank_order = spec.all_reduce(x)[0]
    assert not np.array_equal(got[0], rank_order)
    assert all(np.array_equal(got[r], got[0]) for r in range(n))  # every rank identical bits
    assert spec.check_reduction(got[0], x).ok


def test_bfloat16_chunks_of_several_elements():
    schedule = generate("ring", "allreduce", 3)
    x = [np.arange(6, dtype=np.float32).astype(bfloat16).reshape(3, 2) * (r + 1) for r in range(3)]
    got = run(schedule, Numbers(x)).state
    assert got.shape == (3, 3, 2) and got.dtype == bfloat16
    assert np.array_equal(got[1].astype(np.float32), (np.arange(6).reshape(3, 2) * 6).astype(np.float32))


def test_history_records_the_state_after_every_step():
    schedule = generate("ring", "allreduce", 3)
    result = run(schedule, contributions(), history=True)
    assert len(result.history) == len(schedule.steps) + 1
    # hop 1 of the ring: rank 0 sends chunk 2 (its owner's predecessor) to rank 1
    assert str(result.history[1][1][2]) == "0·1"
    assert str(result.history[0][1][2]) == "1"
    assert str(result.history[-1][0][0]) == "0·1·2"


def test_reduces_into_one_cell_land_in_listed_order():
    order = []

    class Recording(Numbers):
        def combine(self, acc, incoming):
            order.extend(incoming.tolist())
            return super().combine(acc, incoming)

    schedule = Schedule("reduce", 4, 1, (Step.of([3, 1, 2], 0, 0, 0, "reduce"),))
    state = run(schedule, Recording([np.array([10.0]), np.array([1.0]), np.array([2.0]), np.array([3.0])])).state
    assert order == [3.0, 1.0, 2.0] and state[0][0] == 16.0


def test_lazy_contributions_count_shared_operands_once_per_path():
    a = Contributions.leaf(0, 0)
    x = a + a
    y = x + x
    z = y + x
    assert z.labels() == [(0, 0, 6)]
    assert str(Contributions.leaf(1, 0) + y) == "0·0·0·0·1"


def test_fingerprints_agree_with_exact_multisets_on_count_and_column():
    schedule = generate("halving-doubling", "allreduce", 6)
    exact = run(schedule, contributions()).state
    fp = run(schedule, Fingerprints()).state
    for r in range(6):
        for c in range(schedule.chunks):
            assert int(fp[r, c, 2]) == len(exact[r][c])
            assert int(fp[r, c, 3]) == exact[r][c].indices()[0]
