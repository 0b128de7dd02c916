"""A shared-memory all-reduce for ranks on one machine: the CPU stand-in for
the custom GPU kernels users bring (one-shot and two-shot all-reduce).

Memory. At start-up rank 0 creates one ``multiprocessing.shared_memory``
segment, named from a random run id that it broadcasts over
torch.distributed; every rank maps it, and once all have (a
torch.distributed barrier) rank 0 unlinks the name. The mapping stays valid
until each rank closes it, so a rank that crashes or is killed leaves
nothing behind in ``/dev/shm``. Layout: one 64-byte flag line per rank, then
two sets of one slot of ``capacity`` bytes per rank.

Rounds. Every operation is a sequence of rounds. In round k each rank
writes its slot of set k mod 2, *arrives* (publishes k + 1 in its flag),
*waits* until every flag is at least k + 1, then reads any slots of set
k mod 2. Two sets suffice without a second barrier: a rank writes set s
again in round k + 2 only after waiting in round k + 1, when every rank has
arrived there and has therefore finished reading round k.

- **one-shot** all-reduce: one round; every rank reduces all slots in the
  same fixed order (rank 0, 1, ..., N-1), so every rank performs the same
  operations on the same bits and gets identical bits;
- **two-shot** all-reduce: a reduce-scatter round (rank r reduces slice r of
  all slots, in rank order) and an all-gather round (everyone copies every
  rank's finished slice): each slice is computed once and only copied;
- ``reduce_scatter`` and ``all_gather`` are those rounds on their own, on
  equal blocks only (a ValueError otherwise); there are no ``_v`` methods,
  so conformance reports unequal blocks as not applicable to shm.

Tensors larger than a slot go through in pieces of one slot each.

Flags and memory ordering. A flag is one aligned int64, written with a
single 8-byte store (numpy item assignment) and polled by peers. Python
exposes no memory fences, so the protocol relies on the hardware: on x86-64
(TSO) stores become visible to other cores in program order and loads are
not reordered with older loads, so "write the slot, then the flag" in one
process and "see the flag, then read the slot" in another are ordered.
Writes made by torch's worker threads are ordered before the flag store by
the join that ends the parallel region. On other architectures (ARM and
POWER reorder stores) this is not guaranteed, so there the phase barrier is
a ``torch.distributed.barrier()`` instead, whose socket round trips through
the kernel order memory. ``barrier="dist"`` forces that everywhere.
Waiting spins on ``os.sched_yield`` then sleeps, so ranks that share cores
let each other run; a peer that does not arrive within ``timeout`` seconds
raises ``TimeoutError`` naming it.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
import uuid
import weakref
from contextlib import contextmanager
from multiprocessing import resource_tracker, shared_memory

import numpy as np
import torch
import torch.distributed as dist

from .cells import near_equal
from .reduction import Reduction

FLAG_BYTES = 64  # one cache line per rank's flag
DEFAULT_CAPACITY = 1 << 20  # bytes per slot
ONE_SHOT_LIMIT = 256 << 10  # auto mode: one-shot up to this many bytes, two-shot above
DEFAULT_TIMEOUT = 120.0


@contextmanager
def _untracked():
    """Attach without registering with multiprocessing's resource tracker
    (Python < 3.13 registers every attach, and the tracker would then unlink
    or warn about a segment this process does not own)."""
    register = resource_tracker.register
    resource_tracker.register = lambda name, rtype: None
    try:
        yield
    finally:
        resource_tracker.register = register


def _attach(name: str) -> shared_memory.SharedMemory:
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name, track=False)
    with _untracked():
        return shared_memory.SharedMemory(name)


def _release(segment: shared_memory.SharedMemory, views: list) -> None:
    views.clear()  # the tensors and arrays over the mapping must go first
    try:
        segment.close()
    except BufferError:
        pass  # a view is still referenced (say, by a traceback); the OS unmaps it at exit, and the name is long unlinked


class FlagBarrier:
    """Arrive/wait on per-rank counters in shared memory (see module text)."""

    def __init__(self, flags: np.ndarray, rank: int, timeout: float):
        self.flags, self.rank, self.timeout = flags, rank, timeout

    def arrive(self, epoch: int) -> None:
        self.flags[self.rank] = epoch

    def wait(self, epoch: int) -> None:
        flags = self.flags
        if (flags >= epoch).all():
            return
        deadline = time.monotonic() + self.timeout
        spins = 0
        while not (flags >= epoch).all():
            spins += 1
            if spins < 200:
                os.sched_yield()
            else:
                time.sleep(min(1e-3, 1e-5 * (spins - 199)))
            if spins % 64 == 0 and time.monotonic() > deadline:
                late = [int(r) for r in np.flatnonzero(flags < epoch)]
                raise TimeoutError(f"shm: rank {self.rank} waited {self.timeout:g} s for rank(s) {late} in round {epoch - 1}; did a rank die?")


class DistBarrier:
    """The phase barrier as torch.distributed.barrier() (any architecture)."""

    def __init__(self, group=None):
        self.group = group

    def arrive(self, epoch: int) -> None:
        pass

    def wait(self, epoch: int) -> None:
        dist.barrier(group=self.group)


class SharedMemory:
    """One-shot / two-shot all-reduce over shared memory (plug-in protocol).

    ``mode``: ``"one-shot"``, ``"two-shot"`` or ``"auto"`` (one-shot up to
    :data:`ONE_SHOT_LIMIT` bytes). ``capacity``: bytes per slot.
    ``barrier``: ``"flags"`` (x86-64 only; the default there) or ``"dist"``.
    """

    mode = "auto"

    def __init__(
        self,
        rank: int,
        world_size: int,
        *,
        mode: str | None = None,
        capacity: int = DEFAULT_CAPACITY,
        timeout: float = DEFAULT_TIMEOUT,
        barrier: str | None = None,
        group=None,
    ):
        if mode is not None:
            if mode not in ("one-shot", "two-shot", "auto"):
                raise ValueError(f"mode must be 'one-shot', 'two-shot' or 'auto', not {mode!r}")
            self.mode = mode
        if not dist.is_initialized():
            raise RuntimeError("shm: initialise torch.distributed first; the ranks exchange the segment name through it")
        if dist.get_world_size(group) != world_size:
            raise ValueError(f"world_size {world_size} differs from the process group's {dist.get_world_size(group)}")
        hosts = [None] * world_size
        dist.all_gather_object(hosts, socket.gethostname(), group=group)
        if len(set(hosts)) > 1:
            raise RuntimeError(f"shm: every rank must run on one machine; the ranks are on {sorted(set(hosts))}")
        self.rank, self.world_size, self.group = rank, world_size, group
        self.capacity = max(64, capacity // 64 * 64)
        self._slots_at = -(-world_size * FLAG_BYTES // 64) * 64
        size = self._slots_at + 2 * world_size * self.capacity
        name = [f"collspec-{uuid.uuid4().hex[:16]}" if rank == 0 else None]
        dist.broadcast_object_list(name, group=group, group_src=0)
        self.name = name[0]  # of the segment; unlinked once every rank has mapped it
        if rank == 0:
            self._segment = shared_memory.SharedMemory(name[0], create=True, size=size)
        dist.barrier(group=group)
        if rank != 0:
            self._segment = _attach(name[0])
        dist.barrier(group=group)
        if rank == 0:
            self._segment.unlink()  # every rank has it mapped; nothing to leak from here on
        self._bytes = torch.frombuffer(self._segment.buf, dtype=torch.uint8, count=size)
        flags = np.frombuffer(self._segment.buf, dtype=np.int64, count=self._slots_at // 8)[:: FLAG_BYTES // 8][:world_size]
        self._views = [self._bytes, flags]
        self._finalizer = weakref.finalize(self, _release, self._segment, self._views)
        kind = barrier or ("flags" if platform.machine().lower() in ("x86_64", "amd64") else "dist")
        if kind not in ("flags", "dist"):
            raise ValueError(f"barrier must be 'flags' or 'dist', not {kind!r}")
        self._barrier = FlagBarrier(flags, rank, timeout) if kind == "flags" else DistBarrier(group)
        self._round = 0

    def close(self) -> None:
        """Unmap the segment (also done when the object is collected)."""
        self._bytes = self._barrier = None
        self._finalizer()

    # -- rounds ------------------------------------------------------------------

    def _slot(self, round: int, rank: int, dtype: torch.dtype, count: int) -> torch.Tensor:
        """The first ``count`` elements of ``rank``'s slot in ``round``'s set."""
        start = self._slots_at + ((round % 2) * self.world_size + rank) * self.capacity
        return self._bytes[start : start + count * _itemsize(dtype)].view(dtype)

    def _exchange(self, piece: torch.Tensor, counts: list[int] | None = None) -> list[torch.Tensor]:
        """One round: publish ``piece`` (flat) in this rank's slot, wait for
        everyone, return every rank's slot (valid until the round after next)
        holding ``counts[r]`` elements (default: as many as ``piece``)."""
        k = self._round
        self._slot(k, self.rank, piece.dtype, piece.numel()).copy_(piece)
        self._round = k + 1
        self._barrier.arrive(k + 1)
        self._barrier.wait(k + 1)
        counts = counts or [piece.numel()] * self.world_size
        return [self._slot(k, r, piece.dtype, counts[r]) for r in range(self.world_size)]

    def _fold(self, parts: list[torch.Tensor], reduction: Reduction) -> torch.Tensor:
        """Reduce ``parts`` in rank order into a fresh working tensor."""
        acc = reduction.working(parts[0], copy=True)
        for part in parts[1:]:
            reduction.combine_(acc, reduction.working(part, copy=False))
        return acc

    def _piece(self, dtype: torch.dtype, per: int = 1) -> int:
        """Elements per piece when one slot holds ``per`` rows of it."""
        return max(1, self.capacity // (_itemsize(dtype) * per))

    # -- the collectives ---------------------------------------------------------------

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> None:
        reduction = _cpu_reduction(op, tensor, self.world_size)
        flat = tensor.reshape(-1)  # a view when contiguous
        one_shot = self.mode == "one-shot" or (self.mode == "auto" and tensor.numel() * tensor.element_size() <= ONE_SHOT_LIMIT)
        step = self._piece(tensor.dtype)
        for at in range(0, flat.numel(), step):
            piece = flat[at : at + step]
            if one_shot:
                reduction.finish(self._fold(self._exchange(piece), reduction), piece)
            else:
                self._two_shot(piece, reduction)
        if not tensor.is_contiguous():
            tensor.copy_(flat.view(tensor.shape))

    def _two_shot(self, piece: torch.Tensor, reduction: Reduction) -> None:
        edges = near_equal(piece.numel(), self.world_size).tolist()
        a, b = edges[self.rank], edges[self.rank + 1]
        slots = self._exchange(piece)
        reduction.finish(self._fold([s[a:b] for s in slots], reduction), piece[a:b])
        slots = self._exchange(piece[a:b], [edges[r + 1] - edges[r] for r in range(self.world_size)])
        for r in range(self.world_size):
            if r != self.rank:
                piece[edges[r] : edges[r + 1]].copy_(slots[r])

    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, op: str = "sum") -> None:
        n, m = self.world_size, output.numel()
        if input.numel() != n * m:
            raise ValueError(f"reduce_scatter: input has {input.numel()} elements; it needs world_size * output = {n} * {m}")
        reduction = _cpu_reduction(op, input, n)
        blocks = input.reshape(n, m)
        result = torch.empty(m, dtype=output.dtype)
        step = self._piece(input.dtype, n)
        for at in range(0, m, step):
            part = blocks[:, at : at + step]
            width = part.shape[1]
            slots = self._exchange(part.reshape(-1))  # a copy: the n strips side by side
            reduction.finish(self._fold([s[self.rank * width : (self.rank + 1) * width] for s in slots], reduction), result[at : at + width])
        output.copy_(result.view(output.shape))

    def all_gather(self, output: torch.Tensor, input: torch.Tensor) -> None:
        n, m = self.world_size, input.numel()
        if output.numel() != n * m:
            raise ValueError(f"all_gather: output has {output.numel()} elements; it needs world_size * input = {n} * {m}")
        if input.is_cuda or output.is_cuda:
            raise TypeError("shm: CPU tensors only")
        source = input.reshape(-1).clone()  # input may alias output (in place)
        result = torch.empty((n, m), dtype=output.dtype)
        step = self._piece(input.dtype)
        for at in range(0, m, step):
            slots = self._exchange(source[at : at + step])
            for r, slot in enumerate(slots):
                result[r, at : at + step] = slot
        output.copy_(result.view(output.shape))


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


def _cpu_reduction(op: str, tensor: torch.Tensor, ranks: int) -> Reduction:
    if tensor.is_cuda:
        raise TypeError("shm: CPU tensors only")
    return Reduction(op, tensor.dtype, ranks)


class SharedMemoryOneShot(SharedMemory):
    """Always one-shot: one round, every rank reduces every slot in rank order."""

    mode = "one-shot"


class SharedMemoryTwoShot(SharedMemory):
    """Always two-shot: reduce-scatter round, then all-gather round."""

    mode = "two-shot"
