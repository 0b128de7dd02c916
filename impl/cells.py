"""Which elements of a buffer each cell of a schedule covers.

A models schedule works on ``chunks`` cells per rank; a real buffer has
``count`` elements (rows along its first axis). This module is the one place
that cuts a buffer into cells, so the executor, the shared-memory kernel and
the trace check agree on every element range.

The rule: the buffer is cut into ``blocks`` near-equal blocks (one per rank
for reduce-scatter and all-gather, whose blocks the collective fixes; one
block for everything else), and each block into ``chunks / blocks``
near-equal cells; in both cuts the first ``size % parts`` pieces are one
element longer (the per-rank counts conformance uses for sizes N does not
divide). So 7 elements
in 3 cells are 3 + 2 + 2, and 2 elements in 4 cells are 1 + 1 + 0 + 0: cells
may be empty, and an empty cell is a transfer of zero bytes.

>>> cell_bounds(7, 3).tolist()
[0, 3, 5, 7]
>>> cell_bounds(2, 4).tolist()
[0, 1, 2, 2, 2]
>>> cell_bounds(6, 4, blocks=2).tolist()  # block 0 is [0, 3), cut 2 + 1
[0, 2, 3, 5, 6]
"""

from __future__ import annotations

import numpy as np

from ..spec.errors import SpecError


def near_equal(size: int, parts: int) -> np.ndarray:
    """Boundaries of ``parts`` consecutive pieces of ``size`` elements whose
    lengths differ by at most one, longer pieces first (``parts + 1`` ints)."""
    if parts < 1 or size < 0:
        raise SpecError(f"cannot cut {size} elements into {parts} pieces; need size >= 0 and at least one piece", field="count")
    base, extra = divmod(size, parts)
    lengths = np.full(parts, base, dtype=np.int64)
    lengths[:extra] += 1
    return np.concatenate(([0], np.cumsum(lengths)))


def cell_bounds(count: int, chunks: int, blocks: int = 1) -> np.ndarray:
    """Boundaries of ``chunks`` cells over ``count`` elements: cell c is the
    half-open range ``[bounds[c], bounds[c + 1])``.

    The buffer is first cut into ``blocks`` near-equal blocks (one per rank
    for reduce-scatter and all-gather: the ``_v`` forms' per-rank counts when
    ``blocks`` does not divide ``count``), then each block into ``chunks /
    blocks`` near-equal cells.
    """
    if blocks < 1 or chunks % blocks:
        raise SpecError(f"a schedule of {chunks} chunks cannot be cut into {blocks} equal blocks of cells", field="chunks")
    edges = near_equal(count, blocks)
    per_block = chunks // blocks
    starts = [edges[b] + near_equal(int(edges[b + 1] - edges[b]), per_block)[:-1] for b in range(blocks)]
    return np.concatenate(starts + [[count]]).astype(np.int64)
