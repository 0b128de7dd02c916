"""Each rank's buffers for one case: layout, input and the guarded image.

A rank's buffers are *images*: every storage of its layout with
:func:`~collspec.conformance.data.guard` sentinel elements before and after.
Before the call an image holds the sentinel everywhere except where the
rank's input lives. The rank process builds the images and hands the
backend views into them; the coordinator rebuilds the same initial images to
know what must not have changed. Both call the functions here, so they
cannot disagree.

>>> from collspec.conformance.cases import Case
>>> case = Case("allgather", "int8", None, 5, True, None, "origin")
>>> image = initial_images(case, world=4, rank=1)["output"]
>>> g = guard("int8")
>>> len(image) - 2 * g, [int(v) for v in image[g + 1 : g + 4]]    # counts 2, 1, 1, 1: rank 1's block is [2, 3)
(5, [-128, 70, -128])
"""

from __future__ import annotations

import numpy as np

from .cases import Case
from .collectives import COLLECTIVES, Layout, View
from .data import ROWS, guard, origin_values, sentinel


def layout_of(case: Case, world: int, rank: int) -> Layout:
    return COLLECTIVES[case.collective].layout(case.count, world, rank, case.inplace)


def rank_input(case: Case, world: int, rank: int) -> np.ndarray:
    """What rank ``rank`` contributes to the case (a pure function of the case)."""
    layout = layout_of(case, world, rank)
    n = layout.input.length
    if case.pattern == "origin":
        return origin_values(case.dtype, world, rank, layout.first + np.arange(n), case.data_seed)
    return ROWS[case.pattern](case.dtype, world, rank, n, case.data_seed)


def all_inputs(case: Case, world: int) -> list[np.ndarray]:
    return [rank_input(case, world, r) for r in range(world)]


def inside(view: View, dtype: str) -> slice:
    """Where a view lies in its storage's image (past the leading guard)."""
    g = guard(dtype)
    return slice(g + view.start, g + view.stop)


def initial_images(case: Case, world: int, rank: int, given: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every storage of the rank's layout, guarded, before the call (``given``: the rank's input, if known)."""
    layout = layout_of(case, world, rank)
    fill = sentinel(case.dtype)
    g = guard(case.dtype)
    images = {name: np.full(g + length + g, fill, dtype=fill.dtype) for name, length in layout.storages.items()}
    images[layout.input.storage][inside(layout.input, case.dtype)] = rank_input(case, world, rank) if given is None else given
    return images
