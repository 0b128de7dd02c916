"""The checker on large schedules and hand-built breakages."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collspec.models.algebras import contributions
from collspec.models.checker import check, exact_cells
from collspec.models.generators import generate
from collspec.models.interpreter import run
from collspec.models.schedule import COPY, REDUCE, Schedule, Step


def drop_transfer(schedule: Schedule, step: int, position: int) -> Schedule:
    s = schedule.steps[step]
    keep = np.arange(len(s)) != position
    smaller = Step(s.src[keep], s.dst[keep], s.src_chunk[keep], s.dst_chunk[keep], s.op[keep], s.phase, s.name)
    return replace(schedule, steps=schedule.steps[:step] + (smaller,) + schedule.steps[step + 1 :])


def test_a_dropped_transfer_in_a_256_rank_ring_is_named_exactly():
    broken = drop_transfer(generate("ring", "allreduce", 256), step=100, position=17)
    result = check(broken)
    assert result.stats["contributions"].startswith("fingerprints")
    assert not result.ok
    # Rank 17 never forwarded its partial sum of chunk (17 - 1 - 100) % 256 = 172
    # at step 100: that partial held ranks 173..255 and 0..17 (the chain so far).
    detailed = [v for v in result.violations if v.kind == "missing-contribution" and "first 8" not in v.message]
    assert detailed, [str(v) for v in result.violations[:5]]
    assert all(v.details["chunk"] == 172 for v in result.violations)
    first = detailed[0]
    assert [o["rank"] for o in first.details["origin"]] == list(range(0, 18)) + list(range(173, 256))


@given(st.integers(2, 9), st.integers(0, 10**6))
def test_exact_slices_equal_a_full_exact_run(n, seed):
    schedule = generate("ring", "allreduce", n)
    rng = np.random.default_rng(seed)
    broken = drop_transfer(schedule, int(rng.integers(len(schedule.steps))), int(rng.integers(n)))
    full = run(broken, contributions()).state
    targets = [(int(rng.integers(n)), int(rng.integers(n))) for _ in range(3)]
    sliced = exact_cells(broken, targets)
    assert all(sliced[t] == full[t[0]][t[1]] for t in targets)


def test_link_capacity_can_be_raised():
    pair = Schedule("allreduce", 2, 2, (Step.of(0, 1, [0, 1], [0, 1], REDUCE), Step.of(1, 0, [0, 1], [0, 1], COPY)))
    assert [v.kind for v in check(pair).violations] == ["link-overload", "link-overload"]
    assert check(pair, link_capacity=2).violations == []


def test_explicit_owner_makes_ring_seed_a_reduce_scatter():
    seed = generate("ring-seed", "reduce_scatter", 5)
    owned = replace(seed, owner=tuple(((r + 1) % 5,) for r in range(5)))
    assert check(owned).ok


@pytest.mark.parametrize("exact", [True, False])
def test_local_reduce_between_cells_is_a_wrong_column(exact):
    local = Schedule("allreduce", 1, 2, (Step.of(0, 0, 1, 0, REDUCE),))
    result = check(local, exact=exact)
    kinds = [v.kind for v in result.violations]
    assert kinds[0] == "wrong-column" and "rank 0 added rank 0's chunk 1 into its chunk 0" in result.violations[0].message


def test_a_link_over_its_capacity_in_a_hierarchical_ring_is_named_per_step_and_link():
    # 4 groups of 4: every intra-group hop moves a block of 4 chunks over each link
    schedule = generate("hierarchical-ring", "allreduce", 16, group_size=4)
    assert check(schedule).ok
    result = check(schedule, link_capacity=3)
    overloads = [v for v in result.violations if v.kind == "link-overload"]
    assert len(overloads) == 2 * 3 * 16  # 2(L - 1) intra hops, 16 links each
    assert overloads[0].message == "link 0->1 carries 4 chunks in step 0 (chunks 12, 13, 14, 15); its capacity is 3 per step"
    assert {v.step for v in overloads} == set(range(3)) | set(range(9, 12))


def test_a_repeated_hop_in_a_fingerprinted_ring_is_a_link_repeat_per_link():
    ring = generate("ring", "allreduce", 128)
    again = replace(ring, steps=ring.steps[:4] + (ring.steps[3],) + ring.steps[4:])
    result = check(again)
    assert result.stats["contributions"].startswith("fingerprints")
    repeats = [v for v in result.violations if v.kind == "link-repeat"]
    assert len(repeats) == 128
    # rank 0 sends chunk (0 - 1 - 3) % 128 = 124 at hop 3
    assert repeats[0].message == "chunk 124 crosses link 0->1 twice in phase 'reduce-scatter': in step 3 and again in step 4"
    assert "duplicate-contribution" in result.kinds()


def test_steps_store_int32_when_the_numbers_fit_and_int64_when_not():
    small = Step.of(np.arange(4), 1, [0, 1, 2, 3], 0, COPY)
    assert small.src.dtype == np.int32 and small.dst.dtype == np.int32 and small.op.dtype == np.int8
    large = Step.of([0], [1], [2**31], [0], REDUCE)
    assert large.src_chunk.dtype == np.int64 and int(large.src_chunk[0]) == 2**31


# -- link repeats found through arrival slots (checker._Arrivals) ---------------------------


def _check_sorting_every_key(schedule, monkeypatch):
    """The checker with the arrival slots off: every transfer's key sorted."""
    from collspec.models import checker

    with monkeypatch.context() as patch:
        patch.setattr(checker._Arrivals, "LIMIT", -1)
        return check(schedule)


def _messages(result):
    return [(v.kind, v.step, v.src, v.dst, v.message) for v in result.violations]


@given(st.integers(2, 5), st.integers(1, 6), st.integers(1, 5), st.integers(0, 10**6))
def test_arrival_slots_give_the_link_repeats_that_sorting_every_key_gives(ranks, chunks, steps, seed):
    """Random schedules, phases and ops (local transfers, uninitialised and
    mixed columns, several arrivals in one slot within a step and across
    steps): the same violations, in the same order, with or without slots."""
    rng = np.random.default_rng(seed)
    built = []
    for k in range(steps):
        size = int(rng.integers(0, 2 * ranks + 1))
        phase = [None, "a", "b"][int(rng.integers(0, 3))]
        built.append(Step.of(rng.integers(0, ranks, size), rng.integers(0, ranks, size), rng.integers(0, chunks, size),
                             rng.integers(0, chunks, size), rng.integers(0, 2, size), phase=phase))
    schedule = Schedule("allreduce", ranks, chunks, tuple(built))
    monkeypatch = pytest.MonkeyPatch()  # not the fixture: hypothesis runs the body many times
    try:
        assert _messages(check(schedule)) == _messages(_check_sorting_every_key(schedule, monkeypatch))
    finally:
        monkeypatch.undo()


def test_a_chunk_back_on_its_link_after_another_sender_used_its_slot_is_a_link_repeat(monkeypatch):
    """Chunk 0 goes 0->2, then 1->2 (same slot: rank 2, chunk 0's column),
    then 0->2 again: the slot's last arrival is rank 1's, yet the repeat of
    0->2 is found, as sorting every key finds it."""
    steps = (Step.of([0], [2], [0], [0], COPY, phase="p"), Step.of([1], [2], [0], [1], COPY, phase="p"),
             Step.of([0], [2], [0], [2], COPY, phase="p"))
    schedule = Schedule("allgather", 3, 3, steps)
    repeats = [v.message for v in check(schedule).violations if v.kind == "link-repeat"]
    assert repeats == ["chunk 0 crosses link 0->2 twice in phase 'p': in step 0 and again in step 2"]
    assert _messages(check(schedule)) == _messages(_check_sorting_every_key(schedule, monkeypatch))


def test_a_chunk_sent_twice_over_one_link_in_one_step_is_a_link_repeat():
    step = Step.of([0, 0], [1, 1], [0, 0], [0, 1], COPY, phase="p")
    result = check(Schedule("allgather", 2, 2, (step,)), link_capacity=2)
    assert [v.message for v in result.violations if v.kind == "link-repeat"] == [
        "chunk 0 crosses link 0->1 twice in phase 'p': in step 0 and again in step 0"]
