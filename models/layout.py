"""Where each collective's inputs start and its outputs must end, and what
those outputs must be.

The default layout is the in-place one of the JSON schedule format: every
rank has ``chunks`` cells, one per chunk of the vector.

==============  ===================================  ==============================
collective      inputs (per rank)                    outputs (per rank)
==============  ===================================  ==============================
allreduce       every chunk                          every chunk
reduce_scatter  every chunk                          its owned chunks (block r)
allgather       block r (chunks/ranks chunks)        every chunk
broadcast       every chunk (only the root's matter) every chunk
reduce          every chunk                          every chunk, on the root only
alltoall        every chunk                          every chunk
==============  ===================================  ==============================

What the outputs must hold is not written here: :func:`expected_outputs`
runs the spec's own collective on the algebra's input values (contributor
sets, fingerprints, numbers), so the checker's postcondition is the spec.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..spec import collectives as spec
from ..spec.errors import CollspecError
from .schedule import INDEX, Layout, Schedule


class ScheduleError(CollspecError):
    """A schedule that cannot be checked as given (exit 2)."""


def default_owner(schedule: Schedule) -> tuple[tuple[int, ...], ...]:
    """The chunks each rank must end with: block r of chunks/ranks chunks."""
    n, c = schedule.ranks, schedule.chunks
    if c % n:
        raise ScheduleError(
            f"a {schedule.collective} schedule needs chunks divisible by ranks (got {c} chunks for {n} ranks) "
            "or an explicit \"owner\""
        )
    k = c // n
    return tuple(tuple(range(r * k, (r + 1) * k)) for r in range(n))


def owner_of(schedule: Schedule) -> tuple[tuple[int, ...], ...]:
    return schedule.owner if schedule.owner is not None else default_owner(schedule)


def default_layout(schedule: Schedule) -> Layout:
    n, c, kind = schedule.ranks, schedule.chunks, schedule.collective
    every = np.arange(c, dtype=INDEX)
    none = np.zeros(0, dtype=INDEX)
    inputs = tuple(every for _ in range(n))
    outputs = tuple(every for _ in range(n))
    if kind == "reduce_scatter":
        outputs = tuple(np.array(chunks, dtype=INDEX) for chunks in owner_of(schedule))
    elif kind == "allgather":
        inputs = tuple(np.array(block, dtype=INDEX) for block in default_owner(schedule))
    elif kind == "reduce":
        outputs = tuple(every if r == schedule.root else none for r in range(n))
    elif kind == "alltoall":
        default_owner(schedule)  # chunks must split evenly
    return Layout(cells=c, inputs=inputs, outputs=outputs)


def expected_outputs(schedule: Schedule, leaves: Sequence[np.ndarray]) -> list[np.ndarray]:
    """What every rank's output cells must hold, given the input values.

    ``leaves[r][k]`` is the value of rank r's input element k in some
    algebra (a contributor set, a fingerprint row, a number). The result is
    the spec's collective applied to those values, with op ``sum``.
    """
    kind = schedule.collective
    n = schedule.ranks
    run: dict[str, Callable[[], list]] = {
        "allreduce": lambda: spec.all_reduce(leaves),
        "allgather": lambda: spec.all_gather(leaves),
        "broadcast": lambda: spec.broadcast(leaves, schedule.root),
        "reduce": lambda: spec.reduce(leaves, schedule.root),
        "alltoall": lambda: spec.all_to_all(leaves),
        "reduce_scatter": lambda: _owned_reduce_scatter(schedule, leaves),
    }
    out = run[kind]()
    empty = np.asarray(leaves[0])[:0]
    return [empty if o is None else o for o in out][:n]


def _owned_reduce_scatter(schedule: Schedule, leaves: Sequence[np.ndarray]) -> list:
    """reduce_scatter where rank r owns the chunks ``owner[r]``.

    The spec defines rank r to receive block r; reordering the chunks so that
    each rank's owned chunks form its block turns any ownership into that.
    """
    owner = owner_of(schedule)
    order = np.array([c for chunks in owner for c in chunks], dtype=np.int64)
    counts = [len(chunks) for chunks in owner]
    return spec.reduce_scatter_v([np.asarray(x)[order] for x in leaves], counts)
