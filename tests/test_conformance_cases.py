"""The case lists: what --quick, the default and --full cover."""

from __future__ import annotations

import pytest

from collspec import spec
from collspec.conformance import cases
from collspec.conformance.collectives import COLLECTIVES
from collspec.spec.errors import CollspecError


def test_quick_covers_every_collective_dtype_and_op():
    quick = cases.quick(4)
    for name, collective in COLLECTIVES.items():
        for dtype in spec.DTYPES:
            for op in spec.OPS if collective.reducing else [None]:
                assert any(c.collective == name and c.dtype == dtype and c.op == op for c in quick), (name, dtype, op)


def test_quick_covers_every_size_mode_and_root():
    quick = cases.quick(4)
    for name, collective in COLLECTIVES.items():
        mine = [c for c in quick if c.collective == name]
        expected = {s - s % 4 if name == "alltoall" else s for s in cases.standard_sizes(4)}
        assert {c.count for c in mine} >= expected, name
        assert {c.inplace for c in mine} == set(collective.inplace_modes), name
        if collective.rooted:
            assert {c.root for c in mine} == {0, 1, 2, 3}, name
    assert {c.dtype for c in quick if c.pattern == "rounding"} == {"float16", "bfloat16", "float32", "float64"}
    assert 250 <= len(quick) <= 400


def test_sizes_include_the_edges_and_2_24_only_in_full():
    assert cases.standard_sizes(4) == [0, 1, 3, 5, 256, 1009, 2**20]
    assert 2**24 in cases.standard_sizes(4, full=True)
    full = cases.grid(4, full=True, collectives=["allreduce"], dtypes=["int8"], ops=["sum"])
    assert [c.count for c in full] == cases.standard_sizes(4, full=True)


def test_all_to_all_runs_only_counts_divisible_by_the_ranks():
    for world in (2, 3, 4, 5):
        assert all(c.count % world == 0 for c in cases.grid(world, collectives=["alltoall"]))


def test_the_grid_is_every_combination():
    grid = cases.grid(3, collectives=["reduce"], dtypes=["float32"], ops=["min", "sum"])
    sizes = cases.standard_sizes(3)
    # min: spread; sum: tally and rounding; 3 roots each
    assert len(grid) == len(sizes) * 3 * (1 + 2)


def test_repeats_get_fresh_seeds():
    base = cases.quick(2, collectives=["broadcast"], dtypes=["int8"])
    again = cases.repeated(base, 3, seed=10)
    fresh = [c for c in again if c.call == 0]
    assert len(fresh) == 3 * len(base)
    assert {c.seed for c in fresh} == {10, 11, 12}
    assert len({c.data_seed for c in fresh}) == len(fresh)
    # then calls 1 and 2 of the first seed's inputs, for bit-reproducibility
    assert [(c.seed, c.call) for c in again[len(fresh):]] == [(10, 1), (10, 2)] * len(base)


@pytest.mark.parametrize("text, value", [("0", 0), ("97", 97), ("4K", 4096), ("16m", 16 * 2**20)])
def test_sizes_parse(text, value):
    assert cases.parse_size(text, "--sizes") == value


@pytest.mark.parametrize("text", ["-1", "abc", "4X", ""])
def test_bad_sizes_are_refused(text):
    with pytest.raises(CollspecError, match="--sizes"):
        cases.parse_size(text, "--sizes")


def test_quick_with_sizes_uses_only_those_sizes():
    quick = cases.quick(4, sizes=[7, 12])
    assert {c.count for c in quick} == {7, 12, 4}  # all-to-all rounds 7 down to 4
    assert {c.dtype for c in quick if c.count == 7 and c.collective == "allreduce"} == set(spec.DTYPES)
