"""NCCL 2.30's host-side rules for one collective: channel split and chunk size.

What NCCL 2.30.x decides on the host before its kernels run, for one
collective in a plan of its own, restated (docs/nccl.md cites each rule's
file and function):

- **Element size.** All-gather and broadcast are moved as bytes
  (``collTaskAppend`` in ``src/enqueue.cc`` turns their count into bytes
  of ``ncclInt8``); the other collectives keep the element type T.
- **Channel split** (``scheduleCollTasksToPlan``, ``src/enqueue.cc``). The
  vector (per rank for reduce-scatter and all-gather) is cut into *cells* of
  a fixed traffic size (32 KiB of traffic, divided by the collective's
  traffic per byte: 2 for all-reduce, N for reduce-scatter and all-gather, 1
  otherwise, times 4 for LL; rounded up to 16 bytes). Each channel gets
  about the traffic per channel (the collective's traffic, at least 32 KiB,
  over the channels; with LL that traffic is 4 times the bytes x traffic
  per byte, as ``ncclPrepareTasks`` multiplies an LL task's
  ``trafficBytes`` by 4), in whole cells: the first ("lo") and the middle
  channels get equal whole-cell parts, the last ("hi") the rest, and the
  element remainder comes off the last non-empty part. Small vectors use
  fewer channels than they may. The kernel reads the parts back with
  ``ncclCollCbdPart`` (``src/include/device.h``).
- **Chunk size** (``calcCollChunking``, ``src/enqueue.cc``), for rings: the
  protocol's buffer over NCCL_STEPS (8), times the collective's chunk steps
  for Simple (4 for all-reduce, reduce-scatter and all-gather, 1 for
  broadcast and reduce), halved for LL, 15/16 of it for LL128, rounded down
  to the protocol's grain (512 bytes Simple, 16 LL, 1920 LL128). Default
  buffers (``computeBuffSizes``, ``src/init.cc``): 4 MiB Simple, 512 KiB LL,
  4,800 KiB LL128.
- **Tree chunk** (``calcCollChunking`` with NCCL_ALGO_TREE, once per part):
  the same step buffer without chunk steps (512 KiB Simple, 32 KiB LL,
  576,000 bytes LL128), LL128's halved for small parts by a rule on the
  part's bytes and the tree's node count (:func:`tree_chunk_table`).
- **PAT chunk size** (``calcCollChunking`` again; PAT runs Simple only).
  PAT's chunk steps are 1, so it starts from one Simple step (4 MiB / 8 =
  512 KiB) and halves it while it is above 64 KiB and ``chunk x nChannels x
  32`` (all-gather) or ``x 16`` (reduce-scatter) exceeds the bytes. The
  host calls it once per channel part (``nChannels`` = 1) with the bytes
  ``N x part x sizeof(T)`` (``ncclFuncMaxSendRecvCount``: the part is per
  rank), so only the channel's part and N enter; the kernel's chunkCount is
  the chunk over sizeof(T) (``ncclCollCbdPart``: grains of 512 bytes).
  All-gather moves bytes, which changes neither the bytes nor the chunk's
  ratio to the part.

>>> channel_split("allreduce", 4, 10_000, 4, "simple", 4)
[4096, 4096, 1808]
>>> channel_split("allreduce", 4, 1000, 4, "simple", 4)
[1000]
>>> chunk_elements("allreduce", 4, "simple"), chunk_elements("allreduce", 4, "ll"), chunk_elements("allreduce", 4, "ll128")
(524288, 8192, 144000)
>>> [int(pat_chunk_elements("reduce_scatter", n, 65536, 4)) for n in (2, 4, 8, 16, 32)]
[16384, 16384, 32768, 65536, 131072]
>>> [int(pat_chunk_elements("allgather", n, 65536, 4)) for n in (2, 4, 8, 16, 32)]
[16384, 16384, 16384, 32768, 65536]
"""

from __future__ import annotations

from .. import indexing as ix
from ..layout import ScheduleError

#: protocols by the option's name: NCCL_PROTO's spelling, grain bytes
#: (``ncclProtoGrainSize``), default buffer bytes (``computeBuffSizes``)
PROTOCOLS = {
    "simple": ("Simple", 512, 1 << 22),
    "ll": ("LL", 16, 8 * 512 * 8 * 16),
    "ll128": ("LL128", 1920, 120 * 640 * 8 * 8),
}
#: NCCL_STEPS (src/include/device.h)
STEPS = 8
#: chunk steps of the ring kernels with Simple (src/include/collectives.h)
CHUNK_STEPS = {"allreduce": 4, "reduce_scatter": 4, "allgather": 4, "broadcast": 1, "reduce": 1}
#: MinTrafficPerChannel of scheduleCollTasksToPlan
MIN_TRAFFIC = 32 << 10
#: collectives NCCL moves as bytes (int8)
AS_BYTES = ("allgather", "broadcast")
DEFAULT_DTYPE, DEFAULT_PROTOCOL = "float32", "simple"


def element_size(dtype: str) -> int:
    """Bytes of a spec dtype name (``float32`` -> 4); ScheduleError otherwise."""
    from ...spec.dtypes import DTYPES

    if dtype not in DTYPES:
        raise ScheduleError(f"option dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return int(DTYPES[dtype].itemsize)


def protocol_of(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ScheduleError(f"option protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return protocol


def traffic_per_byte(collective: str, n):
    """``ncclFuncTrafficPerByte``."""
    return {"allreduce": 2, "reduce_scatter": n, "allgather": n}.get(collective, 1)


def kernel_size(collective: str, itemsize: int) -> int:
    """sizeof(T) in the kernel: 1 for all-gather and broadcast (bytes)."""
    return 1 if collective in AS_BYTES else itemsize


def _up(a, b):
    return ix.floordiv(a + b - 1, b)


def _min(a, b):
    return ix.where(a < b, a, b)


def split_terms(collective: str, n, count: int, itemsize: int, protocol: str, channels: int) -> list:
    """Elements of each of the ``channels`` channels, channel 0 first (0 for
    a channel NCCL leaves empty), as ints for an int n or Z3 terms for a Z3
    n (reduce-scatter's and all-gather's traffic grows with N): countLo,
    countMid for every middle channel, countHi, with the element remainder
    taken off the last non-empty part. Written with :mod:`..indexing`
    arithmetic only, so the proofs read the same split."""
    if count <= 0:
        return [0] * channels
    size = kernel_size(collective, itemsize)
    total = count * itemsize // size
    per_byte = traffic_per_byte(collective, n) * (4 if protocol == "ll" else 1)
    traffic = total * size * per_byte  # the task's trafficBytes, x4 for LL (ncclPrepareTasks)
    traffic = ix.where(traffic < MIN_TRAFFIC, MIN_TRAFFIC, traffic)
    per_channel = _up(ix.floordiv(traffic, channels), 16) * 16
    cell_size = _up(_up(MIN_TRAFFIC, per_byte), 16) * 16
    per_cell = ix.floordiv(cell_size, size)
    cells = _up(total * size, cell_size)
    traffic_per_cell = cell_size * per_byte
    per_mid = _min(cells, _up(per_channel, traffic_per_cell))
    lo = cells if channels == 1 else per_mid
    rest = cells - lo
    mid = ix.floordiv(rest, per_mid)
    hi = rest - mid * per_mid
    if channels > 1:  # more parts than channels: the last channel takes the rest
        over = channels < 1 + mid + ix.where(hi != 0, 1, 0)
        spread = ix.floordiv(rest, channels - 1)
        mid = ix.where(over, channels - 2, mid)
        hi = ix.where(over, rest - (channels - 2) * spread, hi)
        per_mid = ix.where(over, spread, per_mid)
    fold = ix.both(hi == 0, mid != 0)
    hi, mid = ix.where(fold, per_mid, hi), ix.where(fold, mid - 1, mid)
    excess = cells * per_cell - total
    parts = []
    for h in range(channels):
        cells_h = lo if h == 0 else ix.where(h <= mid, per_mid, ix.where(ix.both(h == mid + 1, hi != 0), hi, 0))
        last = ix.where(hi != 0, h == mid + 1, h == 0)
        elements = cells_h * per_cell - ix.where(last, excess, 0)
        parts.append(ix.floordiv(elements * size, itemsize))
    return parts


def channel_split(collective: str, n: int, count: int, itemsize: int, protocol: str, channels: int) -> list[int]:
    """:func:`split_terms` at an int n, empty channels left out."""
    return [int(p) for p in split_terms(collective, n, count, itemsize, protocol, channels) if int(p)]


def step_chunk_bytes(protocol: str, chunk_steps: int = 1) -> int:
    """``calcCollChunking``'s chunk before any algorithm's adjustment and
    before rounding to the grain: the protocol's default buffer over
    NCCL_STEPS, times ``chunk_steps`` (the ring's with Simple, 1 for every
    other algorithm and protocol), halved for LL, 15/16 of it for LL128."""
    chunk = PROTOCOLS[protocol][2] // STEPS * chunk_steps
    if protocol == "ll":
        chunk //= 2
    if protocol == "ll128":
        chunk = chunk // 16 * 15
    return chunk


def chunk_bytes(collective: str, protocol: str) -> int:
    """The ring's chunk in bytes (``calcCollChunking``, default buffers)."""
    grain = PROTOCOLS[protocol][1]
    return step_chunk_bytes(protocol, CHUNK_STEPS[collective] if protocol == "simple" else 1) // grain * grain


def chunk_elements(collective: str, itemsize: int, protocol: str) -> int:
    """The ring's chunkCount in elements of ``itemsize`` bytes."""
    return chunk_bytes(collective, protocol) // itemsize


#: PAT's chunk (``calcCollChunking``): one Simple step, halved down to at most the floor
PAT_START, PAT_FLOOR = step_chunk_bytes("simple", 1), 64 << 10
#: the factor of the halving test: chunk x nChannels x factor > bytes
PAT_FACTOR = {"allgather": 32, "reduce_scatter": 16}


def pat_chunk_choices(collective: str, count: int, itemsize: int, limit: int = 1 << ix.RANK_BITS) -> list[tuple[int, int]]:
    """PAT's chunk as a table over N: ``[(least N, chunk bytes), ...]``,
    largest chunk first, the last entry ``(0, 64 KiB)``; the chunk for N
    ranks is the first entry whose least N is at most N. An entry whose
    least N is ``limit`` or more (ranks the functions never take) is left
    out. ``count`` is the channel's elements per rank."""
    factor = PAT_FACTOR[collective]
    choices = []
    chunk = PAT_START
    while chunk > PAT_FLOOR:
        if count > 0:  # halving stops where chunk x factor <= N x count x itemsize
            least = _up_int(chunk * factor, count * itemsize)
            if least < limit:
                choices.append((least, chunk))
        chunk //= 2
    return choices + [(0, PAT_FLOOR)]


def _up_int(a: int, b: int) -> int:
    return -(-a // b)


def select(n, table):
    """The value of the first ``(least N, value)`` entry with least N <= n
    (the last entry's least N is 0): ints for an int n, a term for a Z3 n."""
    value = table[-1][1]
    for least, choice in reversed(table[:-1]):
        value = ix.where(n >= least, choice, value)
    return value


def pat_chunk_bytes(collective: str, n, count: int, itemsize: int):
    """PAT's chunk in bytes for N ranks and a channel part of ``count``
    elements of ``itemsize`` bytes per rank (see the module text)."""
    return select(n, pat_chunk_choices(collective, count, itemsize))


def pat_chunk_elements(collective: str, n, count: int, itemsize: int):
    """PAT's chunkCount in elements of ``itemsize`` bytes."""
    return select(n, [(least, chunk // itemsize) for least, chunk in pat_chunk_choices(collective, count, itemsize)])


def align_elements(collective: str, itemsize: int) -> int:
    """Elements a last-loop all-reduce chunk is rounded up to: 16 / sizeof(T)."""
    return max(1, 16 // itemsize) if collective == "allreduce" else 1


# -- the tree all-reduce's chunk (NCCL_ALGO_TREE) -----------------------------------------------

#: ``calcCollChunking``'s LL128 tree loops, with one rank per node (nNodes = N,
#: ppn = 1, nstepsLL128 = 1 + log2i(N) + 0.1): halve the chunk while the part's
#: bytes over the chunk are below ``nstepsLL128 * factor`` and the chunk is
#: above ``limit``; as integers, ``bytes // chunk < factor * log2i(N) + bound``
#: (bound = ceil(1.1 factor); 1.1 factor is never an integer).
#: (limit, factor, bound) of the first and the second loop.
TREE_LL128_LOOPS = ((131072, 64, 71), (32768, 16, 18))


def tree_chunk_table(protocol: str, part_bytes: int) -> list[tuple[int, int]]:
    """The tree all-reduce's chunk in bytes for a channel part of
    ``part_bytes``, as a step function of log2i(N): ``[(levels, chunk), ...]``
    with ``levels`` ascending from 0, the chunk being the last entry whose
    ``levels`` <= log2i(N). ``calcCollChunking`` with NCCL_ALGO_TREE, called
    once per part (lo / mid / hi) with nChannels = 1, default buffers: the
    protocol's step buffer (chunk steps 1: the ring's chunk steps do not
    apply), LL halved, LL128 15/16 and then halved by
    :data:`TREE_LL128_LOOPS` for small parts; rounded down to the grain.
    Simple and LL have one entry (no dependence on the part or on N).

    >>> tree_chunk_table("simple", 48), tree_chunk_table("ll", 48)
    ([(0, 524288)], [(0, 32768)])
    >>> tree_chunk_table("ll128", 100 << 20)
    [(0, 576000), (2, 288000), (5, 144000), (11, 71040), (90, 34560), (181, 17280)]
    """
    grain = PROTOCOLS[protocol][1]
    chunk = step_chunk_bytes(protocol, 1)
    table, levels = [(0, chunk)], 0
    if protocol == "ll128":
        for limit, factor, bound in TREE_LL128_LOOPS:
            while chunk > limit:
                # halved iff part_bytes // chunk < factor * L + bound, i.e. L >= need
                need = max(0, (part_bytes // chunk - bound) // factor + 1)
                levels = max(levels, need)  # and every earlier halving happened
                chunk //= 2
                table.append((levels, chunk))
    return [(levels, chunk // grain * grain) for levels, chunk in table]


def tree_chunk_bytes(protocol: str, part_bytes: int, n: int) -> int:
    """:func:`tree_chunk_table` at N = n ranks (one rank per node).

    >>> tree_chunk_bytes("ll128", 4 << 30, 4), tree_chunk_bytes("ll128", 1 << 20, 4)
    (576000, 17280)
    """
    levels = int(n).bit_length() - 1  # log2i
    return [chunk for need, chunk in tree_chunk_table(protocol, part_bytes) if need <= levels][-1]


def tree_chunk_elements(itemsize: int, protocol: str, part: int, n):
    """The tree kernel's chunkCount for a part of ``part`` elements of
    ``itemsize`` bytes, at most ``part`` (at least 1): the kernel sends
    ``min(chunkCount, what is left)``, so a chunk past the part sends the
    part, the same as the part as chunk. chunkCount is
    :func:`tree_chunk_bytes` / sizeof(T) (chunkGrains x grain / sizeof(T) in
    ``ncclCollCbdPart``; every grain is a multiple of every element size).
    ``n`` an int or a Z3 term: the result is then a chain of ``where`` on
    log2i(N) over small constants, so a proof's bit-vectors never hold a
    byte count."""
    levels = ix.floor_log2(n)
    result = None
    for need, chunk in tree_chunk_table(protocol, part * itemsize):
        value = max(1, min(part, chunk // itemsize))
        result = value if result is None else ix.where(levels >= need, value, result)
    return result if type(result).__module__.startswith("z3") else int(result)


def slot_elements(protocol: str, itemsize: int) -> int:
    """Elements of ``itemsize`` bytes one connection slot carries: the
    protocol's default buffer over NCCL_STEPS, its data part (half for LL,
    15/16 for LL128), at least 1. A ring chunk of the Simple protocol is
    ``CHUNK_STEPS`` such slots; PAT's and the tree's chunks are one."""
    return max(1, step_chunk_bytes(protocol, 1) // itemsize)
