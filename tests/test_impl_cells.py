"""How impl cuts a buffer into a schedule's cells."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collspec.impl import cells
from collspec.impl.cells import cell_bounds, near_equal
from collspec.spec.errors import SpecError


@given(st.integers(0, 10_000), st.integers(1, 300))
def test_near_equal_pieces_cover_the_range_and_differ_by_at_most_one(size, parts):
    edges = near_equal(size, parts)
    lengths = np.diff(edges)
    assert edges[0] == 0 and edges[-1] == size and len(lengths) == parts
    assert lengths.max() - lengths.min() <= 1
    assert np.all(lengths[:-1] >= lengths[1:])  # longer pieces first


@given(st.integers(1, 16), st.integers(1, 8), st.integers(0, 500))
def test_cells_stay_inside_their_rank_block(blocks, per_block, block_size):
    count, chunks = blocks * block_size, blocks * per_block
    bounds = cell_bounds(count, chunks, blocks)
    assert len(bounds) == chunks + 1 and bounds[0] == 0 and bounds[-1] == count
    assert np.all(np.diff(bounds) >= 0)
    # cell c belongs to block c // per_block: it starts and ends inside that block
    starts, stops = bounds[:-1], bounds[1:]
    block = np.arange(chunks) // per_block
    assert np.all((starts >= block * block_size) & (stops <= (block + 1) * block_size))


def test_sizes_not_divisible_by_the_chunks():
    assert cell_bounds(7, 4).tolist() == [0, 2, 4, 6, 7]
    assert cell_bounds(0, 3).tolist() == [0, 0, 0, 0]
    assert cell_bounds(1, 4).tolist() == [0, 1, 1, 1, 1]
    # 7 elements over 2 ranks' blocks (4 + 3, as conformance's per-rank
    # counts), each block in 2 cells
    assert cell_bounds(7, 4, 2).tolist() == [0, 2, 4, 6, 7]


@pytest.mark.parametrize(
    "count, chunks, blocks, message",
    [
        (8, 3, 2, "a schedule of 3 chunks cannot be cut into 2 equal blocks"),
        (-1, 2, 1, "cannot cut -1 elements into 1 pieces"),
    ],
)
def test_impossible_cuts_are_refused_with_the_reason(count, chunks, blocks, message):
    with pytest.raises(SpecError, match=message):
        cell_bounds(count, chunks, blocks)


def test_examples():
    assert doctest.testmod(cells).failed == 0
