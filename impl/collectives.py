"""The torch collective API on top of schedules.

:class:`ScheduleBackend` is a conformance backend (the plug-in protocol of
contracts.md) that runs one built-in algorithm's schedules with the
:class:`~collspec.impl.executor.Executor`. Each collective is a mixin, so an
algorithm's class has exactly the methods it has schedules for (a missing
method is how a backend says "unsupported"):

==================  ===========================================================
method              buffer the schedule runs on (cells: :mod:`.cells`)
==================  ===========================================================
``all_reduce``      the tensor itself when contiguous (a copy otherwise, and
                    the working form for integer avg), in place
``reduce_scatter``  a working copy of ``input`` in N equal blocks
                    (``reduce_scatter_v``: near-equal blocks, the first count
                    mod N ranks one element more); rank r's result (the
                    schedule's output cells) is written to ``output``.
                    ``input`` is never modified outside ``output``, so in
                    place (``output`` the block r of ``input``, the nccl
                    convention) and out of place both work
``all_gather``      ``output``, after copying ``input`` into block r (skipped
                    when ``input`` already is that block: in place); equal
                    blocks (``all_gather_v``: near-equal ones)
``broadcast``       the tensor, in place
``reduce``          a working copy; only the root's tensor is written
``all_to_all``      a copy of ``input`` (count divisible by N), then ``output``
==================  ===========================================================

As the plug-in protocol says, ``reduce_scatter`` and ``all_gather`` take
equal blocks only (a ValueError otherwise) and the ``_v`` methods unequal
ones; each rank knows only its own block, so the ``_v`` methods take the
near-equal rule the harness uses and check their own block against it.

Unsupported (op, dtype) pairs raise ``TypeError`` or ``NotImplementedError``
(:mod:`.reduction`); mismatched sizes and a root out of range raise
``ValueError``. Give a :class:`~collspec.impl.trace.Recorder` as
``recorder`` (or set the attribute) to trace every run.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..models.generators import generate
from ..models.layout import owner_of
from ..models.schedule import Schedule
from .cells import cell_bounds, near_equal
from .executor import Executor
from .reduction import Reduction


class ScheduleBackend:
    """Runs ``algorithm``'s schedules; set by each subclass."""

    algorithm: str = ""
    executor_class = Executor

    def __init__(self, rank: int, world_size: int, recorder=None, group=None):
        if dist.is_initialized() and dist.get_world_size(group) != world_size:
            raise ValueError(f"world_size {world_size} differs from the process group's {dist.get_world_size(group)}")
        self.rank, self.world_size = rank, world_size
        self.recorder = recorder
        self.executor = self.executor_class(rank, world_size, group)
        self._schedules: dict[tuple, Schedule] = {}
        if dist.is_initialized() and dist.get_backend(group) == "nccl":
            # nccl sets up its communicator on the first operation, which every
            # rank must join; a schedule's first step may leave ranks idle
            dist.all_reduce(torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device())), group=group)

    def schedule(self, collective: str, **options) -> Schedule:
        """The algorithm's schedule for ``collective`` on this world size (cached)."""
        key = (collective, tuple(sorted(options.items())))
        if key not in self._schedules:
            self._schedules[key] = generate(self.algorithm, collective, self.world_size, **options)
        return self._schedules[key]

    def schedule_for(self, collective: str, elements: int, itemsize: int, **options) -> Schedule:
        """The schedule for a call on ``elements`` elements of ``itemsize``
        bytes (the whole buffer). The algorithm's default schedule, cut into
        near-equal cells; :class:`~collspec.impl.backends.NcclRing` makes one
        cell per element instead."""
        return self.schedule(collective, **options)

    def _root(self, root: int) -> int:
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < self.world_size:
            raise ValueError(f"root {root!r} is out of range for {self.world_size} ranks (0..{self.world_size - 1})")
        return root

    def _run(self, schedule: Schedule, buffer: torch.Tensor, blocks: int, reduction: Reduction | None) -> None:
        bounds = cell_bounds(buffer.shape[0], schedule.chunks, blocks)
        self.executor.run(schedule, buffer, bounds, reduction, self.recorder)


def _flat_output(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as a flat buffer: itself when contiguous, else a new one."""
    return tensor.view(-1) if tensor.is_contiguous() else torch.empty(tensor.numel(), dtype=tensor.dtype, device=tensor.device)


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_contiguous() and b.is_contiguous() and a.numel() == b.numel() and a.data_ptr() == b.data_ptr() and a.dtype == b.dtype


def _block(flat: torch.Tensor, rank: int, blocks: int) -> torch.Tensor:
    """Rank ``rank``'s block when ``flat`` is cut into near-equal blocks."""
    edges = near_equal(flat.numel(), blocks)
    return flat[int(edges[rank]) : int(edges[rank + 1])]


class AllReduce:
    def all_reduce(self: ScheduleBackend, tensor: torch.Tensor, op: str = "sum") -> None:
        reduction = Reduction(op, tensor.dtype, self.world_size)
        buffer = reduction.working(tensor, copy=False)
        self._run(self.schedule_for("allreduce", buffer.numel(), buffer.element_size()), buffer, 1, reduction)
        reduction.finish(buffer, tensor)


def _require_equal(name: str, whole: int, block: int, n: int) -> None:
    if whole != block * n:
        raise ValueError(f"{name}: {whole} elements are not {n} equal blocks of {block}; unequal blocks go to {name}_v")


class ReduceScatter:
    def reduce_scatter(self: ScheduleBackend, output: torch.Tensor, input: torch.Tensor, op: str = "sum") -> None:
        _require_equal("reduce_scatter", input.numel(), output.numel(), self.world_size)
        self.reduce_scatter_v(output, input, op)

    def reduce_scatter_v(self: ScheduleBackend, output: torch.Tensor, input: torch.Tensor, op: str = "sum") -> None:
        n, count = self.world_size, input.numel()
        mine = int(near_equal(count, n)[self.rank + 1] - near_equal(count, n)[self.rank])
        if output.numel() != mine:
            raise ValueError(f"reduce_scatter_v: output has {output.numel()} elements; rank {self.rank}'s block of {count} over {n} ranks has {mine}")
        reduction = Reduction(op, input.dtype, n)
        buffer = reduction.working(input, copy=True)
        schedule = self.schedule_for("reduce_scatter", buffer.numel(), buffer.element_size())
        self._run(schedule, buffer, n, reduction)
        bounds = cell_bounds(count, schedule.chunks, n)
        owned = owner_of(schedule)[self.rank]
        result = torch.cat([buffer[int(bounds[c]) : int(bounds[c + 1])] for c in owned])
        reduction.finish(result, output)


class AllGather:
    def all_gather(self: ScheduleBackend, output: torch.Tensor, input: torch.Tensor) -> None:
        _require_equal("all_gather", output.numel(), input.numel(), self.world_size)
        self.all_gather_v(output, input)

    def all_gather_v(self: ScheduleBackend, output: torch.Tensor, input: torch.Tensor) -> None:
        n = self.world_size
        buffer = _flat_output(output)
        mine = _block(buffer, self.rank, n)
        if input.numel() != mine.numel():
            raise ValueError(f"all_gather_v: input has {input.numel()} elements; rank {self.rank}'s block of {output.numel()} over {n} ranks has {mine.numel()}")
        if not _same_memory(mine, input):
            mine.copy_(input.reshape(-1))
        self._run(self.schedule_for("allgather", buffer.numel(), buffer.element_size()), buffer, n, None)
        if buffer.data_ptr() != output.data_ptr() or not output.is_contiguous():
            output.copy_(buffer.view(output.shape))


class Broadcast:
    def broadcast(self: ScheduleBackend, tensor: torch.Tensor, root: int = 0) -> None:
        buffer = _flat_output(tensor)
        if not _same_memory(buffer, tensor):
            buffer.copy_(tensor.reshape(-1))
        self._run(self.schedule_for("broadcast", buffer.numel(), buffer.element_size(), root=self._root(root)), buffer, 1, None)
        if not _same_memory(buffer, tensor):
            tensor.copy_(buffer.view(tensor.shape))


class Reduce:
    def reduce(self: ScheduleBackend, tensor: torch.Tensor, root: int = 0, op: str = "sum") -> None:
        reduction = Reduction(op, tensor.dtype, self.world_size)
        buffer = reduction.working(tensor, copy=True)
        self._run(self.schedule_for("reduce", buffer.numel(), buffer.element_size(), root=self._root(root)), buffer, 1, reduction)
        if self.rank == root:
            reduction.finish(buffer, tensor)


class AllToAll:
    def all_to_all(self: ScheduleBackend, output: torch.Tensor, input: torch.Tensor) -> None:
        n = self.world_size
        if input.numel() != output.numel() or input.numel() % n:
            raise ValueError(f"all_to_all: input and output need the same count, divisible by {n} ranks (got {input.numel()} and {output.numel()})")
        buffer = input.reshape(-1).clone()
        self._run(self.schedule("alltoall"), buffer, n, None)
        output.copy_(buffer.view(output.shape))
