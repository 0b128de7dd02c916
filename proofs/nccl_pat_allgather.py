"""nccl-pat's all-gather copies every block exactly once to every rank: N in 10..65536 at aggregation 8, N in 2..9, and N in 2..65536 at postFreq 2 and at postFreq 4.

The induction of :mod:`collspec.proofs.induction` on ``nccl-pat``'s own
all-gather transfer function
(:func:`collspec.models.generators.nccl_pat.pat_program`), N symbolic on
bit-vectors, count 1, one loop, in four rows (:data:`OPTIONS`):

- ``nccl-pat.allgather-exactly-once``: N in 10..65536, aggregation 8,
  postFreq 1, chunk 1: what NCCL 2.30's ``PatAGAlgorithm`` constructor
  chooses at chunk 1, count 1 from N = 10 (most of this text);
- ``nccl-pat.allgather-below-10-exactly-once``: N in 2..9 at chunk 1 and
  NCCL's own aggregation (1, 2 or 4 there);
- ``nccl-pat.allgather-postfreq-2-exactly-once``: N in 2..65536 at chunk 2
  and NCCL's own postFreq and aggregation (postFreq 2 from N = 4, so
  aggregations 2, 4, 8 and 16, messages of 2 blocks);
- ``nccl-pat.allgather-postfreq-4-exactly-once``: N in 2..65536 at chunk 4
  and NCCL's own postFreq and aggregation (postFreq 2 at N = 4, 5 and 4
  from N = 6, so aggregations 4, 8, 16 and 32, messages of 4 blocks; its
  runs from 34 ranks one run 34..65536 with P a term of N); the last
  section says what these three rows prove.

The invariant is stated from NCCL 2.30's definitions (``PatAGAlgorithm``
and its ``nextAs`` in ``src/include/collectives.h``), written here again
rather than taken from the generator. With P the power of two at or above
N, the aggregation A and delta = P / A, rank r's cell c is the copy of
block c at *offset* o = c - r mod N; offset o of low part l = o mod delta
and high part i = o / delta arrives once, from rank r + lowbit(o), where
it sits at offset o - lowbit(o):

- the scale steps A/2 down to 1 first: the offsets with l = 0,
  i = (2 m + 1) 2**k, come in message A / 2**(k+1) - 1 + m (one block a
  message at postFreq 1);
- then the steps ``as`` in ``nextAs`` order, a pre-order walk of the bits
  below delta (children in decreasing order), in which ``as`` = l comes at
  position popcount(l) - 1 + delta - lowbit(l) - l (:func:`position`); step
  ``as`` has A messages, block i in message i: offset o arrives in message
  A - 1 + A position(l) + i.

That message number is T(o) (:func:`arrival`). The claim after s steps:
the cell at offset o holds block c (rank c's input, once) when o = 0 or
T(o) < s, and holds nothing (no data) otherwise. The witness that writes
cell (r, c) is slot 0 of rank r + lowbit(o).

Proved vs argued. Z3 decides these queries:

0. ``choice`` (:func:`collspec.proofs.nccl_pat.own_choice_query`): the
   program of a user's call with chunk 1 and count 1 only
   (:func:`user_program`, aggregation and postFreq left to the generator)
   chooses aggregation 8 and postFreq 1 with its own choice functions
   (``Program.choices``: the ``agg`` and ``pf`` its steps, width and
   transfers call) for every N of the scope;
1. ``rotation`` (:func:`transfer_rotation_query`), on the generator's own
   transfer function, every N of the scope: rank r's transfer in slot j at
   step s has the activity and op of rank 0's, and its destination and cells
   are rank 0's (which are in 0..N-1) plus r mod N;
2. ``rotation`` of the ends (:func:`ends_rotation_query`): the program has
   N cells, and the all-gather's inputs and outputs
   (:data:`collspec.proofs.induction.EXPECTED`) at rank r are rank 0's
   with every rank and cell turned by r;
3. ``turning`` (:func:`turning_queries`): the arithmetic mod N the
   invariant is written in (a - r and a + r mod N stay in 0..N-1 and undo
   each other; the offset of a from r is that of a - d from r - d;
   (r - d) + w is (r + w) - d), over the integers, and lowbit(o) is in
   0..N-1 (on bit-vectors). The bit-vector terms of the other queries
   compute the integers' values: with a, r, d, w in 0..N-1 and
   N <= 65536, every sum or difference they take (two numbers of 0..N-1,
   then N added or subtracted once) lies inside the signed 20-bit range,
   where bit-vector addition, subtraction and signed comparison are the
   integers' (the step from integers to bit-vectors is this argument; on
   bit-vectors these identities of adders took Z3 40 s of CPU);
3b. ``turning`` of the invariant (:func:`invariant_turning_query`): for
   every N of the scope, s >= 0 and r, c, x, k, d in 0..N-1, ``holds`` and
   ``defined`` at (r, c, x, k) equal their values at every value turned
   back by d, and the writer and source of the turned cell are those of
   (r, c) turned back by d, the same slot. Over the integers (the argument
   of 3 carries it to bit-vectors: the invariant's terms are the same sums
   and differences, equalities, comparisons and function applications),
   with T and lowbit functions Z3 leaves free, so it holds for NCCL's T at
   every P; lowbit's values at the offsets asked are taken in 0..N-1,
   which the lowbit query of 3 decides (on bit-vectors the same query with
   NCCL's T reached no verdict in 40 to 55 s of CPU a P from P = 32);
4. ``cases``: every N in the scope lies in one of the ranges of
   :data:`RANGES` (10..16384, 16385..32768 and 32769..65536);
5. for each range, every query of the induction with the case
   ``low <= N <= high`` added, the invariant's P the power of two at or
   above N (restated in proofs/, a term of N: :func:`arrival` with no
   ``p``), and the rank of the query pinned to 0: r = 0 for the queries
   about a cell (r, c), q = 0 for the three about one transfer of rank q
   (in-range, same-index, reads-data). The pin is carried in
   ``Query.pin``, apart from the case (``Query.case``, whose cover is 4):
   the lemmas 1 to 3b and the argument below justify it.

The argument that carries 5 to every rank (not a Z3 query): turning every
rank and cell value v of a query (r, q, q2, x, the destinations, c, k and
the cells transfers name) to v - d mod N, slots and steps unchanged, maps
0..N-1 onto itself (3) and keeps every atom of every query true or false:
equalities between ranks or cells (a bijection), the transfer functions
(1 and 3: rank q - d's transfer is rank q's turned by d; a query reads a
transfer's destination and cells only where it is active), the invariant
and its witness (3b), and the ends (2). So each query holds at every r (q)
when it holds at r = 0 (q = 0): take d = r (d = q). With 4 (each query is
a universally quantified implication with the case among its premises),
the induction's queries hold for every N of the scope and every rank,
and the induction of :mod:`collspec.proofs.induction` gives the
all-gather of the program with aggregation 8 and postFreq 1 given. With 0
it is the user's call's: a query (``same``,
:func:`collspec.proofs.nccl_pat.chosen_same_query`) decides that the
user's call's program, its two choice terms replaced by 8 and 1, has the
given program's steps, width, cells and transfer at every N, step, rank
and slot; a term with a subterm replaced by a value equals the term
wherever the subterm has that value, which 0 decides. A test checks the invariant's
turning on numbers too, at every step for N = 17 and 40.

Why pinning pays: with r free, the solver meets the wrap-arounds mod N of
the program and the invariant for every rank; at r = 0 the offset is the
cell itself. Measured on z3-solver 5.4.1, 2 shared cores, CPU time of a
case's queries: with r free and one case per power of two P (P a number),
3 s at P = 16, 14 s at 256, 25 s at 512, about 60 s at 1024 and 95 s at
4096, no verdict at 65536 (200 million units a check); pinned, 2 to 7 s a
case from P = 16 to 4096, 12 to 16 s at 8192, 18 s at 16384, 45 s at
32768 and 55 s at 65536 (the heaviest check 83 million units; 160 s for
the row at load 1, 247 s at load 6). Pinned with P a term of N, a range
of N at once costs less than its powers of two one by one (load 5 to 6):
10..65536 in one range 94 s (unwritten-unchanged alone 52 s, 161 million
units); 10..16384 29 s against about 95 s for its 11 powers (10..4096 and
4097..16384 apart: 18 and 21 s); 16385..65536 52 s, 16385..32768 and
32769..65536 apart 17 and 28 s, against 66 and 71 s for P = 32768 and
65536 as numbers. Hence :data:`RANGES`.

Premises beyond the induction's: none; the options and 10 <= N <= 65536 are
the scope's. What stays bounded (N above 65536, postFreq above 4, several
loops) is listed in docs/proofs.md.

The rows with NCCL's own choice (below 10 ranks; postFreq 2; postFreq 4). They split
their N range into runs with one P, one aggregation A and one postFreq F
(:func:`collspec.proofs.nccl_pat.cases`, NCCL's choice restated there,
shared with the reduce-scatter's rows). The order above, for any A and F
(:func:`arrival`, :func:`place`): q = A / F messages of F blocks in a step
``as``; the one-message scales A/2 .. q (fewer blocks than F, scale 2**k
in message log2 A - 1 - k, block m = i / 2**(k+1) at place m) come first,
then scale 2**k < q in q / 2**(k+1) messages (block m in message m / F,
place m mod F), then the steps ``as`` in ``nextAs`` order (block i in
message i / F, place i mod F); the witness that writes (r, c) is rank r +
lowbit(o) in the slot of o's place (count 1: slot = place). Decided by Z3,
each query's case the run (:func:`run_case`: its bounds on N and the
generator's own P equal to the run's; the postFreq-2 row's last run,
18..65536, takes the invariant's P as a term of N, as the aggregation-8
row's ranges, and its ``same`` query replaces the call's own choice terms
by 16 and 2, as that row's; the postFreq-4 row's last run, 34..65536,
likewise with 32 and 4):

a. ``choice`` (:func:`runs_choice_query`): in each run the program of a
   user's call with only the row's chunk and count chooses the run's A
   and F with its own choice functions (``Program.choices``);
b. ``cases`` (:func:`runs_cover_query`): the runs, each with that P and
   that choice of A and F, cover the row's N range;
c. ``turning`` (:func:`runs_turning_queries`): the mod-N identities and
   lowbit as in 3 of the list above, and the invariant's turning as in 3b, at
   postFreq 2 and 4 with the block's place a further free function (the slot of
   the witness at (r, c) and at (r - d, c - d) is the same);
d. per run (:func:`run_queries`): ``same``, the user's call's program is
   the program with A and F given, at every step, rank and slot (its case
   carries a's choice too, which b covers); ``rotation`` of that given
   program's transfer and ends (1 and 2 of the list above, on the run's
   program); and every query of the induction on it with the invariant at
   the run's P, A and F, pinned to rank 0 (as 5 of the list above).

Argued, not a query: the turning argument above, run by run (each query
holds at every rank when it holds at rank 0, by the run's rotation lemmas
and c), so each run's induction holds for every N of the run; b puts
every N of the range in some run, and there, by ``same``, the program a
user's call builds is the one proved. Cost (z3-solver 5.4.1, 2 shared
cores): 10 to 13 s of CPU for the row below 10 (load 4 to 7); for
postFreq 2, with P a number in every run, 22 to 26 s to 64 ranks, 33.8 s
to 128 and 83 s to 1024 (load 4 to 7, the cost growing with P); with
the run 18..65536 taking P as a term of N, 65.6 s for all of 2..65536
(load 1.5, the heaviest check 71.8 million units: docs/bench.md). The
postFreq-4 row, its runs from 34 one run 34..65536 with P a term of N,
takes 61.0 s (the heaviest check 57.7 million units, ``unwritten-unchanged``
of that run; load 3.0 to 4.5, December 2026).
"""

from __future__ import annotations

from dataclasses import replace

import z3

from ..models import indexing as ix
from ..models.generators import nccl_pat
from ..models.program import BITVEC_WIDTH
from .induction import Invariant
from .nccl_pat import _log2, _low_bit, _pow2_at_or_above, chosen_same_query, own_choice_query
from .scope import Bound, Fixed, Scope
from .solver import Query

#: the aggregation the row proves: NCCL 2.30's at postFreq 1 (count 1,
#: chunk 1) for every N >= 10 (min(8 postFreq, most), most >= 8 from N = 10)
AGGREGATION = 8
#: the fewest ranks that reach it (the generator refuses a larger aggregation than N allows)
LOWEST = 10
ROW = "nccl-pat.allgather-exactly-once"
#: NCCL's own aggregation at postFreq 1, chunk 1, count 1 for N in 2..9 (1, 2 or 4)
BELOW = "nccl-pat.allgather-below-10-exactly-once"
#: NCCL's own aggregation and postFreq at chunk 2, count 1 (postFreq 2 from N = 4, aggregation 16 from N = 18)
POSTFREQ_2 = "nccl-pat.allgather-postfreq-2-exactly-once"
#: NCCL's own aggregation and postFreq at chunk 4, count 1 (postFreq 4 from N = 6, aggregation 32 from N = 34)
POSTFREQ_4 = "nccl-pat.allgather-postfreq-4-exactly-once"
#: the most ranks the aggregation-8 row covers (module text: the cost per power of two)
HIGHEST = 65536
#: the most ranks the postFreq-2 row covers (its last run, 18..65536, takes P as a term of N)
POSTFREQ_2_HIGHEST = HIGHEST
#: row -> (collective, the options of the proved program (aggregation or
#: post None: NCCL's choice, computed by the generator), the N it covers):
#: the form of :data:`collspec.proofs.nccl_pat.OPTIONS`, whose case split,
#: scope, choice and same queries the two rows with NCCL's choice share
OPTIONS = {
    ROW: ("allgather", {"aggregation": AGGREGATION, "post": 1, "chunk": 1, "count": 1}, (LOWEST, HIGHEST)),
    BELOW: ("allgather", {"aggregation": None, "post": 1, "chunk": 1, "count": 1}, (2, LOWEST - 1)),
    POSTFREQ_2: ("allgather", {"aggregation": None, "post": None, "chunk": 2, "count": 1}, (2, POSTFREQ_2_HIGHEST)),
    POSTFREQ_4: ("allgather", {"aggregation": None, "post": None, "chunk": 4, "count": 1}, (2, HIGHEST)),
}
#: the powers of two at or above some N of the aggregation-8 row (:func:`case`: P a number)
POWERS = tuple(1 << b for b in range((LOWEST - 1).bit_length(), HIGHEST.bit_length()))
#: the row's cases: ranges of N, each decided at once with P a term of N
#: (module text: the cost of each choice)
RANGES = ((LOWEST, 16384), (16385, 32768), (32769, HIGHEST))


def program(name: str = ROW, aggregation=None, post=None):
    """The transfer function row ``name`` proves: nccl-pat's, at :data:`OPTIONS`,
    with ``aggregation`` and ``post`` given in place of NCCL's choice if set
    (the program one run of a row with NCCL's choice proves)."""
    from . import nccl_pat as shared

    return shared.program(name, aggregation, post)


def user_program(name: str = ROW):
    """nccl-pat's all-gather at the row's chunk and count only, aggregation
    and postFreq left to the generator: what a user's call builds."""
    collective, options, _ = OPTIONS[name]
    return nccl_pat.pat_program(collective, chunk=options["chunk"], count=options["count"])


def _row(name: str, run=None):
    """(collective, program, scope) of row ``name``: this module's row, or a
    reduce-scatter row of :mod:`collspec.proofs.nccl_pat` (whose induction
    is pinned and carried by the same lemmas); with ``run`` (a run of
    :func:`collspec.proofs.nccl_pat.cases`), the program with the run's
    aggregation and postFreq given."""
    from . import nccl_pat as reduce_scatter

    if run is not None:
        return reduce_scatter._entry(name)[0], reduce_scatter.program(name, run[3], run[4]), _row(name)[2]
    if name in OPTIONS:
        return OPTIONS[name][0], program(name), scope(name)
    return reduce_scatter.OPTIONS[name][0], reduce_scatter.program(name), reduce_scatter.scope(name)


def scope(name: str = ROW) -> Scope:
    """The row's scope: :func:`premises` (its N range and the options)."""
    if name == ROW:
        return Scope(premises(name))
    from . import nccl_pat as shared

    return shared.scope(name)


def premises(name: str = ROW) -> tuple:
    """The row's premises: its N range and the options its program fixes
    (:mod:`collspec.proofs.scope`; NCCL's choice by runs of N for the rows
    that leave it to the generator); a test builds the generator's schedule
    with exactly these."""
    if name != ROW:
        from . import nccl_pat as shared

        return shared.premises(name)
    _, o, _ = OPTIONS[name]
    return (
        Bound("N", ">=", LOWEST),
        Bound("N", "<=", HIGHEST),
        Fixed("aggregation", lambda n: o["aggregation"], f"aggregation {o['aggregation']}"),
        Fixed("post", lambda n: o["post"], f"postFreq {o['post']}"),
        Fixed("chunk", lambda n: o["chunk"], f"chunk {o['chunk']}"),
        Fixed("count", lambda n: o["count"], f"count {o['count']}"),
    )


# -- NCCL's order, restated (module text) ------------------------------------------------------


def _popcount(v, bits: int):
    """The set bits among v's ``bits`` low bits."""
    out = 0 * v
    for b in range(bits):
        out = out + (ix.shift_right(v, b) & 1)
    return out


def position(delta: int, l):
    """The place of ``as`` = l (1 <= l < delta) in NCCL's ``nextAs`` walk,
    a pre-order walk of the bits below delta with the children in
    decreasing order: popcount(l) - 1 + delta - lowbit(l) - l."""
    return _position(delta, l, delta.bit_length() - 1)


def _position(delta, l, bits: int):
    """:func:`position` with popcount over ``bits`` low bits (l < delta <= 2**bits; delta may be a term)."""
    return _popcount(l, bits) - 1 + delta - _low_bit(l) - l


def _parts(p: int | None, o, a: int, f: int, n=None):
    """Offset o's parts at aggregation a, postFreq f and P = p, or P of
    ``n`` when p is None (:func:`collspec.proofs.nccl_pat._pow2_at_or_above`,
    restated in proofs/; a term of N): (low part l, high part i, scale
    exponent k of i = (2 m + 1) 2**k, m, log2 A, log2 q, delta, the bits
    of delta's popcount) with q = A / f the messages of a step ``as``."""
    log_a, log_f = a.bit_length() - 1, f.bit_length() - 1
    if p is not None:
        delta = p >> log_a
        log_delta = bits = delta.bit_length() - 1
    else:
        delta = ix.shift_right(_pow2_at_or_above(n), log_a)
        log_delta, bits = _log2(delta), (HIGHEST >> log_a).bit_length() - 1
    l = o & (delta - 1)
    i = ix.shift_right(o, log_delta)
    k = _log2(_low_bit(ix.where(i == 0, 1, i)))
    return l, i, k, ix.shift_right(i, k + 1), log_a, log_a - log_f, delta, bits


def arrival(p: int | None, o, a: int = AGGREGATION, f: int = 1, n=None):
    """T(o): the message of the loop that brings offset o, 1 <= o < P, for
    the power of two P at or above N (P = ``p`` when given: the invariant's
    delta and shifts are then numbers; else P of ``n``, a term of N),
    aggregation ``a`` and postFreq ``f`` (module text): the one-message
    scales A/2 .. q first (scale 2**k in message log2 A - 1 - k), then
    scale 2**k < q in its q / 2**(k+1) messages of f blocks (block m in
    message m / f), then the steps ``as`` in ``nextAs`` order, q messages
    each (block i in message i / f)."""
    l, i, k, m, log_a, log_q, delta, bits = _parts(p, o, a, f, n)
    log_f, q = log_a - log_q, a >> (log_a - log_q)
    many = ix.shift_right(q, k + 1) - (1 - log_f) + _shr(m, log_f)
    scale = many if log_f == 0 else ix.where(k < log_q, many, log_a - 1 - k)
    steps_as = q - 1 + log_f + ix.shift_left(_position(delta, l, bits), log_q, like=o) + _shr(i, log_f)
    return ix.where(l == 0, scale, steps_as)


def place(p: int | None, o, a: int = AGGREGATION, f: int = 1, n=None):
    """The place of offset o's block in its message (the slot that carries
    it, count 1): i mod f in a step ``as``, m mod f in a scale step of
    several messages, m in a one-message scale step; 0 at postFreq 1.
    ``p`` and ``n`` as for :func:`arrival`."""
    if f == 1:
        return 0 * o
    l, i, k, m, _, log_q, _, _ = _parts(p, o, a, f, n)
    return ix.where(l == 0, ix.where(k < log_q, m & (f - 1), m), i & (f - 1))


def _shr(v, bits: int):
    return ix.shift_right(v, bits) if bits else v


# -- the invariant --------------------------------------------------------------------------


def invariant(p: int | None, name: str = ROW, timing=None, lowbit=None, a: int = AGGREGATION, f: int = 1, placing=None) -> Invariant:
    """The claim of the module text, for the power of two ``p`` at or above N
    (one case of the row), or P a term of N when ``p`` is None (a range of
    N), aggregation ``a`` and postFreq ``f``. It sees ranks and cells only
    through equalities (k = c, x = c) and the offset c - r mod N, and its
    witness is r plus a function of that offset, in the slot of a function
    of that offset: what lets it turn with the ranks (module text).
    ``timing(o)``, if given, stands for T(o) (:func:`arrival` at ``p``):
    the turning query passes a function Z3 leaves free, and ``lowbit`` and
    ``placing`` (:func:`place`) likewise."""
    lowbit = _low_bit if lowbit is None else lowbit

    def arrived(n, s, r, c):
        o = _back(c, r, n)
        return ix.either(o == 0, (arrival(p, o, a, f, n) if timing is None else timing(o)) < s)

    def holds(n, s, r, c, x, k):
        return ix.both(k == c, x == c, arrived(n, s, r, c))

    def defined(n, s, r, c):
        return arrived(n, s, r, c)

    def witness(n, s, r, c, *rest):
        """The slot of offset o's place on rank r + lowbit(o): the one that
        brings offset o (slot 0 at postFreq 1)."""
        o = _back(c, r, n)
        return _forward(r, lowbit(o), n), (0 * s if f == 1 else (place(p, o, a, f, n) if placing is None else placing(o)))

    return Invariant(defined=defined, holds=holds, writer=witness, source=witness, premises=premises(name))


def case(n, p: int) -> list:
    """Case P = p of the row: p/2 < N <= p, and the generator's own
    P (``nccl_pat.pow2_above``) is p."""
    return [n > p // 2, n <= p, nccl_pat.pow2_above(n) == p]


def range_case(n, low: int, high: int) -> list:
    """Case ``low`` <= N <= ``high`` of the row (one of :data:`RANGES`)."""
    return [n >= low, n <= high]


def cover_query() -> Query:
    """The cases of :data:`RANGES` cover the scope."""
    n = z3.BitVec("N", BITVEC_WIDTH)
    domain = scope().assertions({"N": n})
    return Query(f"cases: every N of the scope is in one of the ranges {', '.join(f'{low}..{high}' for low, high in RANGES)}",
                 domain, z3.Or(*[z3.And(*range_case(n, low, high)) for low, high in RANGES]))


def _bv(name: str):
    return z3.BitVec(name, BITVEC_WIDTH)


#: the induction's queries whose rank of interest is the sender q (rotated to
#: q = 0); every other query is about a cell (r, c) and is rotated to r = 0
_SENDER_QUERIES = ("in-range", "same-index", "reads-data")


def pinned(asked: list, words: str = "") -> list:
    """The queries ``asked`` of the induction with the rank of each pinned
    to 0 in ``Query.pin`` (q = 0 for :data:`_SENDER_QUERIES`, else r = 0),
    ``words`` and the pin added to each name."""
    r, q = _bv("r"), _bv("q")
    out = []
    for query in asked:
        pin, label = (q == 0, "q = 0") if query.name.startswith(_SENDER_QUERIES) else (r == 0, "r = 0")
        out.append(replace(query, name=f"{query.name} [{words}{label}]", pin=[*query.pin, pin]))
    return out


def case_queries(p: int, name: str = ROW) -> list:
    """Every query of the induction (:func:`collspec.proofs.induction.queries`)
    with the invariant of ``p``, the case P = p added, and the rank of the
    query rotated to 0: r = 0 (q = 0 for the queries about one transfer);
    :func:`rotation_queries` and the module text carry them to every rank."""
    from .induction import queries

    here = case(_bv("N"), p)
    return pinned([replace(query, case=[*query.case, *here]) for query in queries(program(name), invariant(p, name))], f"P = {p}, ")


def range_queries(low: int, high: int, name: str = ROW) -> list:
    """Every query of the induction with the invariant's P a term of N
    (``invariant(None)``), the case ``low`` <= N <= ``high`` added, and the
    rank of the query rotated to 0 as in :func:`case_queries`."""
    from .induction import queries

    here = range_case(_bv("N"), low, high)
    return pinned([replace(query, case=[*query.case, *here]) for query in queries(program(name), invariant(None, name))], f"N in {low}..{high}, ")


def _forward(a, r, n):
    """a + r mod N, for a and r in 0..N-1."""
    return ix.wrap(a + r, n)


def _back(a, r, n):
    """a - r mod N, for a and r in 0..N-1."""
    return ix.wrap(a - r, n)


def transfer_rotation_query(name: str = ROW, run=None, made=None) -> Query:
    """Rotation of the generator's transfer function, every N of the scope:
    rank r's transfer in slot j at step s is rank 0's turned by r (same
    activity and op; destination and cells those of rank 0, in 0..N-1, plus
    r mod N). With ``run``, on the program of that run of
    :func:`collspec.proofs.nccl_pat.cases` (its aggregation and postFreq
    given; :func:`run_queries` adds the run as a case). ``made``, if given,
    is the program asked about in place of the row's (a run's program of a
    reduce-scatter row with cases)."""
    from ..models.program import Transfer, as_term, symbolic

    _, own, within = _row(name, run)
    made = own if made is None else made
    sym, v = symbolic(made)
    n, s, r, j = v["N"], v["s"], v["r"], v["j"]
    steps, width = (as_term(f(n), n) for f in (sym.steps, sym.width))

    def at(rank):
        t = sym.transfer(n, s, rank, j)
        return Transfer(*(as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)))

    mine, zero = at(r), at(0 * r)
    active, active0 = as_term(mine.active, None), as_term(zero.active, None)
    fields = (zero.dst, zero.src_chunk, zero.dst_chunk)
    turned = z3.And(*(b for f in fields for b in (0 <= f, f < n)), mine.dst == _forward(zero.dst, r, n),
                    mine.src_chunk == _forward(zero.src_chunk, r, n), mine.dst_chunk == _forward(zero.dst_chunk, r, n), mine.op == zero.op)
    return Query("rotation: rank r's transfer is rank 0's turned by r (destination and cells + r mod N)",
                 within.assertions(v) + [0 <= s, s < steps, 0 <= r, r < n, 0 <= j, j < width],
                 z3.And(active == active0, z3.Implies(active0, turned)))


def turning_queries(name: str = ROW) -> list:
    """The arithmetic mod N that turns the invariant with the ranks, for every
    N of the scope and a, r, d, w in 0..N-1 (the invariant's offsets and
    witness are :func:`_back` and :func:`_forward` of these), over the
    integers: on bit-vectors these are adder identities, 40 s of CPU at
    N <= 4096; the module text says why the integers' answer is the
    bit-vectors'. lowbit is a bit operation, so its query stays on bit-vectors."""
    v = {"N": z3.Int("N")}
    n = v["N"]
    a, r, d, w = z3.Ints("a r d w")
    domain = _row(name)[2].assertions(v) + [b for t in (a, r, d, w) for b in (0 <= t, t < n)]
    return [
        Query("turning: a - r and a + r mod N are in 0..N-1, and turning a by d is undone", domain,
              z3.And(0 <= _back(a, r, n), _back(a, r, n) < n, 0 <= _forward(a, r, n), _forward(a, r, n) < n, _forward(_back(a, d, n), d, n) == a)),
        Query("turning: the offset of a from r is that of a - d from r - d", domain, _back(_back(a, d, n), _back(r, d, n), n) == _back(a, r, n)),
        Query("turning: (r - d) + w is (r + w) - d mod N", domain, _forward(_back(r, d, n), w, n) == _back(_forward(r, w, n), d, n)),
        _low_bit_query(name),
    ]


def invariant_turning_query(name: str = ROW, make=None, assumed=(), words="T and lowbit any functions into 0..N-1") -> Query:
    """The invariant turns with the ranks, for every N of the scope and all
    s >= 0 and r, c, x, k, d in 0..N-1: ``holds`` and ``defined`` at (r, c,
    x, k) are what they are at every value turned back by d (v - d mod N),
    and the writer and source of the turned cell are those of (r, c) turned
    back by d (rank - d mod N, the same slot). Over the integers (the
    module text's argument carries it to bit-vectors), with T(o) and
    lowbit(o) functions Z3 leaves free (the answer holds for every function
    in their place, NCCL's T at each P and lowbit among them), lowbit's
    values at the two offsets asked in 0..N-1 (:func:`_low_bit_query`).
    ``make(timing, lowbit)`` builds the invariant (default :func:`invariant`);
    ``assumed`` adds premises on further free functions it uses (on the
    integer constants ``N``, ``s``, ``r``, ``c``), ``words`` names them."""
    from ..models.program import as_term

    n, s, r, c, x, k, d = z3.Ints("N s r c x k d")
    timing, lowbit = z3.Function("T", z3.IntSort(), z3.IntSort()), z3.Function("lowbit", z3.IntSort(), z3.IntSort())
    make = make or (lambda t, lb: invariant(POWERS[0], name, timing=t, lowbit=lb))
    inv = make(timing, lowbit)
    r0, c0, x0, k0 = (_back(t, d, n) for t in (r, c, x, k))

    def bool_(t):
        return as_term(t, None)

    def turned(slot, slot0):
        return z3.And(as_term(slot0[0], n) == _back(as_term(slot[0], n), d, n), as_term(slot0[1], n) == as_term(slot[1], n))

    claim = z3.And(bool_(inv.holds(n, s, r, c, x, k)) == bool_(inv.holds(n, s, r0, c0, x0, k0)),
                   bool_(inv.defined(n, s, r, c)) == bool_(inv.defined(n, s, r0, c0)),
                   turned(inv.writer(n, s, r, c), inv.writer(n, s, r0, c0)),
                   turned(inv.source(n, s, r, c, x, k), inv.source(n, s, r0, c0, x0, k0)))
    distances = [b for o in (_back(c, r, n), _back(c0, r0, n)) for b in (0 <= lowbit(o), lowbit(o) < n)]
    return Query(f"turning: the invariant, its writer and its source turn with the ranks ({words})",
                 _row(name)[2].assertions({"N": n}) + [0 <= s] + [b for t in (r, c, x, k, d) for b in (0 <= t, t < n)] + distances + [*assumed], claim)


def _low_bit_query(name: str = ROW) -> Query:
    v = {"N": _bv("N")}
    n, o = v["N"], _bv("o")
    return Query("turning: the witness's distance lowbit(o) is in 0..N-1", _row(name)[2].assertions(v) + [0 <= o, o < n],
                 z3.And(0 <= _low_bit(o), _low_bit(o) < n))


def ends_rotation_query(name: str = ROW, run=None) -> Query:
    """Rotation of the all-gather's start and end (:data:`collspec.proofs.induction.EXPECTED`)
    at the program's cell count, which is N (one cell a rank's block);
    ``run`` as for :func:`transfer_rotation_query`."""
    from ..models.program import as_term, symbolic
    from .induction import EXPECTED

    collective, made, within = _row(name, run)
    sym, v = symbolic(made)
    n, r = v["N"], v["r"]
    c, x, k = _bv("c"), _bv("x"), _bv("k")
    chunks = as_term(sym.chunks(n), n)
    is_input, is_output, expected = EXPECTED[collective]
    c0, x0, k0 = (_back(t, r, n) for t in (c, x, k))
    same = [as_term(is_input(n, chunks, r, c, 0), None) == as_term(is_input(n, chunks, 0 * r, c0, 0), None),
            as_term(is_output(n, chunks, r, c, 0), None) == as_term(is_output(n, chunks, 0 * r, c0, 0), None),
            as_term(expected(n, chunks, r, c, x, k, 0), None) == as_term(expected(n, chunks, 0 * r, c0, x0, k0, 0), None)]
    return Query("rotation: the cells are N and the inputs and outputs at rank r are rank 0's turned by r",
                 within.assertions(v) + [b for t in (r, c, x, k) for b in (0 <= t, t < n)], z3.And(chunks == n, *same))


def rotation_queries(name: str = ROW) -> list:
    """The lemmas that carry the rank-0 queries to every rank (module text)."""
    return [transfer_rotation_query(name), ends_rotation_query(name), *turning_queries(name), invariant_turning_query(name)]


def run_case(n, run, name: str | None = None) -> list:
    """Run ``(low, high, P, A, F)`` of a row with NCCL's choice
    (:func:`collspec.proofs.nccl_pat.cases`) as a case: low <= N <= high,
    the generator's own P (``nccl_pat.pow2_above``) is P, and, with the row
    ``name``, the program of a user's call chooses A and F
    (:func:`_chooses`). :func:`runs_cover_query` proves these cases cover
    the row's scope."""
    low, high, p, _, _ = run
    return [n >= low, n <= high, *([] if p is None else [nccl_pat.pow2_above(n) == p]), *(_chooses(n, run, name) if name else ())]


def _chooses(n, run, name: str) -> list:
    """The program of a user's call to row ``name`` (chunk and count only)
    chooses the run's aggregation and postFreq at N = n, with its own
    choice functions (``Program.choices``: the ``agg`` and ``pf`` its
    steps, width and transfers call)."""
    from ..models.program import as_term

    made = user_program(name)
    return [as_term(made.choices[k](n), n) == v for k, v in (("aggregation", run[3]), ("post", run[4]))]


def _runs(name: str) -> tuple:
    from . import nccl_pat as shared

    return shared.cases(name)


def runs_choice_query(name: str) -> Query:
    """In each run of row ``name`` (its N bounds and P), the program of a
    user's call chooses the run's aggregation and postFreq (:func:`_chooses`)."""
    n = _bv("N")
    return Query("choice: in each run the generator's own aggregation and postFreq are the run's", scope(name).assertions({"N": n}),
                 z3.And(*(z3.Implies(z3.And(*run_case(n, run)), z3.And(*_chooses(n, run, name))) for run in _runs(name))))


def runs_cover_query(name: str) -> Query:
    """The runs of row ``name`` cover its N range, each N with the
    generator's P and the user's call's choice of the run's aggregation
    and postFreq (:func:`run_case`, the case of each query of a run)."""
    n = _bv("N")
    return Query("cases: the runs of N cover the row's N range, each with the generator's P, aggregation and postFreq",
                 scope(name).assertions({"N": n}), z3.Or(*[z3.And(*run_case(n, run, name)) for run in _runs(name)]))


def run_queries(name: str, run) -> list:
    """The queries of one run ``(low, high, P, A, F)`` of row ``name``, the
    run a case of each: ``same`` (the program of a user's call is the
    run's program, aggregation A and postFreq F given, at every step, rank
    and slot), the rotation of that program's transfer and ends, and every
    query of the induction on it with the invariant of P, A, F, pinned to
    rank 0 (:func:`pinned`)."""
    from . import nccl_pat as shared
    from .induction import queries

    low, high, p, a, f = run
    n = _bv("N")
    here = run_case(n, run)
    words = f"N in {low}..{high}: P {'= pow2_above(N)' if p is None else p}, aggregation {a}, postFreq {f}"
    # the case with the user's call's choice (covered as well: runs_cover_query) lets Z3 see both programs' A and F
    same = shared._same(name, a, f, scope(name).assertions({"N": n}), z3.And(*run_case(n, run, name)), f"N in {low}..{high}: aggregation {a}, postFreq {f}",
                        chosen=p is None)
    rotation = [replace(q, name=f"{q.name} [{words}]", case=[*q.case, *here]) for q in (transfer_rotation_query(name, run), ends_rotation_query(name, run))]
    induction = [replace(q, case=[*q.case, *here]) for q in queries(program(name, a, f), invariant(p, name, a=a, f=f))]
    return [same, *rotation, *pinned(induction, f"{words}, ")]


def runs_turning_queries(name: str) -> list:
    """The turning lemmas of a row with runs: the arithmetic mod N and
    lowbit (:func:`turning_queries`), and the invariant's turning for each
    postFreq of its runs (at postFreq above 1 with the block's place a
    further function Z3 leaves free)."""
    out = turning_queries(name)
    for f in sorted({run[4] for run in _runs(name)}):
        if f == 1:
            out.append(invariant_turning_query(name))
            continue
        placing = z3.Function("place", z3.IntSort(), z3.IntSort())
        out.append(invariant_turning_query(name, make=lambda t, lb, f=f: invariant(POWERS[0], name, timing=t, lowbit=lb, f=f, placing=placing),
                                           words=f"postFreq {f}: T, lowbit and the place any functions, T and lowbit into 0..N-1"))
    return out


def prove(name: str = ROW):
    """The row: the spec's postcondition check, the cover, the choice, the
    turning lemmas, then the induction's queries for each range of N (each run, for
    a row with NCCL's choice: :func:`run_queries`), each check within the
    row's resource limit (``proofs.suite.RLIMITS``)."""
    from .induction import spec_check
    from .solver import run_queries as decide_all

    collective, o, _ = OPTIONS[name]
    if name != ROW:
        return decide_all([spec_check(collective), runs_choice_query(name), runs_cover_query(name), *runs_turning_queries(name),
                           *(q for run in _runs(name) for q in run_queries(name, run))])
    return decide_all([spec_check(collective), own_choice_query(user_program(name), o["aggregation"], o["post"], scope(name)), chosen_same_query(name), cover_query(),
                       *rotation_queries(name), *(q for low, high in RANGES for q in range_queries(low, high, name))])
