"""A shared-memory all-reduce for ranks on one machine: the CPU stand-in for
the custom GPU kernels users bring (one-shot and two-shot all-reduce).

Memory. At start-up rank 0 creates one ``multiprocessing.shared_memory``
segment, named from a random run id that it broadcasts over
torch.distributed; every rank maps it, and once all have (a
torch.distributed barrier) rank 0 unlinks the name. The mapping stays valid
until each rank closes it, so a rank that crashes or is killed leaves
nothing behind in ``/dev/shm``. Layout: three progress counters per rank
(one 64-byte line each), then ``depth`` *staging* buffers of ``capacity``
bytes per rank, then ``depth`` *result* buffers of ``capacity`` bytes.

Chunks. Every collective cuts its tensor into chunks of at most one buffer
and gives each chunk the next number g of a sequence all ranks share (every
rank makes the same calls with the same sizes). Chunk g uses buffer
g mod ``depth``. Each rank publishes how far it has got in three counters:

- STAGED = g + 1: its contribution to chunk g is in its staging buffer;
- REDUCED = g + 1: it has finished reading the staging buffers of chunk g
  (and, in two-shot, written its slice of the result buffer);
- GATHERED = g + 1: it has finished reading the result buffer of chunk g.

- **one-shot** chunk: stage the whole chunk, wait until every rank has
  STAGED it, reduce all staging buffers in rank order (0, 1, ..., N-1)
  straight into the output: every rank performs the same operations on the
  same bits and gets identical bits. One synchronisation per chunk.
- **two-shot** chunk: stage; rank r reduces slice r of the chunk (near-equal
  slices, :func:`~.cells.near_equal`) in rank order into the shared result
  buffer, reading its own contribution from its input; then every rank
  copies the whole result buffer out. Each slice is computed once and only
  copied, so the ranks agree bit for bit.

Pipelining. Two-shot runs a software pipeline: in step i a rank stages chunk
i, reduces its slice of chunk i - 1 and copies out chunk i - 2, so while one
rank reduces, another is still staging and a third copying out. Every wait
names a step that comes earlier in this order on every rank (staging waits
for chunk g - depth to be REDUCED everywhere, reducing for chunk g to be
STAGED and chunk g - depth GATHERED, copying out for chunk g to be
REDUCED), so the pipeline cannot deadlock for ``depth`` >= 2. (The
compiled path also cuts a message of one buffer or less into up to four
chunks of at least 64 KiB, so that 1 MiB flows through the pipeline too.) A wait is
not always met when reached (reducing chunk g may find a peer still
copying out chunk g - depth), which is why every counter update wakes.

Reductions are numpy ufuncs (``np.add(a, b, out=...)``) on views of the
segment and of the caller's tensor: no temporary copies, one thread per
rank (numpy's element-wise loops never start threads, unlike torch's
intra-op pool, whose OpenMP workers spin after each parallel region and,
with four ranks on two cores, took the cores from the ranks they waited
for). float16 and bfloat16 are formed in float32 and rounded once per hop,
as torch does. Integer ``avg`` reduces :class:`.Reduction`'s (q, r) working
pairs; ``avg`` finishes through :meth:`.Reduction.finish`, the one
definition of its rounding.

Waiting. A rank that finds a counter behind spins on it for ``spin``
seconds, then sleeps on it with a futex (:mod:`.futex`); every counter
update wakes the sleepers. The default spin is 50 us when the ranks'
allowed cores are at least as many as the ranks, and 0 otherwise: with
fewer cores than ranks the rank being waited for may need this very core,
so any spinning delays it (the previous version's yield-then-sleep loop
spent 85% of a 4 KiB all-reduce asleep in ``time.sleep``). The compiled
path then yields the core :data:`YIELDS` times before it sleeps: with
fewer cores than ranks the peer it waits for is often next in line for
this core, and a yield hands it over without a sleep and a wake-up (4 ranks
on 2 cores, 1 KiB: ~12 us a call instead of ~40). A futex, unlike
an eventfd or a semaphore, needs no file descriptor passed between the
processes and lets any number of readers wait on one writer's counter.

Compiled path. The loop above runs in Python, and at 1-64 KiB its call
path (argument handling, three counter waits, futex calls through ctypes,
numpy calls: ~25 us of CPU per call) cost more than Open MPI's whole
all-reduce. ``impl/_shmkernel.c``, built by the install when a C compiler
is there, runs the same protocol on the same words: the whole all-reduce
of a float32, float64, int8, uint8, int32 or int64 tensor (a strided one
through a contiguous copy, so the path never depends on one rank's
layout) for sum, prod, min and max in one call (GIL released; a signal
whose handler raises ends its waits), and the counters' post and wait for every
other call. Each counter there has a sleeper count beside it, so a post
calls FUTEX_WAKE only when a peer sleeps. Its folds perform numpy's
operations in the same order (``-ffp-contract=off``), so the two paths
give the same bits, up to which NaN an operation on two NaNs returns
(IEEE 754 leaves that open). The ranks check at start-up that they
agree on mode, capacity, depth, barrier and path;
``compiled=False`` forces the numpy path, which float16, bfloat16 and
``avg`` always take.

Memory ordering. A counter is one aligned int32, stored with a single
4-byte store and polled by peers. On x86-64 (TSO) stores become visible to
other cores in program order and loads are not reordered with older loads,
so "write the buffer, then the counter" in one process and "see the counter,
then read the buffer" in another are ordered. On other architectures (ARM
and POWER reorder stores) this is not guaranteed, so there every wait is a
``torch.distributed.barrier()`` instead (the ranks make the same waits in
the same order); ``barrier="dist"`` forces that everywhere. A peer that does
not arrive within ``timeout`` seconds raises ``TimeoutError`` naming it.
"""

from __future__ import annotations

import functools
import os
import platform
import socket
import sys
import time
import uuid
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import ml_dtypes
import numpy as np
import torch
import torch.distributed as dist

from . import futex
from .cells import near_equal

try:  # the compiled hot path (impl/_shmkernel.c), built by the install when a C compiler is there
    from . import _shmkernel
except ImportError:  # pragma: no cover - depends on the install
    _shmkernel = None
from .reduction import Reduction

FLAG_BYTES = 64  # one cache line per counter
DEFAULT_CAPACITY = 1 << 20  # bytes per staging / result buffer: the largest chunk
DEFAULT_DEPTH = 3  # buffers per rank: chunks in flight
ONE_SHOT_LIMIT = 64 << 10  # auto mode, numpy path: one-shot up to this many bytes, two-shot above
# auto mode, compiled path: its synchronisations are cheap, so two-shot's
# smaller share of the reduction per rank wins above 8 KiB (bench/shm_vs_mpi.py,
# 4 ranks on 2 cores, 16 KiB: 0.28-0.31 of Open MPI's time with this limit,
# 0.42-0.47 with 16 KiB; 64 KiB: ~0.46 against ~0.98 with 64 KiB)
COMPILED_ONE_SHOT_LIMIT = 8 << 10
DEFAULT_TIMEOUT = 120.0
DEFAULT_SPIN = 50e-6  # seconds a waiter polls before it sleeps, when every rank has a core
YIELDS = 8  # compiled path: times a waiter yields its core (after the spin) before it sleeps
STAGED, REDUCED, GATHERED = range(3)
COUNTER_NAMES = ("STAGED", "REDUCED", "GATHERED")
UFUNCS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


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
    views.clear()  # the arrays over the mapping must go first
    try:
        segment.close()
    except BufferError:
        pass  # a view is still referenced (say, by a traceback); the OS unmaps it at exit, and the name is long unlinked


def _int32(value: int) -> int:
    """``value`` mod 2**32 as a signed int32 (counters wrap)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _reached(seen: int, wanted: int) -> bool:
    """Whether counter value ``seen`` is at or past ``wanted``, modulo 2**32."""
    return (seen - wanted) & 0xFFFFFFFF < 1 << 31


class Counters:
    """The ranks' progress counters in shared memory, with spin-then-futex waits."""

    def __init__(self, words: np.ndarray, rank: int, world_size: int, timeout: float, spin: float):
        self.words, self.address = memoryview(words), words.ctypes.data
        self.rank, self.world_size, self.timeout, self.spin = rank, world_size, timeout, spin
        index = [[(c * world_size + r) * FLAG_BYTES // 4 for r in range(world_size)] for c in range(len(COUNTER_NAMES))]
        self._mine = [row[rank] for row in index]
        self._others = [[(i, r) for r, i in enumerate(row) if r != rank] for row in index]

    def post(self, counter: int, value: int) -> None:
        """Publish this rank's ``counter`` = ``value`` and wake whoever sleeps on it.

        Every post wakes: a wait is not always already met when reached (a
        two-shot reduce waits for a peer's GATHERED, which that peer may post
        while the waiter sleeps), and a post without a wake left such a
        sleeper asleep until its timeout."""
        index = self._mine[counter]
        self.words[index] = _int32(value)
        futex.wake(self.address + 4 * index)

    def wait(self, counter: int, value: int) -> None:
        """Return once every rank's ``counter`` has reached ``value``."""
        words = self.words
        for index, rank in self._others[counter]:
            if (words[index] - value) & 0xFFFFFFFF >= 1 << 31:  # not _reached: inlined, this runs on every call
                self._wait_for(counter, rank, index, value)

    def _wait_for(self, counter: int, rank: int, index: int, value: int) -> None:
        """Spin, then sleep, until the word at ``index`` reaches ``value``.

        The futex sleeps only while the word still holds ``seen``, so
        ``seen`` must be a value that has not reached ``value``: it is
        re-read and re-checked right before every sleep. (Sleeping on a value
        read after the check, one that may already be the awaited one, slept
        until the next post or the timeout: the intermittent hang of the
        two-shot all-reduce with fewer cores than ranks.)"""
        words = self.words
        if self.spin:
            until = time.perf_counter() + self.spin
            while time.perf_counter() < until:
                if _reached(words[index], value):
                    return
        deadline = time.monotonic() + self.timeout
        while True:
            seen = words[index]
            if _reached(seen, value):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out(counter, rank, value)
            futex.wait(self.address + 4 * index, seen, left)


    def _timed_out(self, counter: int, rank: int, value: int) -> TimeoutError:
        return TimeoutError(f"shm: rank {self.rank} waited {self.timeout:g} s for rank {rank}'s "
                            f"{COUNTER_NAMES[counter]} to reach {value}; did a rank die?")


class CompiledCounters(Counters):
    """:class:`Counters` through the compiled module: the same words, plus a
    sleeper count beside each, so a post makes a system call only when
    someone sleeps (see impl/_shmkernel.c). Every rank of one instance uses
    the same kind of counters (they agree at start-up)."""

    def post(self, counter: int, value: int) -> None:
        _shmkernel.post(self.address + 4 * self._mine[counter], value)

    def _wait_for(self, counter: int, rank: int, index: int, value: int) -> None:
        if not _shmkernel.wait(self.address + 4 * index, value, int(self.spin * 1e9), YIELDS, int(self.timeout * 1e9)):
            raise self._timed_out(counter, rank, value)


class DistBarrier:
    """Every wait as torch.distributed.barrier() (any architecture); posts are no-ops."""

    def __init__(self, group=None):
        self.group = group

    def post(self, counter: int, value: int) -> None:
        pass

    def wait(self, counter: int, value: int) -> None:
        dist.barrier(group=self.group)


@dataclass
class _Kind:
    """How one (op, dtype) runs: the reduction, its ufunc and the typed buffers."""

    reduction: Reduction | None
    ufunc: np.ufunc | None
    pairs: bool  # Reduction's (q, r) int64 working pairs (integer avg)
    staging: list  # [rank][buffer] arrays in the working form
    result: list  # [buffer] arrays of the tensor's type
    elements: int  # working elements per buffer
    average: bool  # op avg: finish through Reduction.finish

    def __post_init__(self):
        self.by_buffer = [list(column) for column in zip(*self.staging)]  # [buffer][rank]


class SharedMemory:
    """One-shot / two-shot all-reduce over shared memory (plug-in protocol).

    ``mode``: ``"one-shot"``, ``"two-shot"`` or ``"auto"`` (one-shot up to
    :data:`COMPILED_ONE_SHOT_LIMIT` bytes on the compiled path,
    :data:`ONE_SHOT_LIMIT` on the numpy path). ``capacity``: bytes per buffer (the
    largest chunk); ``depth``: buffers per rank (chunks in flight, >= 3).
    ``barrier``: ``"flags"`` (counters and futexes; x86-64 only, the default
    there) or ``"dist"``. ``spin``: seconds to poll before sleeping (default
    as in the module text). ``compiled``: run the counters and the
    all-reduce of float32/64 and integer sum/prod/min/max through the
    compiled module (True: required; False: the numpy path only; None, the
    default: when every rank has it). The two paths give the same bits.
    """

    mode = "auto"

    def __init__(
        self,
        rank: int,
        world_size: int,
        *,
        mode: str | None = None,
        capacity: int = DEFAULT_CAPACITY,
        depth: int = DEFAULT_DEPTH,
        timeout: float = DEFAULT_TIMEOUT,
        barrier: str | None = None,
        spin: float | None = None,
        compiled: bool | None = None,
        group=None,
    ):
        if mode is not None:
            if mode not in ("one-shot", "two-shot", "auto"):
                raise ValueError(f"mode must be 'one-shot', 'two-shot' or 'auto', not {mode!r}")
            self.mode = mode
        if depth < 3:
            raise ValueError(f"depth must be at least 3, not {depth}")
        kind = barrier or ("flags" if platform.machine().lower() in ("x86_64", "amd64") and futex.available() else "dist")
        if kind not in ("flags", "dist"):
            raise ValueError(f"barrier must be 'flags' or 'dist', not {kind!r}")
        if not dist.is_initialized():
            raise RuntimeError("shm: initialise torch.distributed first; the ranks exchange the segment name through it")
        if dist.get_world_size(group) != world_size:
            raise ValueError(f"world_size {world_size} differs from the process group's {dist.get_world_size(group)}")
        if compiled and kind == "dist":
            raise ValueError("shm: compiled=True needs barrier='flags' (the compiled path waits on the counters)")
        if compiled and _shmkernel is None:
            raise RuntimeError("shm: compiled=True but collspec.impl._shmkernel is not built; reinstall with a C compiler (make install)")
        # every rank must run the same protocol on the same layout: the settings must agree
        settings = {"mode": self.mode, "capacity": capacity, "depth": depth, "barrier": kind, "compiled": compiled}
        places = [None] * world_size
        dist.all_gather_object(places, (socket.gethostname(), sorted(os.sched_getaffinity(0)), _shmkernel is not None, settings), group=group)
        if len({host for host, _, _, _ in places}) > 1:
            raise RuntimeError(f"shm: every rank must run on one machine; the ranks are on {sorted({host for host, _, _, _ in places})}")
        for name, value in settings.items():
            theirs = [other[name] for _, _, _, other in places]
            if any(v != value for v in theirs):
                raise ValueError(f"shm: the ranks disagree on {name} ({', '.join(f'rank {r}: {v!r}' for r, v in enumerate(theirs))}); pass the same settings on every rank")
        if compiled and not all(built for _, _, built, _ in places):
            raise RuntimeError(f"shm: compiled=True but ranks {[r for r, (_, _, built, _) in enumerate(places) if not built]} lack collspec.impl._shmkernel")
        self.compiled = kind == "flags" and compiled is not False and all(built for _, _, built, _ in places)
        cores = len({core for _, mine, _, _ in places for core in mine})
        self.rank, self.world_size, self.group, self.depth = rank, world_size, group, depth
        self.spin = (DEFAULT_SPIN if cores >= world_size else 0.0) if spin is None else spin
        # every buffer holds at least one element per rank in the widest working form (16-byte pairs)
        self.capacity = max(capacity // 64 * 64, -(-world_size * 16 // 64) * 64)
        header = 3 * world_size * FLAG_BYTES
        self._staging_at, self._result_at = header, header + world_size * depth * self.capacity
        size = self._result_at + depth * self.capacity
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
        self._bytes = np.frombuffer(self._segment.buf, dtype=np.uint8, count=size)
        words = np.frombuffer(self._segment.buf, dtype=np.int32, count=header // 4)
        self._views = [self._bytes, words]
        self._finalizer = weakref.finalize(self, _release, self._segment, self._views)
        if kind == "dist":
            self._sync = DistBarrier(group)
        else:
            self._sync = (CompiledCounters if self.compiled else Counters)(words, rank, world_size, timeout, self.spin)
        self._kinds: dict = {}
        # the compiled all-reduce: its view of the segment, and (type, op, item size) by (op, dtype)
        self._layout = (self._bytes.ctypes.data, rank, world_size, depth, self.capacity, self._staging_at, self._result_at,
                        int(self.spin * 1e9), YIELDS, int(timeout * 1e9))
        self._compiled_codes = _compiled_codes(world_size) if self.compiled else {}
        self._seq = 0  # chunks so far, the same on every rank

    def close(self) -> None:
        """Unmap the segment (also done when the object is collected); a
        collective after this raises RuntimeError."""
        self._bytes = self._sync = None
        self._kinds.clear()
        self._compiled_codes = {}
        self._finalizer()

    def _check(self, *tensors: torch.Tensor) -> None:
        """Refuse a closed instance and tensors that are not in CPU memory
        (CUDA, meta, ...): the segment and the folds work on host pointers."""
        if self._sync is None:
            raise RuntimeError("shm: this instance is closed; create a new one")
        for t in tensors:
            if t.device.type != "cpu":
                raise TypeError(f"shm: CPU tensors only, not {t.device.type}")

    # -- buffers -------------------------------------------------------------------------

    def _kind(self, op: str | None, dtype: torch.dtype) -> _Kind:
        """The cached plan for reducing (``op``) or copying (None) ``dtype``."""
        key = (op, dtype)
        if key not in self._kinds:
            reduction = Reduction(op, dtype, self.world_size) if op is not None else None
            pairs = reduction is not None and reduction.exact_mean
            final = _numpy_dtype(dtype)
            working = np.dtype(np.int64) if pairs else final

            def typed(start: int, as_type: np.dtype, rows: bool) -> np.ndarray:
                array = self._bytes[start : start + self.capacity].view(as_type)
                return array.reshape(-1, 2) if rows else array

            staging = [[typed(self._staging_at + (r * self.depth + b) * self.capacity, working, pairs) for b in range(self.depth)]
                       for r in range(self.world_size)]
            result = [typed(self._result_at + b * self.capacity, final, False) for b in range(self.depth)]
            ufunc = UFUNCS[op] if op is not None else None
            self._kinds[key] = _Kind(reduction, ufunc, pairs, staging, result, staging[0][0].shape[0], op == "avg")
        return self._kinds[key]

    def _next(self) -> int:
        g, self._seq = self._seq, self._seq + 1
        return g

    # -- the steps of one chunk ----------------------------------------------------------------

    def _stage(self, kind: _Kind, g: int, piece: np.ndarray, skip: tuple[int, int] | None = None) -> np.ndarray:
        """Copy ``piece`` (but its rows ``skip``) into this rank's staging buffer of chunk ``g``."""
        self._sync.wait(REDUCED, g - self.depth + 1)  # everyone has read this buffer's previous chunk
        buffer = kind.staging[self.rank][g % self.depth][: piece.shape[0]]
        if skip is None:
            np.copyto(buffer, piece)
        else:
            np.copyto(buffer[: skip[0]], piece[: skip[0]])
            np.copyto(buffer[skip[1] :], piece[skip[1] :])
        self._sync.post(STAGED, g + 1)
        return buffer

    def _fold(self, kind: _Kind, parts: list[np.ndarray], out: np.ndarray) -> None:
        """``out`` = parts[0] op parts[1] op ... in rank order; the result of the
        reduction in ``out`` (finished for avg)."""
        acc = np.empty(parts[0].shape, parts[0].dtype) if kind.pairs else out
        if len(parts) == 1:
            np.copyto(acc, parts[0])
        else:
            kind.ufunc(parts[0], parts[1], out=acc)
            for part in parts[2:]:
                kind.ufunc(acc, part, out=acc)
        if kind.average:
            kind.reduction.finish(_torch(acc), _torch(out))

    def _one_shot(self, kind: _Kind, src: np.ndarray, out: np.ndarray) -> None:
        sync = self._sync
        for at in range(0, out.shape[0], kind.elements):
            g = self._next()
            piece = src[at : at + kind.elements]
            rows = piece.shape[0]
            self._stage(kind, g, piece)
            sync.wait(STAGED, g + 1)
            self._fold(kind, [buffer[:rows] for buffer in kind.by_buffer[g % self.depth]], out[at : at + rows])
            sync.post(REDUCED, g + 1)
            sync.post(GATHERED, g + 1)

    def _two_shot(self, kind: _Kind, src: np.ndarray, out: np.ndarray) -> None:
        step, r = kind.elements, self.rank
        chunks = -(-out.shape[0] // step)
        first = self._seq
        self._seq += chunks
        for i in range(chunks + 2):
            if i < chunks:  # stage chunk i: every slice but this rank's, which it reduces from its input
                piece = src[i * step : (i + 1) * step]
                edges = _edges(piece.shape[0], self.world_size)
                self._stage(kind, first + i, piece, (edges[r], edges[r + 1]))
            if 1 <= i <= chunks:  # reduce this rank's slice of chunk i - 1 into the result buffer
                g, piece = first + i - 1, src[(i - 1) * step : i * step]
                edges = _edges(piece.shape[0], self.world_size)
                a, b = edges[r], edges[r + 1]
                self._sync.wait(STAGED, g + 1)
                self._sync.wait(GATHERED, g - self.depth + 1)  # everyone has copied out this buffer's previous chunk
                buffer = g % self.depth
                parts = [piece[a:b] if j == r else kind.staging[j][buffer][a:b] for j in range(self.world_size)]
                self._fold(kind, parts, kind.result[buffer][a:b])
                self._sync.post(REDUCED, g + 1)
            if i >= 2:  # copy chunk i - 2 out
                g, target = first + i - 2, out[(i - 2) * step : (i - 1) * step]
                self._sync.wait(REDUCED, g + 1)
                np.copyto(target, kind.result[g % self.depth][: target.shape[0]])
                self._sync.post(GATHERED, g + 1)

    # -- the collectives ---------------------------------------------------------------

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> None:
        self._check(tensor)
        code = self._compiled_codes.get((op, tensor.dtype))
        if code is not None:  # the whole call in compiled code; the choice depends only on what every rank shares
            flat = tensor if tensor.is_contiguous() else tensor.contiguous()
            count = flat.numel()
            two_shot = self.mode == "two-shot" or (self.mode == "auto" and count * code[2] > COMPILED_ONE_SHOT_LIMIT)
            self._seq = _shmkernel.all_reduce(self._layout, self._seq, flat.data_ptr(), count, code[0], code[1], int(two_shot))
            if flat is not tensor:
                tensor.copy_(flat)
            return
        kind = self._kinds.get((op, tensor.dtype)) or self._kind(op, tensor.dtype)
        flat = tensor.reshape(-1)  # a view when contiguous
        out = _numpy(flat)
        src = kind.reduction.working(flat, copy=True).numpy() if kind.pairs else out
        one_shot = self.mode == "one-shot" or (self.mode == "auto" and out.nbytes <= ONE_SHOT_LIMIT)
        if out.shape[0]:
            (self._one_shot if one_shot else self._two_shot)(kind, src, out)
        if not tensor.is_contiguous():
            tensor.copy_(flat.view(tensor.shape))

    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, op: str = "sum") -> None:
        n, m = self.world_size, output.numel()
        if input.numel() % n:
            raise NotImplementedError(f"shm reduce_scatter: {input.numel()} elements do not split evenly over {n} ranks; unequal blocks are not supported")
        if input.numel() != n * m:
            raise ValueError(f"reduce_scatter: input has {input.numel()} elements; it needs world_size * output = {n} * {m}")
        self._check(input, output)
        kind = self._kind(op, input.dtype)
        flat = output.reshape(-1)
        out = _numpy(flat)
        blocks = input.reshape(n, m)
        src = kind.reduction.working(blocks, copy=True).numpy().reshape(n, m, 2) if kind.pairs else _numpy(blocks)
        width = max(1, kind.elements // n)
        for at in range(0, m, width):  # one chunk: every rank stages its n strips side by side
            g = self._next()
            part = src[:, at : at + width]
            w = part.shape[1]
            self._stage(kind, g, part.reshape(n * w, *part.shape[2:]))
            self._sync.wait(STAGED, g + 1)
            strips = [kind.staging[j][g % self.depth][self.rank * w : (self.rank + 1) * w] for j in range(n)]
            self._fold(kind, strips, out[at : at + w])
            self._sync.post(REDUCED, g + 1)
            self._sync.post(GATHERED, g + 1)
        if not output.is_contiguous():
            output.copy_(flat.view(output.shape))

    def all_gather(self, output: torch.Tensor, input: torch.Tensor) -> None:
        n, m = self.world_size, input.numel()
        if output.numel() % n:
            raise NotImplementedError(f"shm all_gather: {output.numel()} elements do not split evenly over {n} ranks; unequal blocks are not supported")
        if output.numel() != n * m:
            raise ValueError(f"all_gather: output has {output.numel()} elements; it needs world_size * input = {n} * {m}")
        self._check(input, output)
        kind = self._kind(None, input.dtype)
        source = _numpy(input.reshape(-1).clone())  # input may alias output
        flat = output.reshape(-1)
        out = _numpy(flat).reshape(n, m)
        for at in range(0, m, kind.elements):
            g = self._next()
            piece = source[at : at + kind.elements]
            self._stage(kind, g, piece)
            self._sync.wait(STAGED, g + 1)
            for j in range(n):
                np.copyto(out[j, at : at + piece.shape[0]], kind.staging[j][g % self.depth][: piece.shape[0]])
            self._sync.post(REDUCED, g + 1)
            self._sync.post(GATHERED, g + 1)
        if not output.is_contiguous():
            output.copy_(flat.view(output.shape))


@functools.lru_cache(maxsize=64)
def _compiled_codes(world_size: int) -> dict:
    """{(op, torch dtype): (type index, op index, item size)} for what the
    compiled all-reduce does, among what the numpy path accepts (so no
    dtype works on one path and fails on the other)."""
    codes = {}
    for t, name in enumerate(_shmkernel.TYPES):
        dtype = getattr(torch, name)
        for o, op in enumerate(_shmkernel.OPS):
            try:
                Reduction(op, dtype, world_size)
            except Exception:  # noqa: BLE001 - not a combination collspec specifies
                continue
            codes[(op, dtype)] = (t, o, dtype.itemsize)
    return codes


@functools.lru_cache(maxsize=256)
def _edges(count: int, parts: int) -> tuple[int, ...]:
    return tuple(near_equal(count, parts).tolist())


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return _numpy(torch.empty(0, dtype=dtype)).dtype


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy view of a contiguous CPU tensor (bfloat16 as ml_dtypes')."""
    if tensor.dtype == torch.bfloat16:
        return tensor.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.detach().numpy()


def _torch(array: np.ndarray) -> torch.Tensor:
    """A torch view of a numpy array (the inverse of :func:`_numpy`)."""
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)




class SharedMemoryOneShot(SharedMemory):
    """Always one-shot: one synchronisation, every rank reduces every slot in rank order."""

    mode = "one-shot"


class SharedMemoryTwoShot(SharedMemory):
    """Always two-shot: each rank reduces its slice into the result buffer, then everyone copies it out."""

    mode = "two-shot"
