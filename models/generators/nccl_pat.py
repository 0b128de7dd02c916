"""``nccl-pat``: NCCL's Parallel Aggregated Trees (reduce-scatter, all-gather).

What ``PatRSAlgorithm`` and ``PatAGAlgorithm`` (``src/include/collectives.h``)
and the PAT primitives (``src/device/prims_simple.h``) do, as one
transfer function per collective; docs/nccl.md says what is left out.

Reduce-scatter. Rank r holds, for the block of rank ``r + s`` (s the
*offset*, 0 <= s < N), a partial sum; it sends it to the rank at distance
``b = 2**d``, d the lowest set bit of s (PAT connects every rank to the
ranks at +-2**d and sends to ``rank + 2**d``), where it becomes the partial
for offset ``s - b`` of the same block. So the block of rank D is reduced
over a binomial tree of offsets: the data for D hops along the set bits of
the offset, lowest first, and a partial leaves a rank only after every
larger offset that feeds it has arrived. Offsets of N or more do not exist
for a rank count that is not a power of two: those steps are skipped.

Aggregation (NCCL 2.30's constructors). postFreq doubles from 1 while a
chunk holds at least twice the aggregated data (``chunk // (count *
postFreq) >= 2``) and while below N / 2; the aggregation A is postFreq
doubled through the NCCL_STEPS (8) loop, still below N / 2: min(8
postFreq, the most), so NCCL runs A = min(8, most) .. most (1 only for
N <= 3) and only postFreq depends on the size. With ``P`` the power of two
at or above N and ``delta = P / A``:

1. for ``as = delta - 1`` down to 1: the offsets ``s = i * delta + as``
   (i < A) share their lowest set bit, so every rank sends those partials
   to the one peer ``rank + lowbit(as)`` (NCCL's phases 0 and 1);
2. then for ``scale = 1, 2, ..., A/2``: the offsets ``s = (2i + 1) * scale
   * delta`` go to ``rank + scale * delta`` (phases 2 and 3).

Each of these steps is cut into messages of postFreq blocks, one schedule
step per message. A message is one slot of the connection as NCCL posts it
(``postSend`` in ``patReduce``/``patCopy``, ``src/device/prims_simple.h``):
the blocks the ops wrote into that slot, each at its ``sendOffset``. Slot
j of a schedule step is position ``j // cw`` of the message: NCCL's op
``a = m x postFreq + position`` of the step, whose block is ``i = a`` for
the all-gather and ``i = mirrorInvert(a)`` for the reduce-scatter. The
reduce-scatter writes some slots ahead (``stepOffset``: a partial for a
later message of a connection is written, and added to, before the slots
before it are posted); what the receiver gets is the slot when it is
posted, so the step is that message, in the order NCCL posts them. The
all-gather is the same tree run backwards, copying, each message from
``rank + b`` to ``rank`` (``rank - 2**d`` as NCCL's PAT all-gather sends),
in NCCL's order: the scales A/2 down to 1, then the steps ``as`` in
``nextAs()`` order (:func:`next_as`), not the reduce-scatter's order
reversed.

Blocks are ``count`` elements, walked in loops of ``chunk`` elements (the
last one short); a loop runs all the steps. ``chunk`` defaults to NCCL's
PAT chunk for the bytes (:func:`.nccl_host.pat_chunk_elements`: 64 KiB to
512 KiB over the element size of ``dtype``, default float32), so it
depends on N; ``count`` is one channel's elements per rank.

>>> s = generate_pat("reduce_scatter", 8, aggregation=1, count=1)
>>> len(s.steps), [(int(a), int(b), int(c)) for a, b, c in zip(s.steps[0].src, s.steps[0].dst, s.steps[0].src_chunk)][:2]
(7, [(0, 1, 7), (1, 2, 0)])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import indexing as ix
from ..layout import ScheduleError
from ..program import BITVEC, Program, Transfer
from ..schedule import COPY, REDUCE, Schedule
from . import nccl_host as host
from .nccl_ring import _integer, most_per_link

ALGORITHM = "nccl-pat"
MAX_CELLS = 1 << 18
#: at most this many (rank, slot) points in one step and transfers in all (4096 ranks, count 1, fit)
MAX_SLOTS = 1 << 24
MAX_TRANSFERS = 1 << 25
DEFAULTS = {"count": 2}


def _nonzero(x):
    return ix.where(x == 0, 1, x)


def pow2_above(n):
    """P: the smallest power of two >= n (n >= 1)."""
    return ix.where(n <= 1, 1, 2 * ix.largest_power_of_two(_nonzero(n - 1)))


def max_aggregation(n):
    """The most aggregation NCCL reaches: doubling from 1 while below N / 2 (integer)."""
    return pow2_above(_nonzero(ix.floordiv(n, 2)))


def _plain(value):
    """``value`` as a Python int where it is a number (numpy's 0-d results of
    the :mod:`~collspec.models.indexing` helpers), a Z3 term unchanged."""
    return value if ix._symbolic(value) else int(value)


def chunk_fits(chunk, count):
    """The largest power of two <= chunk // count (at least 1; count 0 as
    1), at most 2**16 (above every aggregation of fewer than 2**17 ranks):
    where the constructors' doubling of postFreq ends if N does not stop it.
    Written with :mod:`~collspec.models.indexing` helpers, so that chunk and
    count may be Z3 terms (the proofs of several loops); an int for ints."""
    fits = ix.floordiv(chunk, _nonzero(count))  # doubling while A <= chunk / (2 count) ends at the largest power of two <= chunk / count
    return _plain(ix.largest_power_of_two(ix.where(fits >= 1, fits, 1)))  # floor_log2 stops at 2**16


def loop_count(chunk, count):
    """Loops of ``chunk`` elements that walk ``count`` elements: ceil(count / chunk) (chunk >= 1)."""
    return _plain(ix.floordiv(count + chunk - 1, chunk))


def chunk_width(chunk, count):
    """Slots per block of a message: the elements of a chunk that exist,
    min(chunk, count), at least 1."""
    least = ix.where(chunk < count, chunk, count)
    return _plain(ix.where(least >= 1, least, 1))


def _capped(n, fits):
    most = max_aggregation(n)
    return ix.where(fits < most, fits, most)


def post_frequency(n, chunk, count):
    """postFreq: the aggregation NCCL 2.30's PAT constructors reach before the
    NCCL_STEPS loop, doubling from 1 while a chunk holds at least twice the
    aggregated channel data (``chunk // (count * A) >= 2``) and below N / 2."""
    return _capped(n, chunk_fits(chunk, count))


def nccl_aggregation(n, post):
    """aggFactor: postFreq doubled three more times (the ``stepDepth`` =
    NCCL_STEPS = 8 loop), still below N / 2: min(8 postFreq, the maximum)."""
    most = max_aggregation(n)
    return ix.where(8 * post < most, 8 * post, most)


def _log2(power):
    return ix.floor_log2(_nonzero(power))


def _reverse(x, width):
    """x with its log2(width) low bits reversed (width a power of two)."""
    result = 0 * x
    for k in range(ix.RANK_BITS):
        bit = ix.shift_right(x, k) % 2
        result = result + ix.where(ix.both(bit == 1, (1 << k) < width), ix.shift_right(width, k + 1), 0)
    return result


def next_as(p, delta):
    """The p-th (from 0) step ``as`` of NCCL's PAT all-gather after its scale
    steps (``PatAGAlgorithm::nextAs``, NCCL 2.30): a pre-order walk of the
    bits below delta. Taking the highest bit h = delta / 2: step 0 is h,
    steps 1 .. h - 1 are h plus the walk of delta / 2 from its step 0, and
    steps h .. delta - 2 are the walk of delta / 2. delta 4: 2, 3, 1; delta 8:
    4, 6, 7, 5, 2, 3, 1."""
    q = p + 1
    h = ix.floordiv(delta, 2)
    value = 0 * q
    done = q < 1
    for _ in range(ix.RANK_BITS):
        live = ix.both(ix.negate(done), h >= 1)
        here = ix.both(live, q == 1)
        left = ix.both(live, q != 1, q <= h)
        value = value + ix.where(ix.either(here, left), h, 0)
        q = ix.where(left, q - 1, ix.where(ix.both(live, q > h), q - h, q))
        done = ix.either(done, here)
        h = ix.floordiv(h, 2)
    return value


def _ceil_log2(x):
    return ix.where(x <= 1, 0, ix.floor_log2(_nonzero(x - 1)) + 1)


def steps_per_loop(n, aggregation, post):
    """Messages in a loop, one schedule step each: (delta - 1) steps ``as`` of
    A / postFreq messages, and for each scale 2**k (k < log2 A) max(1, A /
    (2**(k+1) postFreq)) messages (none for one rank)."""
    delta = ix.floordiv(pow2_above(n), aggregation)
    q = ix.floordiv(aggregation, post)
    scales = (q - 1) + _log2(aggregation) - _log2(q)
    return ix.where(n >= 2, (delta - 1) * q + scales, 0)


def _scale_message(t2, q, aggregation, backwards):
    """Scale-stage message t2 -> (k, message m within scale 2**k). Forwards
    (reduce-scatter): k = 0, 1, ...; backwards (all-gather): k from log2 A - 1 down."""
    log_q, log_a = _log2(q), _log2(aggregation)
    if not backwards:
        many = t2 < q - 1
        k_many = log_q - _ceil_log2(_nonzero(q - t2))
        m_many = t2 - (q - ix.shift_right(q, k_many))
        return ix.where(many, k_many, log_q + t2 - (q - 1)), ix.where(many, m_many, 0)
    single = log_a - log_q
    first = t2 < single
    t3 = t2 - single
    j = ix.floor_log2(_nonzero(t3 + 1))
    return ix.where(first, log_a - 1 - t2, log_q - 1 - j), ix.where(first, 0, t3 + 1 - ix.shift_left(1, j, like=t3))


def hop(n, t, e, aggregation, post, reduce):
    """Message t of a loop, block e of the message: ``(offset s, distance b, used)``.

    Reduce-scatter: steps ``as`` = delta - 1 down to 1, then scales 1, 2, ...
    A / 2; all-gather: scales A / 2 down to 1, then ``as`` in :func:`next_as`
    order. A step of L blocks (L = A, or A / (2 scale)) is cut into messages
    of postFreq blocks (one message for a scale step of fewer); e is the
    block's position in its message, so NCCL's op is ``a = m x (blocks a
    message) + e`` and its block number i is a for the all-gather and
    ``mirrorInvert(a, L) = L - 1 - reverse(a)`` for the reduce-scatter
    (reduce-scatter message m holds the i of one residue modulo the step's
    message count, position e the mirror of e)."""
    delta = ix.floordiv(pow2_above(n), aggregation)
    q = ix.floordiv(aggregation, post)
    first_steps = (delta - 1) * q
    scale_steps = (q - 1) + _log2(aggregation) - _log2(q)
    in_as = t < first_steps if reduce else t >= scale_steps
    t1 = t if reduce else t - scale_steps
    p, m1 = ix.floordiv(t1, _nonzero(q)), t1 % _nonzero(q)
    low = delta - 1 - p if reduce else next_as(p, delta)
    k, m2 = _scale_message(t - first_steps if reduce else t, q, aggregation, not reduce)
    scale = ix.shift_left(1, ix.where(in_as, 0, k), like=t)
    last = ix.where(in_as, aggregation, ix.floordiv(aggregation, _nonzero(2 * scale)))
    messages = ix.where(in_as, q, ix.where(ix.floordiv(q, _nonzero(2 * scale)) >= 1, ix.floordiv(q, _nonzero(2 * scale)), 1))
    per = ix.floordiv(last, _nonzero(messages))
    m = ix.where(in_as, m1, m2)
    a = m * per + e  # NCCL's a: message m, position e
    i = last - 1 - _reverse(a, last) if reduce else a  # mirrorInvert(a, lastA) for the reduce-scatter
    s = ix.where(in_as, i * delta + low, (2 * i + 1) * scale * delta)
    b = ix.where(in_as, ix.lowest_set_bit(_nonzero(low)), scale * delta)
    return s, b, ix.both(e < per, s < n)


def _size(name, value, low):
    """A checked chunk or count: an integer in low..MAX_CELLS, or a Z3 term
    (the proofs of every size: their scope bounds it)."""
    return value if ix._symbolic(value) else _integer(name, value, low, MAX_CELLS, ALGORITHM)


def _options(aggregation, post, chunk, count, dtype):
    if chunk is not None:
        chunk = _size("chunk", chunk, 1)
    count = _size("count", DEFAULTS["count"] if count is None else count, 0)
    try:
        itemsize = host.element_size(host.DEFAULT_DTYPE if dtype is None else dtype)
    except ScheduleError as error:
        raise ScheduleError(f"{ALGORITHM}: {error}") from None
    for name, value in (("aggregation", aggregation), ("post", post)):
        if value is not None:
            value = _integer(name, value, 1, 1 << 16, ALGORITHM)
            if value & (value - 1):
                raise ScheduleError(f"{ALGORITHM}: option {name} must be a power of two, got {value}")
    if aggregation is not None and post is not None and post > aggregation:
        raise ScheduleError(f"{ALGORITHM}: option post ({post}) must be at most aggregation ({aggregation})")
    return aggregation, post, chunk, count, itemsize


def chunk_table(collective: str, chunk, count: int, itemsize: int) -> list[tuple[int, int]]:
    """The chunk in elements as a table over N (:func:`.nccl_host.select`):
    the one entry ``(0, chunk)`` for a given chunk, else NCCL's PAT chunk."""
    if chunk is not None:
        return [(0, chunk)]
    return [(least, size // itemsize) for least, size in host.pat_chunk_choices(collective, count, itemsize)]


def pat_program(collective: str, aggregation=None, chunk=None, count=None, post=None, dtype=None) -> Program:
    """The transfer function of ``collective`` (see the module text)."""
    aggregation, post, given, count, itemsize = _options(aggregation, post, chunk, count, dtype)
    reduce = collective == "reduce_scatter"
    table = chunk_table(collective, given, count, itemsize)

    def by_chunk(value):  # a function of the chunk, as a function of N (one entry: a constant)
        return lambda n: host.select(n, [(least, value(c)) for least, c in table])

    chunk_of = by_chunk(lambda c: c)
    loops = by_chunk(lambda c: loop_count(c, count))
    cw = by_chunk(lambda c: chunk_width(c, count))  # slots per block of a message: the elements of a chunk that exist
    fits = by_chunk(lambda c: chunk_fits(c, count))

    def pf(n):
        derived = _capped(n, fits(n))
        if post is not None:
            return post
        return derived if aggregation is None else ix.where(derived < aggregation, derived, aggregation)

    def agg(n):
        return nccl_aggregation(n, pf(n)) if aggregation is None else aggregation

    def steps(n):
        return loops(n) * steps_per_loop(n, agg(n), pf(n))

    def transfer(n, s, r, j):
        per = _nonzero(steps_per_loop(n, agg(n), pf(n)))
        loop = ix.floordiv(s, per)
        t = s - loop * per
        e, x = ix.floordiv(j, cw(n)), j % cw(n)
        offset, b, used = hop(n, t, e, agg(n), pf(n), reduce)
        element = loop * cw(n) + x  # cw is the chunk wherever there is a second loop
        # r + offset < 2N and b <= offset < N where a transfer is active: one
        # conditional subtraction, the same value as % N there (linear for Z3)
        block = ix.wrap(r + offset - (0 if reduce else b), n)
        dst = ix.wrap(r + b, n) if reduce else ix.wrap(r - b, n)
        cell = block * count + element
        return Transfer(ix.both(used, element < count), dst, cell, cell, REDUCE if reduce else COPY)

    def label(n, s):
        per = int(steps_per_loop(n, agg(n), pf(n)))
        loop, t = divmod(int(s), per)
        offset, b, _ = hop(n, np.int64(t), np.int64(0), agg(n), pf(n), reduce)
        return ("reduce-scatter" if reduce else "all-gather"), f"loop {loop} message {t}: distance {int(b)}, first offset {int(offset)}"

    def capacity(n, built):
        most = 1
        for step in built:
            if len(step):
                most = max(most, most_per_link(n, step))
        return most

    return Program(
        ALGORITHM, collective, lambda n: n * count, steps, lambda n: pf(n) * cw(n), transfer, label,
        lambda: pat_program(collective, aggregation, given, count, post, dtype), capacity=capacity, sort=BITVEC,
        title=lambda n: f"{ALGORITHM} {collective}, {n} ranks, aggregation {int(agg(n))}, postFreq {int(pf(n))}, chunk {int(chunk_of(n))}, {count} elements per rank",
        meta={"aggregation": aggregation, "post": post, "chunk": given, "count": count, "dtype": host.DEFAULT_DTYPE if dtype is None else dtype},
        choices={"aggregation": agg, "post": pf},
    )


def sized_program(collective: str, chunk: int, count: int, dtype=None) -> Program:
    """The program of a call with ``chunk`` and ``count`` given and NCCL's
    own aggregation and postFreq, with chunk and count as its options
    (``params``): its schedule is the enumeration of the term
    ``pat_program(collective, chunk=..., count=...)`` builds with chunk and
    count solver variables, given their values (:mod:`collspec.models.program`),
    which is the term the ``nccl-pat.*-sizes-exactly-once`` rows prove
    (:mod:`collspec.proofs.nccl_pat_sizes`), not a second run of this
    module on numbers."""
    made = pat_program(collective, chunk=chunk, count=count, dtype=dtype)
    return dataclasses.replace(made, params={"chunk": made.meta["chunk"], "count": made.meta["count"]},
                               factory=lambda chunk, count: pat_program(collective, chunk=chunk, count=count))


def generate_pat(collective: str, n: int, aggregation=None, chunk=None, count=None, post=None, dtype=None) -> Schedule:
    made = pat_program(collective, aggregation, chunk, count, post, dtype)
    most = int(max_aggregation(n))
    if aggregation is not None and aggregation > most:
        raise ScheduleError(f"{ALGORITHM}: option aggregation must be at most {most} for {n} ranks (NCCL stops doubling it at N/2), got {aggregation}")
    if n * made.chunks(1) > MAX_CELLS:
        raise ScheduleError(f"{ALGORITHM}: option count gives {n * made.chunks(1)} cells, more than {MAX_CELLS}")
    width, count = int(made.width(n)), made.meta["count"]
    chunk = int(host.select(n, chunk_table(collective, made.meta["chunk"], count, host.element_size(made.meta["dtype"]))))
    if n * width > MAX_SLOTS or n * (n - 1) * count > MAX_TRANSFERS:
        raise ScheduleError(f"{ALGORITHM}: ranks {n} with count {count} and chunk {chunk} is beyond what is enumerated "
                            f"({n * (n - 1) * count} transfers, {n * width} slots a step; at most {MAX_TRANSFERS} and {MAX_SLOTS}): "
                            "use fewer ranks, a smaller count or chunk")
    if made.meta["chunk"] is not None and aggregation is None and post is None:
        made = sized_program(collective, made.meta["chunk"], count, dtype)  # the term the sizes rows prove
    return made.schedule(n)


def generator(collective: str):
    def generate(n: int, aggregation=None, chunk=None, count=None, post=None, dtype=None) -> Schedule:
        return generate_pat(collective, n, aggregation=aggregation, chunk=chunk, count=count, post=post, dtype=dtype)

    return generate


def program_factory(collective: str):
    return lambda **options: pat_program(collective, **options)
