"""The built-in algorithms, by (algorithm, collective).

>>> sorted(ALGORITHMS["ring"])
['allgather', 'allreduce', 'broadcast', 'reduce', 'reduce_scatter']
>>> generate("ring", "allreduce", 4).transfers
24
"""

from __future__ import annotations

from typing import Callable

from ...spec.collectives import collective_name
from ..layout import ScheduleError
from ..program import Program
from ..schedule import Schedule
from . import direct, hierarchical, nccl_pat, nccl_ring, nccl_tree, recursive, ring, tree

#: algorithm -> collective -> generator(ranks, **options)
ALGORITHMS: dict[str, dict[str, Callable[..., Schedule]]] = {
    "ring": {
        "allreduce": ring.allreduce,
        "reduce_scatter": ring.reduce_scatter,
        "allgather": ring.allgather,
        "broadcast": ring.broadcast,
        "reduce": ring.reduce,
    },
    "ring-seed": {
        "allreduce": lambda n: ring.allreduce(n, "ring-seed"),
        "reduce_scatter": lambda n: ring.reduce_scatter(n, "ring-seed"),
    },
    "direct": {
        "allreduce": direct.allreduce,
        "reduce_scatter": direct.reduce_scatter,
        "allgather": direct.allgather,
        "alltoall": direct.alltoall,
        "broadcast": direct.broadcast,
        "reduce": direct.reduce,
    },
    "hub": {"allreduce": direct.hub_allreduce, "broadcast": direct.broadcast, "reduce": direct.reduce},
    "recursive-doubling": {"allreduce": recursive.rd_allreduce, "allgather": recursive.rd_allgather},
    "halving-doubling": {"allreduce": recursive.hd_allreduce, "reduce_scatter": recursive.hd_reduce_scatter},
    "binary-tree": {"allreduce": tree.allreduce, "reduce": tree.reduce, "broadcast": tree.broadcast},
    "hierarchical-ring": {"allreduce": hierarchical.allreduce},
    "nccl-ring": {c: nccl_ring.generator(c) for c in nccl_ring.BUILDERS},
    "nccl-tree": {"allreduce": nccl_tree.generate_tree},
    "nccl-pat": {c: nccl_pat.generator(c) for c in ("reduce_scatter", "allgather")},
}

#: algorithm -> collective -> the Program factory (options as keywords, no N):
#: the transfer functions the generators above enumerate and the proofs evaluate.
PROGRAMS: dict[str, dict[str, Callable[..., Program]]] = {
    "ring": {
        "allreduce": ring.allreduce_program,
        "reduce_scatter": ring.reduce_scatter_program,
        "allgather": ring.allgather_program,
        "broadcast": lambda root=0, chunks=None: ring.chain_program("broadcast", root, chunks),
        "reduce": lambda root=0, chunks=None: ring.chain_program("reduce", root, chunks),
    },
    "ring-seed": {
        "allreduce": lambda: ring.allreduce_program("ring-seed"),
        "reduce_scatter": lambda: ring.reduce_scatter_program("ring-seed"),
    },
    "direct": {
        "allreduce": lambda: direct.exchange_program("allreduce"),
        "reduce_scatter": lambda: direct.exchange_program("reduce_scatter"),
        "allgather": lambda: direct.exchange_program("allgather"),
        "alltoall": lambda: direct.exchange_program("alltoall"),
        "broadcast": direct.broadcast_program,
        "reduce": direct.reduce_program,
    },
    "hub": {"allreduce": direct.hub_program, "broadcast": direct.broadcast_program, "reduce": direct.reduce_program},
    "recursive-doubling": {"allreduce": recursive.rd_allreduce_program, "allgather": recursive.rd_allgather_program},
    "halving-doubling": {"allreduce": recursive.hd_allreduce_program, "reduce_scatter": recursive.hd_reduce_scatter_program},
    "binary-tree": {"allreduce": tree.allreduce_program, "reduce": tree.reduce_program, "broadcast": tree.broadcast_program},
    "hierarchical-ring": {"allreduce": hierarchical.program},
    "nccl-ring": {c: nccl_ring.program_factory(c) for c in nccl_ring.BUILDERS},
    "nccl-tree": {"allreduce": nccl_tree.program_factory},
    "nccl-pat": {c: nccl_pat.program_factory(c) for c in ("reduce_scatter", "allgather")},
}

MAX_RANKS = 1 << 16


def program(algorithm: str, collective: str, **options) -> Program:
    """The transfer function of a built-in algorithm for one collective."""
    return PROGRAMS[algorithm][collective_name(collective)](**options)


def generate(algorithm: str, collective: str, ranks: int, **options) -> Schedule:
    """The schedule of a built-in algorithm for one collective and rank count."""
    if algorithm not in ALGORITHMS:
        raise ScheduleError(f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    name = collective_name(collective)
    table = ALGORITHMS[algorithm]
    if name not in table:
        raise ScheduleError(f"{algorithm} has no {name} schedule; it has {', '.join(table)}")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= MAX_RANKS:
        raise ScheduleError(f"ranks must be an integer from 1 to {MAX_RANKS}, got {ranks!r}")
    try:
        return table[name](ranks, **options)
    except (TypeError, ValueError) as error:
        raise ScheduleError(f"{algorithm} {name}: {error}") from None
