"""``nccl-ring``: NCCL's ring collectives with channels, as transfer functions.

A model of what NCCL's ring kernels do (``src/device/all_reduce.h``,
``reduce_scatter.h``, ``all_gather.h``, ``broadcast.h``, ``reduce.h``; the
channel split of ``ncclCollCbdPart`` in ``src/include/device.h``); see
docs/nccl.md for the source version and what is simplified.

Cells are elements (or, equally, grains of elements): a schedule has one
cell per element of the vector (all-reduce, broadcast, reduce: ``count``
cells; reduce-scatter, all-gather: ``count`` per rank, N * count cells).

- Channels. The vector (the per-rank block for reduce-scatter and
  all-gather) is cut into contiguous channel parts as NCCL 2.30's host does
  (:mod:`.nccl_host`: cells of a fixed traffic size, fewer channels for
  small vectors, the remainder in the last channel); channels NCCL leaves
  empty send nothing. Channels run at once, each on its own ring
  (``rings``), and their messages share a step: the schedule's link
  capacity is the most cells one link carries in one step.
- Ring index. A rank's index on a channel is its distance from rank 0
  along that channel's ring (NCCL's ``setupChannel``), so a ring list and
  any rotation of it give the same schedule.
- All-reduce loop. Each channel walks its part in loops of
  ``N * chunkCount`` elements (``chunkCount = chunk``); the last, partial
  loop rounds ``chunkCount`` to ``alignUp(divUp(rem, N), align)``, so its last
  chunks may be short or empty (an empty chunk sends nothing). In a loop, at
  ring step t (0 .. 2N - 3) the rank with ring index i sends chunk
  ``(i - t - 1) mod N`` for t < N - 1 (receiver reduces) and chunk
  ``(i - t + N - 1) mod N`` after (receiver copies): the primitives
  ``send``, ``recvReduceSend`` x (N - 2), ``recvReduceCopySend`` (the owner's
  chunk i), ``recvCopySend`` x (N - 2), ``recv``. Loops follow one another.
- Reduce-scatter / all-gather loop over ``chunk`` elements of the channel's
  part of every block; at step t the rank at ring index i sends the block of
  the rank at ring index ``i - 1 - t`` (reduce-scatter) or ``i - t``
  (all-gather), mod N.
- Broadcast / reduce: the pipelined chain along each channel's ring from the
  root (broadcast) or from the rank after it back to the root (reduce), one
  ``chunk`` per step.

Each transfer is written as named pieces (:func:`loop_base`,
:func:`chunk_count`, :func:`ring_loop`, :func:`block_loop`,
:func:`chain_step`, :func:`chain_fits`; :func:`allreduce_at`, :func:`block_at` and
:func:`chain_at` for one channel's element), which the all-N proofs
(:mod:`collspec.proofs.nccl_ring_loops`) evaluate on Z3 terms.

Options (``generate("nccl-ring", COLLECTIVE, N, **options)``): ``channels``
(the communicator's channels, 1..64, default 2), ``dtype`` (a spec dtype
name, default ``float32``: the element size), ``protocol`` (``simple``,
``ll``, ``ll128``; default ``simple``), ``count`` (elements; per rank for
reduce-scatter and all-gather; defaults in :data:`DEFAULT_COUNT`), ``rings``
(one permutation of the ranks per channel, or fewer, reused in turn;
default the identity ring for every channel), ``root``, ``parts`` (elements
per channel in place of NCCL's split of a collective alone in its plan).
``chunk`` (elements
per chunk) and ``align`` (elements a last-loop all-reduce chunk is rounded
to) default to NCCL's for the protocol and dtype (:func:`.nccl_host.chunk_elements`,
``16 / sizeof(T)``); given, they stand for a tuner's or NCCL_BUFFSIZE's
chunk (``align`` then defaults to 1 unless ``16 / sizeof(T)`` divides ``chunk``).

>>> s = generate_ring("allreduce", 4, channels=1, chunk=1, count=6)
>>> s.chunks, len(s.steps), [s.steps[0].name, s.steps[6].name]
(6, 12, ['loop 0 step 0: send -> recvReduceSend', 'loop 1 step 0: send -> recvReduceSend'])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import indexing as ix
from . import nccl_host as host
from ..layout import ScheduleError
from ..program import Program, Transfer
from ..schedule import COPY, REDUCE, Schedule

ALGORITHM = "nccl-ring"
#: NCCL's MAXCHANNELS (src/include/device.h).
MAX_CHANNELS = 64
MAX_CELLS = 1 << 22
DEFAULTS = {"channels": 2}
#: Default ``count`` (elements; per rank for reduce-scatter and all-gather):
#: small (one loop, one channel in NCCL), with short and empty all-reduce chunks at many N.
DEFAULT_COUNT = {"allreduce": 12, "broadcast": 12, "reduce": 12, "reduce_scatter": 4, "allgather": 4}


def _is_z3(value) -> bool:
    return type(value).__module__.startswith("z3")


def _min(a, b):
    return ix.where(a < b, a, b)


def _divup(a, b):
    return ix.floordiv(a + b - 1, b)


def _align_up(a, b):
    return _divup(a, b) * b


def _pick(values, c):
    """``values[c]`` for c < len(values), on numpy or Z3 indices."""
    if not (_is_z3(c) or any(_is_z3(v) for v in values)):
        return np.asarray([int(v) for v in values], dtype=np.int64)[np.asarray(c)]
    if isinstance(c, (int, np.integer)):  # Z3 values at a plain index: the one picked
        return values[int(c)] if 0 <= c < len(values) else 0
    result = ix.constant(0, c) if _is_z3(c) else 0
    for h, value in enumerate(values):
        result = ix.where(c == h, value, result)
    return result


@dataclass(frozen=True)
class Layout:
    """Channels, parts and rings: concrete options, used on numpy or Z3 indices.

    The channel parts are NCCL's host split (:func:`.nccl_host.split_terms`,
    of N for reduce-scatter and all-gather), or ``equal`` elements on every
    channel (:func:`one_loop_program`'s instance, ``equal`` a function of N),
    or ``equal`` the list of parts itself: a :class:`PartList`. The
    channels rows (:mod:`collspec.proofs.nccl_ring_loops`) pass
    ``parts_of`` (parts and offsets as solver functions of the channel
    index) and ``rings`` as an object with ``position`` and ``rank_at``
    in place of the rank lists (a :class:`RingTable`); every offset, part,
    width, ring place and neighbour below is read through these."""

    collective: str
    count: int
    channels: int
    chunk: int
    align: int
    rings: tuple[tuple[int, ...], ...] | None
    root: int
    itemsize: int = 4
    protocol: str = "simple"
    equal: object = None
    parts_of: object = None

    def parts(self, n) -> list:
        """Elements of every channel, channel 0 first (0 where NCCL leaves it empty)."""
        if self.equal is not None:
            return [self.equal(n)] * self.channels if callable(self.equal) else list(self.equal)
        return host.split_terms(self.collective, n, self.count, self.itemsize, self.protocol, self.channels)

    _pick = staticmethod(_pick)

    def split(self, n):
        """The channel parts as functions of the channel index: ``self.parts_of``
        when given (the proofs' uninterpreted functions, any channel count),
        else :class:`PartList` of :meth:`parts`. Every offset, part and width
        goes through it."""
        return self.parts_of if self.parts_of is not None else PartList(self.parts(n))

    def off(self, c, n):
        """Where channel c's part starts in the vector."""
        return self.split(n).off(c)

    def part(self, c, n):
        """Elements of channel c's part."""
        return self.split(n).part(c)

    def width(self, n):
        """Slots of one channel per step: the most elements one message carries,
        ``min(chunk, alignUp(largest part, align))``, at least 1."""
        most = self.most(n)
        return ix.where(most < 1, 1, _min(self.chunk, _align_up(most, self.align)))

    def most(self, n):
        """The largest part (in the proofs: any bound on every part)."""
        return self.split(n).most()

    def loops(self, n, per_loop):
        """Loops of the largest channel part."""
        return _divup(self.most(n), per_loop)

    def index(self, c, r, n):
        """Rank r's ring index on channel c: its distance from rank 0 along
        the ring (NCCL 2.30 ``setupChannel``, src/init.cc), whatever rank
        the ring list starts with."""
        return ix.wrap(self.position(c, r, n) - self.position(c, 0 * r, n), n)

    def ring_of(self):
        """The rings as functions: ``self.rings`` itself when it has
        ``position`` and ``rank_at`` (the proofs' uninterpreted functions,
        every ring), else :class:`RingTable` of the rank lists."""
        return self.rings if hasattr(self.rings, "position") else RingTable(self.rings, self.channels)

    def position(self, c, r, n):
        """Rank r's position in channel c's ring list."""
        if self.rings is None:
            return r
        return self.ring_of().position(c, r)

    def rank_at(self, c, i, n):
        """The rank at position i of channel c's ring list."""
        if self.rings is None:
            return i
        return self.ring_of().rank_at(c, i)

    def next(self, c, r, n):
        return self.rank_at(c, ix.wrap(self.position(c, r, n) + 1, n), n)


class PartList:
    """The generator's channel parts: a list, channel 0 first; ``off(c)``
    the sum of the parts before c, ``most()`` the largest."""

    def __init__(self, parts):
        self.parts = list(parts)
        self.starts, total = [], 0
        for part in self.parts:
            self.starts.append(total)
            total = total + part

    def part(self, c):
        return _pick(self.parts, c)

    def off(self, c):
        return _pick(self.starts, c)

    def most(self):
        most = self.parts[0]
        for part in self.parts[1:]:
            most = larger(most, part)
        return most


def larger(a, b):
    """The larger of a and b (the fold step of :meth:`PartList.most`)."""
    return ix.where(b > a, b, a)


class RingTable:
    """The generator's rings: one rank list per channel (fewer reused in
    turn); ``position(c, r)`` and ``rank_at(c, i)`` are table lookups."""

    def __init__(self, rings, channels: int):
        self.rings, self.channels = rings, channels

    def position(self, c, r):
        return self._lookup([[ring.index(k) for k in range(len(ring))] for ring in self.rings], c, r)

    def rank_at(self, c, i):
        return self._lookup([list(ring) for ring in self.rings], c, i)

    def _lookup(self, rows, c, k):
        """``rows[c mod len(rows)][k]``: numpy indexing, or a chain of ``where`` on Z3."""
        table = np.asarray([rows[ch % len(rows)] for ch in range(self.channels)], dtype=np.int64)
        if not (_is_z3(c) or _is_z3(k)):
            return table[np.asarray(c), np.asarray(k)]
        result = ix.constant(0, k if _is_z3(k) else c)
        for ch in range(table.shape[0]):
            for i in range(table.shape[1]):
                result = ix.where(ix.both(c == ch, k == i), int(table[ch, i]), result)
        return result


# -- the five transfer functions ---------------------------------------------------------------


def _slot(layout: Layout, j, n):
    width = layout.width(n)
    c = ix.floordiv(j, width)
    return c, j - c * width


def loop_base(layout: Layout, n, loop):
    """Where all-reduce loop ``loop`` starts in its channel's part: loops of
    ``N * chunk`` elements follow one another."""
    return loop * n * layout.chunk


def chunk_count(layout: Layout, n, rem):
    """An all-reduce loop's chunkCount with ``rem`` elements of the part
    left: ``chunk``, or in the last, partial loop (rem < N * chunk)
    ``alignUp(divUp(rem, N), align)`` (NCCL's ``runRing``)."""
    return ix.where(rem < n * layout.chunk, _align_up(_divup(rem, n), layout.align), layout.chunk)


def ring_loop(n, t, i, count, rem, e):
    """One all-reduce loop at ring step t (0 .. 2N - 3) for the rank at ring
    index i and element e of its chunk, the loop's chunkCount ``count`` and
    ``rem`` elements left: ``(active, chunk index k, op)``. It sends chunk
    ``(i - t - 1) mod N`` while reducing, ``(i - t + N - 1) mod N`` while
    gathering; chunk k holds ``min(count, rem - k count)`` elements."""
    reducing = t < n - 1
    k = ix.where(reducing, ix.wrap(i - 1 - t, n), ix.wrap(i - t + n - 1, n))
    nelem = _min(count, rem - k * count)
    return ix.both(rem > 0, e < nelem), k, ix.where(reducing, REDUCE, COPY)


def allreduce_at(layout: Layout, n, s, r, c, e):
    """The all-reduce transfer of element e of channel c's chunk, rank r, step s."""
    per_loop = 2 * (n - 1)
    loop = ix.floordiv(s, per_loop)
    t = s - loop * per_loop
    base = loop_base(layout, n, loop)
    rem = layout.part(c, n) - base
    count = chunk_count(layout, n, rem)
    active, k, op = ring_loop(n, t, layout.index(c, r, n), count, rem, e)
    cell = layout.off(c, n) + base + k * count + e
    return Transfer(active, layout.next(c, r, n), cell, cell, op)


def _allreduce(layout: Layout):
    def steps(n):
        return layout.loops(n, n * layout.chunk) * 2 * (n - 1)

    def transfer(n, s, r, j):
        c, e = _slot(layout, j, n)
        return allreduce_at(layout, n, s, r, c, e)

    def label(n, s):
        per_loop = 2 * (n - 1)
        loop, t = divmod(int(s), per_loop)
        kinds = ["send"] + ["recvReduceSend"] * (n - 2) + ["recvReduceCopySend"] + ["recvCopySend"] * (n - 2) + ["recv"]
        return ("reduce-scatter" if t < n - 1 else "all-gather"), f"loop {loop} step {t}: {kinds[t]} -> {kinds[t + 1]}"

    return steps, transfer, label


def block_loop(n, t, i, length, e, reduce: bool):
    """One reduce-scatter (``reduce``) or all-gather loop at ring step t
    (0 .. N - 2) for the rank at ring index i and element e of the loop's
    ``length`` elements of every block: ``(active, ring index of the rank
    whose block it sends)``, ``i - 1 - t`` or ``i - t`` mod N."""
    return e < length, ix.wrap(i - 1 - t, n) if reduce else ix.wrap(i - t, n)


def block_at(layout: Layout, reduce: bool, n, s, r, c, e):
    """The reduce-scatter (all-gather) transfer of element e of channel c's
    chunk of every block, rank r, step s."""
    loop = ix.floordiv(s, n - 1)
    t = s - loop * (n - 1)
    base = loop * layout.chunk
    rem = layout.part(c, n) - base
    active, b = block_loop(n, t, layout.position(c, r, n), _min(layout.chunk, rem), e, reduce)
    block = layout.rank_at(c, b, n)
    cell = block * layout.count + layout.off(c, n) + base + e
    return Transfer(active, layout.next(c, r, n), cell, cell, REDUCE if reduce else COPY)


def _block_ring(layout: Layout, reduce: bool):
    """Reduce-scatter (``reduce``) or all-gather: N - 1 steps per loop of ``chunk``."""

    def steps(n):
        return layout.loops(n, layout.chunk) * (n - 1)

    def transfer(n, s, r, j):
        c, e = _slot(layout, j, n)
        return block_at(layout, reduce, n, s, r, c, e)

    def label(n, s):
        loop, t = divmod(int(s), n - 1)
        if reduce:
            kinds = ["send"] + ["recvReduceSend"] * (n - 2) + ["recvReduceCopy"]
        else:
            kinds = ["copySend"] + ["recvCopySend"] * (n - 2) + ["recv"]
        return ("reduce-scatter" if reduce else "all-gather"), f"loop {loop} step {t}: {kinds[t]} -> {kinds[t + 1]}"

    return steps, transfer, label


def chain_step(n, s, q, reduce: bool):
    """The pipelined chain at step s for the rank at chain position q (its
    distance from the root along the ring): ``(sends, chunk index k)``; a
    broadcast's positions 0 .. N - 2 send chunk s - q, a reduce's 1 .. N - 1
    chunk s - q + 1."""
    return (q >= 1, s - (q - 1)) if reduce else (q <= n - 2, s - q)


def chain_fits(layout: Layout, c, n, k, e):
    """Element e of chunk k is in channel c's part: ``e < min(chunk, part - k chunk)``."""
    return e < _min(layout.chunk, layout.part(c, n) - k * layout.chunk)


def chain_at(layout: Layout, reduce: bool, n, s, r, c, e):
    """The broadcast (reduce) transfer of element e of channel c's chunk, rank r, step s."""
    q = ix.wrap(layout.position(c, r, n) - layout.position(c, layout.root, n), n)
    sends, k = chain_step(n, s, q, reduce)
    cell = layout.off(c, n) + k * layout.chunk + e
    return Transfer(ix.both(sends, k >= 0, chain_fits(layout, c, n, k, e)), layout.next(c, r, n), cell, cell, REDUCE if reduce else COPY)


def _chain(layout: Layout, reduce: bool):
    """Broadcast from the root, or reduce into it, along each channel's ring."""

    def steps(n):
        return ix.where(n >= 2, layout.loops(n, layout.chunk) + n - 2, 0)

    def transfer(n, s, r, j):
        c, e = _slot(layout, j, n)
        return chain_at(layout, reduce, n, s, r, c, e)

    def label(n, s):
        return ("reduce" if reduce else "broadcast"), f"pipeline step {int(s)}"

    return steps, transfer, label


BUILDERS = {
    "allreduce": _allreduce,
    "reduce_scatter": lambda layout: _block_ring(layout, True),
    "allgather": lambda layout: _block_ring(layout, False),
    "broadcast": lambda layout: _chain(layout, False),
    "reduce": lambda layout: _chain(layout, True),
}


def _link_load(n, steps) -> int:
    """The most cells one (src, dst) link carries in one step (at least 1)."""
    most = 1
    for step in steps:
        if len(step):
            most = max(most, most_per_link(n, step))
    return most


def most_per_link(n: int, step) -> int:
    """The most transfers of ``step`` on one (src, dst) link: a bincount
    for small N, a sort past 4096 ranks (N * N counters would not fit)."""
    key = step.src.astype(np.int64) * n + step.dst
    if n <= 4096:
        return int(np.bincount(key).max())
    return int(np.unique(key, return_counts=True)[1].max())


def _integer(name: str, value, low: int, high: int, algorithm: str = ALGORITHM) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= int(value) <= high:
        raise ScheduleError(f"{algorithm}: option {name} must be an integer from {low} to {high}, got {value!r}")
    return int(value)


def layout_of(collective: str, channels=None, chunk=None, align=None, count=None, rings=None, root=0, dtype=None, protocol=None,
              parts=None) -> Layout:
    """The checked options (ScheduleError naming the option otherwise).
    ``parts`` (elements per channel, channel 0 first) replaces NCCL's split
    of a collective alone in its plan: NCCL gives other parts to a
    collective that shares a plan with others (its first channel continues
    where the previous one's traffic ended)."""
    channels = _integer("channels", DEFAULTS["channels"] if channels is None else channels, 1, MAX_CHANNELS)
    try:
        itemsize = host.element_size(host.DEFAULT_DTYPE if dtype is None else dtype)
        protocol = host.protocol_of(host.DEFAULT_PROTOCOL if protocol is None else protocol)
    except ScheduleError as error:
        raise ScheduleError(f"{ALGORITHM}: {error}") from None
    nccl_align = host.align_elements(collective, itemsize)
    if chunk is None:
        chunk = host.chunk_elements(collective, itemsize, protocol)
    chunk = _integer("chunk", chunk, 1, MAX_CELLS)
    if align is None:
        align = nccl_align if chunk % nccl_align == 0 else 1
    align = _integer("align", align, 1, 1 << 10)
    if chunk % align:
        raise ScheduleError(f"{ALGORITHM}: option chunk ({chunk}) must be a multiple of align ({align})")
    if count is None and isinstance(parts, (list, tuple)) and all(isinstance(p, (int, np.integer)) for p in parts):
        count = sum(int(p) for p in parts)
    count = _integer("count", DEFAULT_COUNT[collective] if count is None else count, 0, MAX_CELLS)
    if rings is not None:
        if not isinstance(rings, (list, tuple)) or not rings:
            raise ScheduleError(f"{ALGORITHM}: option rings must be a non-empty list of rank orders, got {rings!r}")
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in rings):
            rings = [rings]
        rings = tuple(tuple(ring) for ring in rings)
    if parts is not None:
        if isinstance(parts, (int, np.integer)):
            parts = [parts]
        if not isinstance(parts, (list, tuple)) or not 1 <= len(parts) <= channels:
            raise ScheduleError(f"{ALGORITHM}: option parts must list 1 to {channels} channel parts (one per channel), got {parts!r}")
        parts = [_integer("parts", p, 0, MAX_CELLS) for p in parts]
        if sum(parts) != count:
            raise ScheduleError(f"{ALGORITHM}: option parts must add up to count ({count}), got {'+'.join(map(str, parts))} = {sum(parts)}")
        return Layout(collective, count, channels, chunk, align, rings, root, itemsize, protocol, equal=tuple(parts) + (0,) * (channels - len(parts)))
    return Layout(collective, count, channels, chunk, align, rings, root, itemsize, protocol)


def program_of(layout: Layout, factory, params=None, title=None, meta=None) -> Program:
    """The :class:`Program` of ``layout``: its cells, steps, slots (channels x
    width), transfer and link load. Every nccl-ring program is built here, the
    generator's (:func:`ring_program`) and the ones the all-N rows prove
    (:func:`options_program`, and the channels rows' layout with its parts
    and rings as solver functions), so what the rows prove
    differs from what the generator runs only in the layout's values."""
    collective = layout.collective
    steps, transfer, label = BUILDERS[collective](layout)

    def cells(n):
        return layout.count * n if collective in ("reduce_scatter", "allgather") else layout.count

    return Program(
        ALGORITHM, collective, cells, steps, lambda n: layout.channels * layout.width(n), transfer, label, factory, params=params or {},
        capacity=_link_load, root=layout.root if collective in ("broadcast", "reduce") else None, title=title, meta=meta or {},
    )


def ring_program(collective: str, **options) -> Program:
    """The transfer function of ``nccl-ring`` for ``collective`` (see the module text)."""
    layout = layout_of(collective, **options)
    return program_of(
        layout, lambda: ring_program(collective, **options),
        title=lambda n: f"{ALGORITHM} {collective}, {n} ranks, {layout.channels} channels, chunk {layout.chunk}, {layout.count} elements",
        meta=_meta(layout),
    )


def _meta(layout: Layout) -> dict:
    return {"channels": layout.channels, "chunk": layout.chunk, "count": layout.count}


def channel_table(collective: str, n: int, **options) -> list[dict]:
    """One entry per channel NCCL uses: its ring (the list order given, or
    0..N-1) and the elements it carries (per rank for reduce-scatter and
    all-gather), as ``collspec export --format json`` writes them."""
    layout = layout_of(collective, **options)
    rings = layout.rings or (tuple(range(n)),)
    return [{"ring": [int(v) for v in rings[c % len(rings)]], "count": int(p)} for c, p in enumerate(layout.parts(n)) if int(p)]


#: per collective, ``count`` in :func:`one_loop_program`: N elements, or 1 per rank
ONE_LOOP_COUNT = {"allreduce": lambda n: n, "reduce_scatter": lambda n: 1, "allgather": lambda n: 1, "broadcast": lambda n: n, "reduce": lambda n: n}


def one_loop_program(collective: str, root=0, channels: int = 1) -> Program:
    """The transfer function of ``collective`` with 1 channel, chunk 1, align 1,
    the identity ring and exactly one loop: ``count`` N for all-reduce (the
    option tied to the rank count), 1 per rank for reduce-scatter and
    all-gather, N one-element chunks for broadcast and reduce from ``root``.
    The transfer is :data:`BUILDERS`'s own, on that layout; its schedule is
    ``generate_ring(collective, n, channels=1, chunk=1, count=..., root=...)``'s.
    The all-N rows prove :func:`options_program` and the channels layout,
    which cover it; tests use this instance to show bugs that only several
    loops or channels reveal. ``channels`` C > 1 (all-reduce): count C N,
    one loop on each channel."""

    def built(n):
        per = ONE_LOOP_COUNT[collective]
        return BUILDERS[collective](Layout(collective, channels * per(n), channels, 1, 1, None, root, equal=per))

    rooted = collective in ("broadcast", "reduce")
    return Program(
        ALGORITHM, collective, lambda n: channels * n, lambda n: built(n)[0](n), lambda n: channels, lambda n, s, r, j: built(n)[1](n, s, r, j),
        lambda n, s: built(n)[2](n, s), lambda root=root: one_loop_program(collective, root, channels), params={"root": root} if rooted else {},
        capacity=_link_load, root=root if rooted else None,
        title=lambda n: f"{ALGORITHM} {collective}, {n} ranks, {channels} channel{'s' * (channels > 1)}, chunk 1, one loop",
    )


def options_layout(collective: str, chunk, align, count, root=0) -> Layout:
    """The layout of :func:`options_program`: 1 channel, the identity ring, part ``count``."""
    return Layout(collective, count, 1, chunk, align, None, root, equal=(count,))


def options_program(collective: str, chunk=1, align=1, count=1, root=0) -> Program:
    """The transfer function of ``collective`` on 1 channel (the identity
    ring, the whole vector its part) with ``chunk``, ``align`` and ``count``
    as parameters: Z3 variables in the proofs (:mod:`collspec.proofs.nccl_ring_loops`),
    so one proof covers every chunk, alignment and count, hence any number
    of loops. The transfer is :data:`BUILDERS`'s own; at ints its schedule
    is ``generate_ring(collective, n, channels=1, chunk=chunk, align=align,
    count=count, root=root)``'s (a test compares them)."""
    rooted = collective in ("broadcast", "reduce")
    params = {"chunk": chunk, "align": align, "count": count, **({"root": root} if rooted else {})}
    return program_of(options_layout(collective, chunk, align, count, root), lambda **values: options_program(collective, **values), params,
                      title=lambda n: f"{ALGORITHM} {collective}, {n} ranks, 1 channel, chunk {chunk}, {count} elements")


def _not_inverse(table, channels: int, n: int) -> list[int]:
    """The channels c < ``channels`` where ``table.position(c, .)`` and
    ``table.rank_at(c, .)`` are not inverse bijections of 0..n-1 (the
    channels rows' premise on the rings). The lookups are evaluated as the
    schedule evaluates them: on Z3 terms, compiled to numpy."""
    import z3

    from ..terms import compile_terms

    c, i = z3.Ints("c i")
    terms = [table.position(c, i), table.rank_at(c, i), table.position(c, table.rank_at(c, i)), table.rank_at(c, table.position(c, i))]
    values = compile_terms(terms, {"c": c, "i": i}).evaluate(c=np.arange(channels)[:, None], i=np.arange(n)[None, :])[0]
    places = np.broadcast_to(np.arange(n)[None, :], (channels, n))
    good = np.ones(channels, dtype=bool)
    for value, inverse in zip(values, (False, False, True, True)):
        value = np.broadcast_to(np.asarray(value), (channels, n))
        good &= np.all(value == places, axis=1) if inverse else np.all((0 <= value) & (value < n), axis=1)
    return [int(k) for k in np.flatnonzero(~good)]


def _check_for(layout: Layout, n: int) -> None:
    if layout.rings is not None:
        for c, ring in enumerate(layout.rings):
            if sorted(int(v) for v in ring) != list(range(n)) or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in ring):
                raise ScheduleError(f"{ALGORITHM}: option rings: ring {c} {list(ring)} is not a permutation of the ranks 0..{n - 1}")
        for c in _not_inverse(layout.ring_of(), layout.channels, n)[:1]:
            raise ScheduleError(f"{ALGORITHM}: option rings: channel {c}'s ring lookups are not inverse permutations of 0..{n - 1}")
    if layout.collective in ("broadcast", "reduce"):
        _integer("root", layout.root, 0, n - 1)
    cells = layout.count * (n if layout.collective in ("reduce_scatter", "allgather") else 1)
    if cells > MAX_CELLS:
        raise ScheduleError(f"{ALGORITHM}: option count gives {cells} cells, more than {MAX_CELLS}")
    parts = [int(p) for p in layout.parts(n)]
    if len(parts) != layout.channels or min(parts) < 0 or sum(parts) != layout.count:  # what the channels rows cover: parts >= 0 that add up to count
        raise ScheduleError(f"{ALGORITHM}: the channel split of {layout.count} elements at N={n} is {parts}, not {layout.channels} parts >= 0 that add up to the count")
    most = int(layout.most(n))  # the channels rows' premise on most, on the value the schedule's width and loops read
    if most < max(parts):
        raise ScheduleError(f"{ALGORITHM}: the largest channel part at N={n} is computed as {most}, below the part {max(parts)} of {parts}")


def generate_ring(collective: str, n: int, **options) -> Schedule:
    """The ``nccl-ring`` schedule of ``collective`` on n ranks."""
    made = ring_program(collective, **options)
    _check_for(layout_of(collective, **options), n)
    schedule = made.schedule(n)
    schedule.meta["channel_table"] = channel_table(collective, n, **options)
    return schedule


def generator(collective: str):
    """``generate(n, **options)`` for ``collective``, with the options as
    named parameters (the command line reads them off the signature)."""
    if collective in ("broadcast", "reduce"):

        def rooted(n: int, channels=None, chunk=None, align=None, count=None, rings=None, root=0, dtype=None, protocol=None, parts=None) -> Schedule:
            return generate_ring(collective, n, channels=channels, chunk=chunk, align=align, count=count, rings=rings, root=root, dtype=dtype,
                                 protocol=protocol, parts=parts)

        return rooted

    def unrooted(n: int, channels=None, chunk=None, align=None, count=None, rings=None, dtype=None, protocol=None, parts=None) -> Schedule:
        return generate_ring(collective, n, channels=channels, chunk=chunk, align=align, count=count, rings=rings, dtype=dtype, protocol=protocol,
                             parts=parts)

    return unrooted


def program_factory(collective: str):
    return lambda **options: ring_program(collective, **options)
