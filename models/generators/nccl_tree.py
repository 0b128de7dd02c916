"""``nccl-tree``: NCCL's double binary tree all-reduce, as one transfer function.

The trees are the ones NCCL builds (``ncclGetBtree`` and ``ncclGetDtree``
in ``src/graph/trees.cc``; see docs/nccl.md), here over N ranks with one
rank per node.

- Tree 0 (``ncclGetBtree``) on labels 0..N-1: rank 0 is the root; a label
  x > 0 with lowest set bit b sits at level log2(b). Its parent is
  ``(x ^ b) | 2b``, or ``x ^ b`` when that is N or more; its children are
  ``x - b/2`` and ``x + b'`` for the largest power of two ``b' <= b/2``
  that stays below N (none for odd x). The root's one child is the largest
  power of two below N. Written closed form (:func:`btree_parent`,
  :func:`btree_child`) so that numpy and Z3 evaluate the same thing; the
  tests compare it with a literal transcription of NCCL's loop.
- Tree 1 (``ncclGetDtree``): the mirror of tree 0 (rank r has label
  N - 1 - r) for even N, tree 0 shifted by one (rank r has label r - 1 mod
  N) for odd N.
- Channels: the vector is cut into contiguous channel parts as NCCL 2.30's
  host cuts any all-reduce (:mod:`.nccl_host`, ``scheduleCollTasksToPlan``:
  cells of 16 KiB, 32 KiB of traffic, or 4 KiB with LL; fewer channels for small vectors, the
  remainder in the last used channel), or as ``parts`` gives them. The
  first half of the channels run on tree 0, the rest on tree 1
  (``connectTrees`` in ``src/graph/connect.cc`` puts search channel c on
  tree 0 and its copy c + nChannels on tree 1, and the communicator's
  channels are those doubled ones, so ``channels`` C is taken as that
  doubled count); a small vector that NCCL puts on channel 0 alone runs on
  tree 0 alone. Each channel walks its part in chunks of its chunkCount
  elements (the last one short): NCCL's tree chunk for the protocol, the
  element size and, for LL128, the part's bytes and N
  (:func:`.nccl_host.tree_chunk_elements`), or ``chunk`` for every channel.
- Schedule (``runTreeSplit`` in ``src/device/all_reduce.h``: the reduce up
  and the broadcast down run at once, the root reduces and sends down in one
  primitive). A rank at level L sends chunk k to its parent (reduce) at step
  k + L, after every child (levels below L) has sent it; the root, at level
  R = ceil(log2 N), has chunk k complete after step k + R - 1 and every rank
  copies chunk k to its children at step k + 2R - L. Up and down overlap in
  the pipeline: K chunks take K + 2R - 1 steps.

  NCCL 2.30 runs ``runTreeSplit`` for every protocol, except with Simple on
  a CUDA 11.2-11.3 build for sm_80 and newer (``runTreeUpDown``: all chunks
  up, then all down); that variant sends the same messages on every
  connection in the same order, at other steps.

Slots: ``(channel, element of the chunk, role)`` with role 0 the send up,
1 and 2 the sends to child 0 and child 1; each channel up to the last used
one has as many element slots as the longest message of any channel (its
chunk or its whole part). Where chunk index x chunkCount could pass the
proofs' bit-vectors the transfer uses the chunk index only where it names
a chunk (:meth:`TreeLayout.wide`; the same schedule).

Options: ``channels`` (1..64, default 2), ``count`` (elements, default 12),
``dtype`` (a spec dtype name, default ``float32``), ``protocol``
(``simple``, ``ll``, ``ll128``; default ``simple``), ``chunk`` (elements
per chunk on every channel in place of NCCL's; stands for NCCL_BUFFSIZE or a
tuner's chunk), ``parts`` (elements per channel in place of NCCL's split of
a collective alone in its plan, as on ``nccl-ring``).

>>> s = generate_tree(6, channels=2, chunk=1, count=4)
>>> [t["parent"] for t in s.meta["trees"]]
[[-1, 2, 4, 2, 0, 4], [1, 5, 3, 1, 3, -1]]
>>> generate_tree(4, channels=4, count=10_000).meta["channel_table"]
[{'tree': 0, 'count': 4096}, {'tree': 0, 'count': 4096}, {'tree': 1, 'count': 1808}]
>>> layout_of(channels=2, count=100_000, protocol="ll128").chunks(4)
[4320, 4320]
>>> layout_of(channels=2, count=100_000).chunks(4)  # 131,072 float32, at most the part
[53248, 46752]
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import indexing as ix
from ..layout import ScheduleError
from ..program import BITVEC, BITVEC_WIDTH, Program, Transfer
from ..schedule import COPY, REDUCE, Schedule
from . import nccl_host as host
from .nccl_ring import MAX_CHANNELS, Layout, _integer, most_per_link

ALGORITHM = "nccl-tree"
#: cells stay well inside the proofs' 20-bit vectors
MAX_CELLS = 1 << 17
DEFAULTS = {"channels": 2, "count": 12}
ROLES = 3


def _nonzero(x):
    return ix.where(x == 0, 1, x)


def root_level(n):
    """R: the root's level, ceil(log2 N) (0 for one rank)."""
    return ix.where(n >= 2, ix.floor_log2(_nonzero(n - 1)) + 1, 0)


def btree_level(x, n):
    """Level of label x in tree 0: log2 of its lowest set bit, R for the root."""
    return ix.where(x == 0, root_level(n), ix.floor_log2(ix.lowest_set_bit(_nonzero(x))))


def btree_parent(x, n):
    """Parent label of x >= 1 in tree 0 (``ncclGetBtree``'s ``up``)."""
    b = ix.lowest_set_bit(_nonzero(x))
    above = ix.floordiv(x, 2 * b) % 2 == 1  # x already has bit 2b: (x ^ b) | 2b = x - b
    return ix.where(above, x - b, ix.where(x + b < n, x + b, x - b))


def btree_child(x, n, which):
    """Child ``which`` (0 or 1) of label x in tree 0, -1 for none
    (``ncclGetBtree``'s ``down0``/``down1``)."""
    b = ix.lowest_set_bit(_nonzero(x))
    half = ix.floordiv(b, 2)
    room = n - 1 - x  # how far right a child may go
    right = ix.where(half < ix.largest_power_of_two(_nonzero(room)), half, ix.largest_power_of_two(_nonzero(room)))
    root_child = ix.where(n >= 2, ix.largest_power_of_two(_nonzero(n - 1)), -1)
    inner0 = ix.where(half >= 1, x - half, -1)
    inner1 = ix.where(ix.both(half >= 1, room >= 1), x + right, -1)
    return ix.where(x == 0, ix.where(which == 0, -1, root_child), ix.where(which == 0, inner0, inner1))


def to_label(r, n, tree):
    """Rank r's label in tree 0 or 1 (mirror for even N, shift for odd N)."""
    other = ix.where(n % 2 == 0, n - 1 - r, (r + n - 1) % n)
    return ix.where(tree == 0, r, other)


def to_rank(x, n, tree):
    """The rank with label x (-1 stays -1)."""
    other = ix.where(n % 2 == 0, n - 1 - x, (x + 1) % n)
    return ix.where(x < 0, -1, ix.where(tree == 0, x, other))


def tree_of(channel, channels):
    """The tree channel c runs on: the first half on tree 0, the rest on tree 1."""
    return ix.where(2 * channel >= channels, 1, 0)


def parents(n: int) -> list[list[int]]:
    """Both trees as parent arrays over ranks (-1 for the root)."""
    ranks = np.arange(n, dtype=np.int64)
    out = []
    for tree in (0, 1):
        x = to_label(ranks, n, tree)
        parent = to_rank(ix.where(x == 0, -1, btree_parent(x, n)), n, tree)
        out.append([int(p) for p in parent])
    return out


def trees(n: int) -> list[dict]:
    """Both trees over ranks: ``{"parent": [...], "children": [[...], ...]}``
    (-1 for the root's parent; each rank's children in NCCL's down0, down1
    order). Numpy over all ranks at once: N = 65536 in well under a second."""
    ranks = np.arange(n, dtype=np.int64)
    out = []
    for tree in (0, 1):
        x = to_label(ranks, n, tree)
        parent = to_rank(ix.where(x == 0, -1, btree_parent(x, n)), n, tree)
        kids = np.stack([to_rank(btree_child(x, n, w), n, tree) for w in (0, 1)], axis=1)
        out.append({"parent": parent.tolist(), "children": [[int(k) for k in row if k >= 0] for row in kids.tolist()]})
    return out


def tree_facts(n: int) -> dict:
    """Check that both trees are spanning binary trees over the n ranks, with
    :func:`btree_child` and :func:`btree_parent` describing the same edges,
    and say which ranks forward (have a child) in both trees. Numpy over all
    ranks at once; raises ValueError naming the first broken property."""
    ranks = np.arange(n, dtype=np.int64)
    interior = []
    for tree in (0, 1):
        x = to_label(ranks, n, tree)
        parent = to_rank(ix.where(x == 0, -1, btree_parent(x, n)), n, tree)
        kids = np.stack([to_rank(btree_child(x, n, w), n, tree) for w in (0, 1)])
        if np.count_nonzero(parent == -1) != 1:
            raise ValueError(f"N={n} tree {tree}: {np.count_nonzero(parent == -1)} roots")
        if ((parent < -1) | (parent >= n) | (parent == ranks)).any():
            raise ValueError(f"N={n} tree {tree}: a parent out of range")
        # every child names its parent, and every non-root is some rank's child exactly once
        listed = kids[kids >= 0]
        owner = np.broadcast_to(ranks, kids.shape)[kids >= 0]
        if not np.array_equal(parent[listed], owner):
            raise ValueError(f"N={n} tree {tree}: a child's parent is not the rank that lists it")
        if listed.size != n - 1 or np.unique(listed).size != n - 1:
            raise ValueError(f"N={n} tree {tree}: children lists do not cover the n - 1 non-roots once each")
        # no cycle: 2**17 > 65536 steps up from any rank reach past the root
        jump = np.where(parent < 0, n, parent)
        jump = np.append(jump, n)
        for _ in range(17):
            jump = jump[jump]
        if (jump[:n] != n).any():
            raise ValueError(f"N={n} tree {tree}: a cycle")
        interior.append((kids >= 0).any(axis=0))
    both = np.flatnonzero(interior[0] & interior[1])
    return {"ranks": n, "interior_in_both": both.tolist()}


@dataclass(frozen=True)
class TreeLayout:
    """The channel parts (a :class:`.nccl_ring.Layout`: NCCL's host split or
    the given ``parts``; for an all-reduce they do not depend on N) and
    each channel's chunkCount: ``chunk`` if given, else NCCL's tree chunk for
    the part (:func:`.nccl_host.tree_chunk_elements`, which depends on N
    for LL128: a Z3 term when N is one)."""

    parts_of: Layout
    chunk: int | None
    itemsize: int
    protocol: str

    @property
    def channels(self) -> int:
        return self.parts_of.channels

    @property
    def count(self) -> int:
        return self.parts_of.count

    def parts(self, n=None) -> list:
        """Elements of every channel, channel 0 first (0 where NCCL leaves it
        empty), as ints (an all-reduce's split does not depend on N), or the
        given Z3 terms (:func:`sizes_program` in the proofs)."""
        return [p if ix._symbolic(p) else int(p) for p in self.parts_of.parts(2)]

    def chunks(self, n) -> list:
        """chunkCount of every channel (1 for a channel left empty)."""
        if self.chunk is not None:
            return [self.chunk] * self.channels
        return [host.tree_chunk_elements(self.itemsize, self.protocol, p, n) if p else 1 for p in self.parts()]

    def used(self):
        """Channels up to the last non-empty one: those that have slots (at least 1)."""
        parts = self.parts()
        if any(ix._symbolic(p) for p in parts):
            return _most([ix.where(p > 0, c + 1, 0) for c, p in enumerate(parts)], 1)
        return max([c + 1 for c, p in enumerate(parts) if p] or [1])

    def _ints(self, n) -> list[int] | None:
        chunks = self.chunks(n)
        return chunks if all(isinstance(k, int) for k in chunks) else None

    def chunk_of(self, c, n):
        """Channel c's chunkCount: ``chunk`` itself when given (every channel
        has it), a plain int when every channel has the same."""
        if self.chunk is not None:
            return self.chunk
        chunks = self.chunks(n)
        if self._ints(n) is not None and len(set(chunks)) == 1:
            return chunks[0]
        return self.parts_of._pick(chunks, c)

    def width(self, n):
        """Element slots of one channel: the longest message of any channel,
        min(chunkCount, part), at least 1."""
        return _most([_least(chunk, part) for part, chunk in zip(self.parts(), self.chunks(n))], 1)

    def short(self, n) -> bool:
        """Whether some channel's chunk is below the width (its slots past the chunk stay idle)."""
        ints = self._ints(n)
        return ints is None or min(ints) < self.width(n)

    def wide(self, n) -> bool:
        """Whether k x chunkCount may pass the proofs' bit-vectors for some
        k the transfer function meets (|k| below the chunks plus 2 R <= 32,
        N <= 65536); then the transfer uses k only where it names a chunk."""
        ints = self._ints(n)
        return ints is None or (self.rounds(n) + 32) * max(ints) + self.width(n) >= 1 << (BITVEC_WIDTH - 1)

    def rounds(self, n):
        """Chunks of the channel with the most: max divUp(part, chunkCount)."""
        return _most([-(-part // chunk) if isinstance(chunk, int) else ix.floordiv(part + chunk - 1, chunk)
                      for part, chunk in zip(self.parts(), self.chunks(n))], 0)


def _least(a, b):
    """min(a, b): a Python int for ints, a Z3 term otherwise."""
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else ix.where(a < b, a, b)


def _most(values: list, start):
    """max(start, *values): a Python int for ints, a Z3 term otherwise."""
    most = start
    for value in values:
        most = max(most, value) if isinstance(most, int) and isinstance(value, int) else ix.where(value > most, value, most)
    return most


def tree_program(channels=None, chunk=None, count=None, dtype=None, protocol=None, parts=None) -> Program:
    """The transfer function (see the module text)."""
    layout = layout_of(channels, chunk, count, dtype, protocol, parts)
    return program_of(layout, lambda: tree_program(channels, chunk, count, dtype, protocol, parts), title=_title(layout), meta=_meta(layout))


def sizes_program(chunk=1, count=1) -> Program:
    """The transfer function on 1 channel (tree 0, the whole vector its
    part) with ``chunk`` and ``count`` as parameters: Z3 variables in the
    proofs (:mod:`collspec.proofs.nccl_tree_sizes`), so one proof covers
    every chunk and count. Built by :func:`program_of` as
    :func:`tree_program` is; at ints its schedule is
    ``generate_tree(n, channels=1, chunk=chunk, count=count)``'s (a test
    compares them). Ints are checked as :func:`layout_of` checks them."""
    layout = sizes_layout(chunk, count)

    def title(n):
        return f"{ALGORITHM} allreduce, {n} ranks, 1 channel, chunk {chunk}, {count} elements"

    return program_of(layout, lambda chunk, count: sizes_program(chunk, count), {"chunk": chunk, "count": count}, title,
                      {"channels": 1, "chunk": chunk, "count": count})


def sizes_layout(chunk, count) -> TreeLayout:
    """:func:`sizes_program`'s layout: 1 channel, its part the whole
    ``count``, chunkCount ``chunk`` (ints checked as :func:`layout_of`
    checks them; Z3 terms taken as they are)."""
    if not ix._symbolic(chunk, count):
        layout_of(1, chunk, count)
    split = Layout("allreduce", count, 1, 1, 1, None, 0, host.element_size(host.DEFAULT_DTYPE), host.DEFAULT_PROTOCOL, equal=(count,))
    return TreeLayout(split, chunk, split.itemsize, split.protocol)


def program_of(layout: TreeLayout, factory, params=None, title=None, meta=None) -> Program:
    """The :class:`Program` of ``layout``: its steps, slots and transfer.
    Every nccl-tree program is built here, the generator's
    (:func:`tree_program`) and the one the sizes row proves
    (:func:`sizes_program`), so they differ only in the layout's values."""
    C = layout.channels

    def steps(n):
        return ix.where(n >= 2, layout.rounds(n) + 2 * root_level(n) - 1, 0)

    def slots(n):
        return layout.used() * layout.width(n) * ROLES

    def transfer(n, s, r, j):
        W = layout.width(n)
        c = ix.floordiv(j, W * ROLES)
        e = ix.floordiv(j, ROLES) % W
        role = j % ROLES
        K = layout.chunk_of(c, n)
        tree = tree_of(c, C)
        x = to_label(r, n, tree)
        level = btree_level(x, n)
        up = role == 0
        k = ix.where(up, s - level, s - 2 * root_level(n) + level)
        peer = ix.where(up, ix.where(x == 0, -1, btree_parent(x, n)), btree_child(x, n, role - 1))
        conditions = [peer >= 0, k >= 0] + ([e < K] if layout.short(n) else [])
        if layout.wide(n):  # k x chunk past the bit-vectors for k past the last chunk: use k only where it is a chunk
            rounds = layout.rounds(n)
            conditions.append(k < rounds)
            k = ix.where(ix.both(k >= 0, k < rounds), k, 0)
        cell_in_part = k * K + e
        active = ix.both(*conditions, cell_in_part < layout.parts_of.part(c, n))
        cell = layout.parts_of.off(c, n) + cell_in_part
        return Transfer(active, to_rank(peer, n, tree), cell, cell, ix.where(up, REDUCE, COPY))

    def label(n, s):
        return "reduce up / broadcast down", f"pipeline step {int(s)}"

    def capacity(n, built):
        most = 1
        for step in built:
            if len(step):
                most = max(most, most_per_link(n, step))
        return most

    return Program(
        ALGORITHM, "allreduce", lambda n: layout.count, steps, slots, transfer, label, factory, params=params or {},
        capacity=capacity, sort=BITVEC, title=title, meta=meta or {},
    )


def _title(layout: TreeLayout):
    """The schedule's title at N ranks."""

    def title(n):
        C = layout.channels
        if layout.chunk is not None:
            chunks = str(layout.chunk)
        else:  # NCCL's chunkCount of each used channel (a message carries at most the part)
            size = layout.itemsize
            used = {host.tree_chunk_bytes(layout.protocol, p * size, n) // size for p in layout.parts() if p} or {1}
            chunks = "/".join(str(k) for k in sorted(used, reverse=True))
        nccl = "" if layout.chunk is not None else f", {host.PROTOCOLS[layout.protocol][0]}, {layout.itemsize}-byte elements"
        return f"{ALGORITHM} allreduce, {n} ranks, {C} channels, chunk {chunks}, {layout.count} elements{nccl}"

    return title


def _meta(layout: TreeLayout) -> dict:
    """The options that fix the schedule's shape: channels, count, and chunk
    and parts where given (NCCL's otherwise)."""
    meta = {"channels": layout.channels, "chunk": layout.chunk, "count": layout.count}
    if layout.chunk is None:
        del meta["chunk"]
    if layout.parts_of.equal is not None:
        meta["parts"] = list(layout.parts())
    return meta


def layout_of(channels=None, chunk=None, count=None, dtype=None, protocol=None, parts=None) -> TreeLayout:
    """The checked options (ScheduleError naming the option otherwise)."""
    channels = _integer("channels", DEFAULTS["channels"] if channels is None else channels, 1, MAX_CHANNELS, ALGORITHM)
    try:
        itemsize = host.element_size(host.DEFAULT_DTYPE if dtype is None else dtype)
        protocol = host.protocol_of(host.DEFAULT_PROTOCOL if protocol is None else protocol)
    except ScheduleError as error:
        raise ScheduleError(f"{ALGORITHM}: {error}") from None
    if chunk is not None:
        chunk = _integer("chunk", chunk, 1, MAX_CELLS, ALGORITHM)
    if count is None and isinstance(parts, (list, tuple)) and all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in parts):
        count = sum(int(p) for p in parts)
    count = _integer("count", DEFAULTS["count"] if count is None else count, 0, MAX_CELLS, ALGORITHM)
    given = None
    if parts is not None:
        if isinstance(parts, (int, np.integer)) and not isinstance(parts, bool):
            parts = [parts]
        if not isinstance(parts, (list, tuple)) or not 1 <= len(parts) <= channels:
            raise ScheduleError(f"{ALGORITHM}: option parts must list 1 to {channels} channel parts (one per channel), got {parts!r}")
        parts = [_integer("parts", p, 0, MAX_CELLS, ALGORITHM) for p in parts]
        if sum(parts) != count:
            raise ScheduleError(f"{ALGORITHM}: option parts must add up to count ({count}), got {'+'.join(map(str, parts))} = {sum(parts)}")
        given = tuple(parts) + (0,) * (channels - len(parts))
    split = Layout("allreduce", count, channels, 1, 1, None, 0, itemsize, protocol, equal=given)
    layout = TreeLayout(split, chunk, itemsize, protocol)
    slots = layout.used() * int(layout.width(2)) * ROLES  # the widest: LL128's chunk only shrinks as N grows
    if slots >= 1 << (BITVEC_WIDTH - 1):
        raise ScheduleError(f"{ALGORITHM}: options count={count}{'' if chunk is None else f', chunk={chunk}'}"
                            f"{'' if given is None else ', parts=' + ','.join(map(str, parts))} give {slots} slots a step (channels used x longest "
                            f"message x {ROLES}), past the proofs' {BITVEC_WIDTH}-bit vectors (at most {(1 << (BITVEC_WIDTH - 1)) - 1}); "
                            f"use a smaller chunk or count")
    return layout


def channel_table(n: int, **options) -> list[dict]:
    """One entry per channel NCCL uses: its tree (0 or 1) and the elements
    it carries, as ``collspec export --format json`` writes them."""
    layout = layout_of(**options)
    return [{"tree": int(tree_of(c, layout.channels)), "count": int(p)} for c, p in enumerate(layout.parts(n)) if int(p)]


def call_program(n: int, **options) -> Program:
    """The program whose terms give the schedule of a call at n ranks.

    At 1 channel: :func:`sizes_program` at the call's chunk (NCCL's
    chunkCount at n when none is given) and count, with chunk and count its
    parameters, so the schedule is enumerated from the very terms the row
    ``nccl-tree.allreduce-sizes-exactly-once`` proves (N, chunk and count
    variables given their values), under the generator's title and meta.
    Otherwise :func:`tree_program`."""
    made = tree_program(**options)
    layout = layout_of(**options)
    if layout.channels != 1:
        return made
    proved = sizes_program(int(layout.chunk_of(0, n)), layout.count)
    return replace(proved, title=made.title, meta=made.meta)


def generate_tree(n: int, channels=None, chunk=None, count=None, dtype=None, protocol=None, parts=None) -> Schedule:
    """The ``nccl-tree`` all-reduce on n ranks, its trees in ``meta["trees"]``
    (at 1 channel enumerated from the sizes row's terms: :func:`call_program`)."""
    options = {"channels": channels, "chunk": chunk, "count": count, "dtype": dtype, "protocol": protocol, "parts": parts}
    schedule = call_program(n, **options).schedule(n)
    schedule.meta["trees"] = trees(n)
    schedule.meta["channel_table"] = channel_table(n, **options)
    return schedule


def program_factory(**options) -> Program:
    return tree_program(**options)
