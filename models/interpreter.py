"""The one interpreter: runs a schedule over any value algebra.

State is an array ``state[rank, cell, ...]`` whose trailing shape belongs to
the algebra (nothing for symbols, a chunk's elements for numbers, five lanes
for fingerprints). A step reads every sender's cell first (start-of-step
values), then applies the writes group by group (:attr:`Step.rounds`), so
several reduces into one cell land in the order the step lists them.

>>> from collspec.models.generators import generate
>>> from collspec.models.algebras import contributions
>>> ring = generate("ring", "allreduce", 3)
>>> final = run(ring, contributions()).state
>>> str(final[2][0]), str(final[0][1])
('0·1·2', '0·1·2')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .algebras import Algebra
from .schedule import COPY, INDEX, Schedule, Step

#: observe(step_index, step, positions, before, incoming, after): called for
#: every group of transfers applied together; ``positions`` index the step's
#: transfers, the arrays hold the receivers' cells before and after and the
#: values received.
Observer = Callable[[int, Step, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


@dataclass
class Run:
    """Final state, and the state after every step when ``history`` was asked."""

    state: np.ndarray
    history: list[np.ndarray] | None = None


def initial_state(schedule: Schedule, algebra: Algebra) -> np.ndarray:
    """Every cell uninitialised, then each rank's inputs in their cells.

    An algebra may provide ``initial_state(schedule)`` to build this faster.
    """
    if hasattr(algebra, "initial_state"):
        return algebra.initial_state(schedule)
    layout = schedule.layout
    every = np.arange(layout.cells)
    rows = []
    for rank in range(schedule.ranks):
        row = np.asarray(algebra.garbage(rank, every)).copy()
        cells = layout.inputs[rank]
        if len(cells):
            row[cells] = algebra.leaves(rank, cells)
        rows.append(row)
    return np.stack(rows) if rows else np.zeros((0, layout.cells))


def run(
    schedule: Schedule,
    algebra: Algebra,
    *,
    state: np.ndarray | None = None,
    observe: Observer | None = None,
    history: bool = False,
) -> Run:
    """Execute ``schedule`` over ``algebra`` and return the final state.

    ``state`` overrides the initial state (it is not modified).
    """
    current = initial_state(schedule, algebra) if state is None else state.copy()
    states = [current.copy()] if history else None
    cells = schedule.layout.cells
    # one flat cell axis (rank * cells + cell): a single index array per access
    flat = current.reshape((schedule.ranks * cells,) + current.shape[2:])
    rows = _rows(flat)
    for index, step in enumerate(schedule.steps):
        apply_step(flat, cells, step, algebra, index, observe, rows=rows)
        if states is not None:
            states.append(current.copy())
    return Run(current, states)


def _rows(flat: np.ndarray) -> np.ndarray | None:
    """``flat`` as a 1-d array with one opaque item per cell (a view), for
    writing many cells at once with :func:`numpy.put`; None where that
    view does not exist (Python objects, a 1-d state, a strided array).

    Why: with lanes or chunk elements per cell, ``flat[at] = values``
    takes numpy's general fancy-assignment path, several times slower
    than ``put`` on one item per cell (the 4096-rank checker spent more
    time there than anywhere else; docs/bench.md)."""
    if flat.ndim < 2 or flat.dtype.hasobject or not flat.flags.c_contiguous or flat.size == 0:
        return None
    return flat.view(np.dtype((np.void, flat.itemsize * (flat.size // len(flat))))).reshape(len(flat))


def _write(flat: np.ndarray, rows: np.ndarray | None, at: np.ndarray, values: np.ndarray) -> None:
    """``flat[at] = values``, through ``rows`` (see :func:`_rows`) when given."""
    if rows is None:
        flat[at] = values
        return
    values = np.ascontiguousarray(values, dtype=flat.dtype).reshape(len(values), -1)
    np.put(rows, at, values.view(rows.dtype).reshape(len(values)))


def apply_step(flat: np.ndarray, cells: int, step: Step, algebra: Algebra, index: int = 0, observe: Observer | None = None,
               rows: np.ndarray | None = None) -> None:
    """Apply one synchronous step, in place, to a state whose rank and cell
    axes are merged into one (``flat[rank * cells + cell]``). ``rows`` is
    :func:`_rows` of ``flat`` (a faster write path), if the caller made it."""
    if len(step) == 0:
        return
    source = step.src.astype(INDEX) * cells + step.src_chunk
    target = step.dst.astype(INDEX) * cells + step.dst_chunk
    incoming_all = np.take(flat, source, axis=0)  # read everything first (take: faster than flat[source])
    if step.writes_once:  # the common case: one group, no per-group indexing
        groups = [None]
    else:
        groups = step.rounds
    for positions in groups:
        whole = positions is None
        at = target if whole else target[positions]
        incoming = incoming_all if whole else incoming_all[positions]
        ops = step.op if whole else step.op[positions]
        before = np.take(flat, at, axis=0)
        kinds = step.op_kinds if whole else (bool(ops.any()), not ops.all())
        if not kinds[0]:
            after = incoming
        elif not kinds[1]:
            after = algebra.combine(before, incoming)
        else:
            after = before.copy()
            copy = ops == COPY
            after[copy] = incoming[copy]
            after[~copy] = algebra.combine(before[~copy], incoming[~copy])
        _write(flat, rows, at, after)
        if observe is not None:
            observe(index, step, np.arange(len(step)) if whole else positions, before, incoming, after)
