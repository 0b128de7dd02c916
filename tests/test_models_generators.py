"""Every built-in generator passes the checker for its collective, N = 1..64."""

from __future__ import annotations

import pytest

from collspec.models.checker import check
from collspec.models.generators import ALGORITHMS, generate
from collspec.models.layout import ScheduleError

PAIRS = [(a, c) for a, table in ALGORITHMS.items() for c in table if (a, c) != ("ring-seed", "reduce_scatter")]


@pytest.mark.parametrize("algorithm, collective", PAIRS, ids=[f"{a}-{c}" for a, c in PAIRS])
def test_generator_passes_for_every_rank_count(algorithm, collective):
    failures = {}
    for n in range(1, 65):
        result = check(generate(algorithm, collective, n))
        if not result.ok:
            failures[n] = [str(v) for v in result.violations if v.is_error][:3]
    assert not failures


def test_ring_allreduce_at_1024_ranks():
    result = check(generate("ring", "allreduce", 1024))
    assert result.ok and result.violations == []
    assert result.stats["transfers"] == 2 * 1023 * 1024
    assert result.stats["contributions"].startswith("fingerprints")


def test_ring_seed_is_an_allreduce_but_not_a_reduce_scatter():
    assert check(generate("ring-seed", "allreduce", 8)).ok
    result = check(generate("ring-seed", "reduce_scatter", 8))
    assert [v.kind for v in result.violations] == ["postcondition"]
    assert result.violations[0].details["actual_owner"] == [[(r + 1) % 8] for r in range(8)]


@pytest.mark.parametrize(
    "algorithm, n, warnings",
    [
        ("ring", 8, set()),
        ("hierarchical-ring", 12, set()),
        ("halving-doubling", 8, set()),
        ("halving-doubling", 6, {"not-bandwidth-optimal"}),
        ("recursive-doubling", 8, {"not-bandwidth-optimal"}),
        ("binary-tree", 7, {"not-bandwidth-optimal"}),
        ("hub", 4, {"not-bandwidth-optimal"}),
        ("direct", 4, {"not-bandwidth-optimal", "ranks-disagree"}),
    ],
)
def test_warnings_say_which_allreduce_is_optimal_and_which_may_disagree(algorithm, n, warnings):
    result = check(generate(algorithm, "allreduce", n))
    assert result.ok
    assert {v.kind for v in result.violations} == warnings


def test_hierarchical_ring_uses_the_group_size():
    schedule = generate("hierarchical-ring", "allreduce", 12, group_size=3)
    assert len(schedule.steps) == 2 * (3 - 1) + 2 * (4 - 1)
    assert check(schedule).ok


@pytest.mark.parametrize(
    "args, message",
    [
        (("nosuch", "allreduce", 4), "unknown algorithm 'nosuch'; use one of ring, ring-seed"),
        (("hub", "allgather", 4), "hub has no allgather schedule; it has allreduce, broadcast, reduce"),
        (("ring", "allreduce", 0), "ranks must be an integer from 1 to 65536, got 0"),
    ],
)
def test_generate_rejects_bad_requests(args, message):
    with pytest.raises(ScheduleError, match=message):
        generate(*args)
