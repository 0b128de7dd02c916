"""The built-in backends of ``collspec conform --backend NAME``.

=====================  ====================  ===================================
name                   class                 what runs
=====================  ====================  ===================================
``ring``               :class:`Ring`         the ring schedules (models/)
``recursive-doubling`` :class:`RecursiveDoubling`
``halving-doubling``   :class:`HalvingDoubling`
``binary-tree``        :class:`BinaryTree`
``hierarchical-ring``  :class:`HierarchicalRing`
``direct``             :class:`Direct`
``nccl-ring``          :class:`NcclRing`     NCCL's ring, one cell per element
``shm``                :class:`SharedMemory`  shared-memory all-reduce (:mod:`.shm`)
=====================  ====================  ===================================

Each schedule class has a method for exactly the collectives its algorithm
has a generator for (``collspec.models.generators.ALGORITHMS``), all run by
the executor over torch.distributed point-to-point. Every class follows the
plug-in protocol of contracts.md: ``Cls(rank, world_size)`` in each rank
process once torch.distributed is initialised.
"""

from __future__ import annotations

from .collectives import AllGather, AllReduce, AllToAll, Broadcast, Reduce, ReduceScatter, ScheduleBackend
from .shm import SharedMemory, SharedMemoryOneShot, SharedMemoryTwoShot

#: the methods of each collective of ALGORITHMS
MIXINS = {
    "allreduce": AllReduce,
    "reduce_scatter": ReduceScatter,
    "allgather": AllGather,
    "broadcast": Broadcast,
    "reduce": Reduce,
    "alltoall": AllToAll,
}


class Ring(AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, ScheduleBackend):
    """Ring all-reduce, reduce-scatter and all-gather; pipelined chains for broadcast and reduce."""

    algorithm = "ring"


class RecursiveDoubling(AllReduce, AllGather, ScheduleBackend):
    algorithm = "recursive-doubling"


class HalvingDoubling(AllReduce, ReduceScatter, ScheduleBackend):
    algorithm = "halving-doubling"


class BinaryTree(AllReduce, Broadcast, Reduce, ScheduleBackend):
    algorithm = "binary-tree"


class HierarchicalRing(AllReduce, ScheduleBackend):
    algorithm = "hierarchical-ring"


class Direct(AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, ScheduleBackend):
    algorithm = "direct"


class NcclRing(AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, ScheduleBackend):
    """NCCL's ring (``nccl-ring``) with one cell per element, in the layout
    of :func:`collspec.models.bits.schedule_options`: its results are what
    :func:`collspec.models.bits.predict` says, bit for bit."""

    algorithm = "nccl-ring"

    def schedule_for(self, collective: str, elements: int, itemsize: int, **options):
        from ..models.bits import schedule_options

        per_rank = collective in ("reduce_scatter", "allgather")
        count = max(1, elements // self.world_size if per_rank else elements)  # an empty buffer: one empty cell
        return self.schedule(collective, **schedule_options(self.algorithm, collective, itemsize, count), **options)

    def reduce_scatter_v(self, output, input, op: str = "sum") -> None:
        if input.numel() % self.world_size:
            raise NotImplementedError("nccl-ring: NCCL's reduce-scatter takes equal blocks only")
        super().reduce_scatter_v(output, input, op)

    def all_gather_v(self, output, input) -> None:
        if output.numel() % self.world_size:
            raise NotImplementedError("nccl-ring: NCCL's all-gather takes equal blocks only")
        super().all_gather_v(output, input)


__all__ = [
    "BinaryTree",
    "Direct",
    "HalvingDoubling",
    "HierarchicalRing",
    "MIXINS",
    "NcclRing",
    "RecursiveDoubling",
    "Ring",
    "SharedMemory",
    "SharedMemoryOneShot",
    "SharedMemoryTwoShot",
]
