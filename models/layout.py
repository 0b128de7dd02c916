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


def owner_problem(owner, ranks: int, chunks: int) -> str | None:
    """What is wrong with a declared reduce_scatter ``owner``, or None.

    The spec's ``reduce_scatter_v`` gives rank r one contiguous block of
    ``counts[r]`` chunks (0 allowed), the blocks in rank order tiling the
    vector. A declared owner may rename the ranks (the ``ring-seed``
    schedule ends with rank r holding chunk r + 1: a rotation of whole
    blocks), nothing more. So ``owner`` must have one entry per rank, each
    entry one run of consecutive chunks in increasing order (or empty), and
    the runs together must give every chunk to exactly one rank. Blocks may
    differ in size, as ``reduce_scatter_v``'s counts may.

    >>> owner_problem([[1], [2], [0]], 3, 3) is None
    True
    >>> owner_problem([[0], [0], [0]], 3, 3)
    "field 'owner' must give every chunk to exactly one rank: chunk 0 goes to ranks 0, 1, 2; chunks 1, 2 to no rank"
    >>> owner_problem([[0, 2], [1], []], 3, 3)
    "field 'owner': rank 0's chunks 0, 2 are not one block of consecutive chunks in increasing order"
    """
    if len(owner) != ranks:
        return f"field 'owner' must list one block of chunks per rank: {ranks} entries, got {len(owner)}"
    holders: list[list[int]] = [[] for _ in range(chunks)]
    for rank, block in enumerate(owner):
        for chunk in block:
            if not 0 <= chunk < chunks:
                return f"field 'owner': rank {rank}'s chunk {chunk} is out of range 0..{chunks - 1}"
            holders[chunk].append(rank)
    shared = [(c, h) for c, h in enumerate(holders) if len(h) > 1]
    unowned = [c for c, h in enumerate(holders) if not h]
    if shared or unowned:
        parts = [f"chunk {c} goes to ranks {', '.join(map(str, h))}" for c, h in shared[:1]]
        if unowned:
            parts.append(f"{'chunks' if len(unowned) > 1 else 'chunk'} {', '.join(map(str, unowned))} to no rank")
        return f"field 'owner' must give every chunk to exactly one rank: {'; '.join(parts)}"
    for rank, block in enumerate(owner):
        if block and list(block) != list(range(block[0], block[0] + len(block))):
            return (f"field 'owner': rank {rank}'s chunks {', '.join(map(str, block))} are not one block of "
                    "consecutive chunks in increasing order")
    return None


def owner_of(schedule: Schedule) -> tuple[tuple[int, ...], ...]:
    """The chunks each rank must end with: the declared ``owner`` (checked
    by :func:`owner_problem`; :class:`ScheduleError` if it fails) or
    :func:`default_owner`."""
    if schedule.owner is None:
        return default_owner(schedule)
    problem = owner_problem(schedule.owner, schedule.ranks, schedule.chunks)
    if problem:
        raise ScheduleError(f"{schedule.label()}: {problem}")
    return schedule.owner


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
