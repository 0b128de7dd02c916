"""One small description per collective, feeding one shared harness.

As in nccl-tests, each collective supplies a few hooks and nothing else:

- ``method`` and ``call``: which plug-in method runs it, with which arguments;
  ``method_v`` and ``call_v``, for reduce-scatter and all-gather, the method
  that gets unequal blocks instead (:meth:`Collective.route`);
- ``layout``: each rank's buffers (separate input and output, or one buffer
  in place, in the NCCL convention: reduce-scatter's output is the rank's
  block of its input, all-gather's input is the rank's block of its output);
- ``expect``: what each rank's output must hold afterwards, asked of
  :mod:`collspec.spec` (the oracle; nothing here restates a definition).

An expectation is :class:`Reduced` (a reduction of rows ``[a, b)`` of every
rank's input, compared with :func:`collspec.spec.check_reduction`),
:class:`Exact` (the spec's result, bit for bit) or :class:`Untouched` (the
buffer must keep its input, e.g. a non-root rank of reduce).

>>> layout = COLLECTIVES["reduce_scatter"].layout(5, 4, 1, inplace=True)
>>> layout.output, layout.storages
(View(storage='input', start=2, length=1), {'input': 5})

The plug-in protocol follows NCCL, torch.distributed and MPI:
``reduce_scatter`` and ``all_gather`` only ever get equal blocks (input =
world_size x output for reduce-scatter, the reverse for all-gather); a count
N does not divide goes to ``reduce_scatter_v`` / ``all_gather_v``
(``MPI_Reduce_scatter`` and ``MPI_Allgatherv`` in MPI's terms):

>>> [COLLECTIVES["reduce_scatter"].route(count, 4)[0] for count in (0, 8, 5)]
['reduce_scatter', 'reduce_scatter', 'reduce_scatter_v']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import spec
from ..spec.kernel import block_bounds, equal_counts


@dataclass(frozen=True)
class View:
    """``length`` elements of a rank's buffer ``storage``, from ``start``."""

    storage: str
    start: int
    length: int

    @property
    def stop(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class Layout:
    """A rank's buffers (name -> length) and where its input and output live.

    ``first`` is the place of the input's element 0 in the whole the
    collective builds (the rank's block start for all-gather, else 0).
    """

    storages: dict[str, int]
    input: View
    output: View
    first: int = 0


@dataclass(frozen=True)
class Reduced:
    """The output must be the reduction of rows ``[a, b)`` of every rank's input.

    ``canonical`` is the spec's own result (its rank-order reduction): the
    same bits are always correct; other bits must lie within the spec's error
    bound. ``others`` lists (rank, (a, b)) blocks of the same length owned by
    other ranks, so that a misplaced block is named as such.
    """

    rows: tuple[int, int]
    canonical: np.ndarray
    others: tuple[tuple[int, tuple[int, int]], ...] = ()


@dataclass(frozen=True)
class Exact:
    """The output must equal ``values`` bit for bit; ``blocks`` are its (a, b) parts by source rank."""

    values: np.ndarray
    blocks: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Untouched:
    """The buffer must still hold the rank's input."""

    why: str


Expectation = Reduced | Exact | Untouched


def block_counts(count: int, world: int) -> list[int]:
    """Per-rank block sizes: equal when N divides the count, else the first
    ``count % N`` ranks get one more (the counts the ``_v`` methods get: each
    rank sees its own as its buffer's length, the blocks lie in rank order)."""
    if count % world == 0:
        return equal_counts(count, world)
    return [count // world + (1 if r < count % world else 0) for r in range(world)]


def _bounds(count: int, world: int) -> list[tuple[int, int]]:
    counts = block_counts(count, world)
    return [block_bounds(counts, r) for r in range(world)]


# -- layouts -------------------------------------------------------------------


def _one_buffer(count: int, world: int, rank: int, inplace: bool) -> Layout:
    whole = View("buffer", 0, count)
    return Layout({"buffer": count}, whole, whole)


def _scatter_layout(count: int, world: int, rank: int, inplace: bool) -> Layout:
    a, b = _bounds(count, world)[rank]
    if inplace:
        return Layout({"input": count}, View("input", 0, count), View("input", a, b - a))
    return Layout({"input": count, "output": b - a}, View("input", 0, count), View("output", 0, b - a))


def _gather_layout(count: int, world: int, rank: int, inplace: bool) -> Layout:
    a, b = _bounds(count, world)[rank]
    if inplace:
        return Layout({"output": count}, View("output", a, b - a), View("output", 0, count), first=a)
    return Layout({"input": b - a, "output": count}, View("input", 0, b - a), View("output", 0, count), first=a)


def _two_buffers(count: int, world: int, rank: int, inplace: bool) -> Layout:
    return Layout({"input": count, "output": count}, View("input", 0, count), View("output", 0, count))


# -- expectations, from the spec ---------------------------------------------


def _expect_all_reduce(case, world: int, inputs: list[np.ndarray]) -> list[Expectation]:
    return [Reduced((0, case.count), out) for out in spec.all_reduce(inputs, case.op)]


def _expect_reduce_scatter(case, world: int, inputs: list[np.ndarray]) -> list[Expectation]:
    bounds = _bounds(case.count, world)
    results = spec.reduce_scatter_v(inputs, block_counts(case.count, world), case.op)

    def same_size(r: int) -> tuple:
        size = bounds[r][1] - bounds[r][0]
        return tuple((j, bounds[j]) for j in range(world) if j != r and bounds[j][1] - bounds[j][0] == size)

    return [Reduced(bounds[r], results[r], same_size(r)) for r in range(world)]


def _expect_reduce(case, world: int, inputs: list[np.ndarray]) -> list[Expectation]:
    results = spec.reduce(inputs, case.root, case.op)
    return [
        Reduced((0, case.count), out) if out is not None else Untouched("a non-root rank's buffer of reduce")
        for out in results
    ]


def _expect_broadcast(case, world: int, inputs: list[np.ndarray]) -> list[Expectation]:
    return [Exact(out, ((0, case.count),)) for out in spec.broadcast(inputs, case.root)]


def _expect_all_gather(case, world: int, inputs: list[np.ndarray]) -> list[Expectation]:
    blocks = tuple(_bounds(case.count, world))
    return [Exact(out, blocks) for out in spec.all_gather_v(inputs)]


def _expect_all_to_all(case, world: int, inputs: list[np.ndarray]) -> list[Expectation]:
    blocks = tuple(_bounds(case.count, world))
    return [Exact(out, blocks) for out in spec.all_to_all(inputs)]


@dataclass(frozen=True)
class Collective:
    """The hooks of one collective (see the module text)."""

    name: str
    method: str
    reducing: bool
    rooted: bool
    inplace_modes: tuple[bool, ...]
    layout: Callable[[int, int, int, bool], Layout]
    call: Callable
    expect: Callable
    same_on_every_rank: bool = False
    blocked: bool = False  # the buffer is cut into one block per rank
    method_v: str | None = None  # the method for unequal blocks (count % N != 0)
    call_v: Callable | None = None

    def unequal(self, count: int, world: int) -> bool:
        """Whether a case of ``count`` elements on ``world`` ranks goes to the ``_v`` method."""
        return self.method_v is not None and count % world != 0

    def route(self, count: int, world: int) -> tuple[str, Callable]:
        """The method name and the call that run a case of ``count`` elements."""
        if self.unequal(count, world):
            return self.method_v, self.call_v
        return self.method, self.call


#: The collectives by their spec names.
COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective(
            "allreduce", "all_reduce", True, False, (True,), _one_buffer,
            lambda b, inp, out, case: b.all_reduce(out, case.op), _expect_all_reduce, same_on_every_rank=True,
        ),
        Collective(
            "reduce_scatter", "reduce_scatter", True, False, (False, True), _scatter_layout,
            lambda b, inp, out, case: b.reduce_scatter(out, inp, case.op), _expect_reduce_scatter, blocked=True,
            method_v="reduce_scatter_v", call_v=lambda b, inp, out, case: b.reduce_scatter_v(out, inp, case.op),
        ),
        Collective(
            "allgather", "all_gather", False, False, (False, True), _gather_layout,
            lambda b, inp, out, case: b.all_gather(out, inp), _expect_all_gather, blocked=True,
            method_v="all_gather_v", call_v=lambda b, inp, out, case: b.all_gather_v(out, inp),
        ),
        Collective(
            "broadcast", "broadcast", False, True, (True,), _one_buffer,
            lambda b, inp, out, case: b.broadcast(out, case.root), _expect_broadcast,
        ),
        Collective(
            "reduce", "reduce", True, True, (True,), _one_buffer,
            lambda b, inp, out, case: b.reduce(out, case.root, case.op), _expect_reduce,
        ),
        Collective(
            "alltoall", "all_to_all", False, False, (False,), _two_buffers,
            lambda b, inp, out, case: b.all_to_all(out, inp), _expect_all_to_all, blocked=True,
        ),
    )
}
