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


__all__ = [
    "BinaryTree",
    "Direct",
    "HalvingDoubling",
    "HierarchicalRing",
    "MIXINS",
    "RecursiveDoubling",
    "Ring",
    "SharedMemory",
    "SharedMemoryOneShot",
    "SharedMemoryTwoShot",
]
