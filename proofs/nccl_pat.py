"""nccl-pat's reduce-scatter computes every contribution exactly once, for every N in 2..65536 at postFreq 1, 2 and 4.

The induction of :mod:`collspec.proofs.induction` on ``nccl-pat``'s own
transfer function (:func:`collspec.models.generators.nccl_pat.pat_program`),
N symbolic on bit-vectors, one count element a rank, one loop, in four rows
(:data:`OPTIONS`):

- ``nccl-pat.reduce_scatter-exactly-once``: N in 10..65536, aggregation 8,
  postFreq 1, chunk 1: what NCCL 2.30's ``PatRSAlgorithm`` constructor
  chooses at chunk 1, count 1 from N = 10 (aggFactor = min(8 postFreq, the
  power of two at or above N/2));
- ``nccl-pat.reduce_scatter-below-10-exactly-once``: N in 2..9 at chunk 1
  and NCCL's own aggregation (1, 2 or 4 there);
- ``nccl-pat.reduce_scatter-postfreq-2-exactly-once``: N in 2..65536 at
  chunk 2 and NCCL's own postFreq and aggregation (postFreq 2 from N = 4,
  so aggregations 2, 4, 8 and 16, messages of 2 blocks), decided at rank 0
  (:data:`PINNED`, below);
- ``nccl-pat.reduce_scatter-postfreq-4-exactly-once``: N in 2..65536 at
  chunk 4, built as the postFreq-2 row (postFreq 2 at N = 4, 5 and 4 from
  N = 6, so aggregations 4, 8, 16 and 32, messages of 4 blocks; its runs
  from 34 ranks one run 34..65536 with P a term of N), decided at rank 0.

The invariant is stated from NCCL 2.30's definitions (``PatRSAlgorithm``
and ``mirrorInvert`` in ``src/include/collectives.h``, ``postSend`` in
``src/device/prims_simple.h``), written here again rather than taken from
the generator, so that a wrong generator helper fails a query instead of
agreeing with itself. With P the power of two at or above N, the
aggregation A, the postFreq F, q = A / F and delta = P / A, rank r's cell c
is the partial of block c at *offset* o = c - r mod N. An offset o of low
part l = o mod delta and high part i = o / delta is sent once per loop, to
o - lowbit(o) on rank r + lowbit(o): the steps ``as`` = delta - 1 down to 1
(A blocks each), then the scales 1, 2, .. A/2 (A / (2 scale) blocks each);
a step's blocks go in ``mirrorInvert`` order (NCCL's op a = A - 1 -
mirror(i) of the step), F of them a message (message a / F, place a mod F),
and a scale step of fewer than F blocks is one message. Each message is one
schedule step, so offset o's send is step T(o) of the loop
(:func:`send_step`) at place :func:`place`. The claim after s steps: the
partial at offset o holds the contribution of offset o + d (rank c - o - d)
exactly once when d = 0, or d is below o's lowest set bit (any d for o =
0), o + d < N, and the partial at o + highbit(d) (the last hop of o + d's
path) has been sent: T(o + highbit(d)) < s.

What is proved and what is argued. The aggregation-8 row is one induction,
P a term of N, on the program with aggregation 8 and postFreq 1 given,
and one query (``choice``, :func:`own_choice_query`) that the program of
a call with only chunk 1 and count 1 (:func:`user_program`) chooses
aggregation 8 and postFreq 1 with its own choice functions
(``Program.choices``: the ``agg`` and ``pf`` its steps, width and
transfers call) for every N of the row, and one (``same``,
:func:`chosen_same_query`) that the user's call's program, those two
choice terms replaced by 8 and 1, is the program with them given: the
same steps, width and cells and the same transfer at every N, step, rank
and slot, so any code a call without aggregation and postFreq runs that
the given program does not is compared too. The one step that is not a
query: a term with a subterm replaced by a value equals the term wherever
the subterm has that value (which ``choice`` decides). (The full equality
of the two transfer functions, without that replacement, cost about 34 s
of CPU for this row; with it, under a second.) Each query of that induction is decided at rank 0: r
= 0, or q = 0 for the three about one transfer of rank q (in-range,
same-index, reads-data), carried in ``Query.pin``. The lemmas that carry
it to every rank are the all-gather's
(:func:`collspec.proofs.nccl_pat_allgather.rotation_queries`, on this
row's program, ends and invariant; :func:`rotation_queries`), all decided
by Z3: ``rotation`` of the generator's transfer (rank r's transfer is
rank 0's, destination and cells turned by r mod N) and of the
reduce-scatter's inputs and outputs (``EXPECTED``, N cells); ``turning``
of the arithmetic mod N (over the integers) and lowbit in 0..N-1;
``turning``: the witness's distance (:func:`distance`) at each step of
the loop is in 0..N-1; and ``turning`` of the invariant: ``holds``,
``defined``, writer and source at every rank, cell and contribution
turned back by d are what they were, the witness turned by d (over the
integers, with T, lowbit, the highest set bit of d and the step's
distance functions Z3 leaves free, the distance into 0..N-1). The
argument that a query holding at rank 0 holds at every rank (turning
every rank and cell value by d maps 0..N-1 onto itself and keeps every
atom of the query; the integers' values are the 20-bit bit-vectors') is
the one written in :mod:`collspec.proofs.nccl_pat_allgather`, here with
the witness's distance a function of the step (its range decided only at
steps 0..steps-1, the only steps the induction's writer query asks). A row on NCCL's own choices (:func:`cases`) splits its N
range into runs with one P, one aggregation and one postFreq (restated from
NCCL: :func:`nccl_post`, :func:`nccl_aggregation`). Proved (Z3): the runs
cover the row's N range (``cases``); in each run the generator's own choice
functions (``post_frequency``, ``nccl_aggregation`` of
:mod:`collspec.models.generators.nccl_pat`, evaluated on symbolic N) give
the run's aggregation and postFreq (``choice``); for each run, that the
program of a call with only the row's chunk and count (:func:`user_program`:
the generator makes NCCL's choice, as a user's call does) is, for every N
of the run, the program with the run's aggregation and postFreq given: the
same steps, width, cells and transfer at every step, rank and slot
(``same``, :func:`_same`); and for each run, the whole induction on that
given program (``pat_program(aggregation=A, post=F)``), the run's N bounds
added to every query as a case (:class:`~collspec.proofs.solver.Query`)
and P, A and F constants in its invariant. So every N of the range is in
some run, and there the program a call with the row's chunk and count
builds is the one that run proves (a composition of decided queries on
the same N; nothing about ``pat_program``'s default path is argued). Splitting the aggregation-8 row by P in the same
way (P in 16..65536) with every rank free was measured and is not
cheaper: about 520 s of CPU against about 220 s for the one query set with
every rank free; decided at rank 0, the one query set over all of
10..65536 takes about 16 s (docs/proofs.md).

The postFreq-2 row (:data:`PINNED`) is decided at rank 0 too. Its runs
are those of the row below 10 up to N = 17, then one run N in 18..65536
at aggregation 16, postFreq 2 with P a term of N (:func:`cases`). The
postFreq-4 row is the same text with its own runs (N 2, 3, 4, 5, 6..8, 9,
10..16, 17, 18..32, 33, then 34..65536 at aggregation 32, postFreq 4 with
P a term of N) and 32 and 4 in place of 16 and 2; the invariant, its
send order (:func:`send_step`, :func:`place`, :func:`distance`) and the
lemmas are one definition for every aggregation and postFreq (at
aggregation 4 and postFreq 4 a step ``as`` is one message). Its cost is
the run 34..65536: about 40 s of CPU of the row's 68 to 93 s (load 1.9
to 4.6), the heaviest check 58.6 million units (``unwritten-unchanged``);
that run split at 4096, its six heaviest queries took 42.1 s against
38.8 s whole, so it stays one run. Proved
(Z3), besides ``cases`` and ``choice`` as above: for each run up to 17,
``same`` as above; for 18..65536, ``choice`` on the user's call's own
choice functions (:func:`own_choice_query`, the run's N a case) and
``same`` with those choice terms replaced by 16 and 2, as the
aggregation-8 row (a ``same`` query without the replacement cost 57 s of
CPU over 18..65536); for each aggregation and
postFreq of the runs, the rotation of the transfer of the program with
them given, the N of those runs a case (:func:`run_rotation_queries`);
the rotation of the ends, the mod-N identities and lowbit as above; the
witness's distance in 0..N-1 at every step of each run; one turning query
of the invariant with T, lowbit, highbit, the step's distance and the
witness's slot (the block's place in its message, a function of the
sender's offset) functions Z3 leaves free: each run's invariant is that
one with the run's functions in their place, so it turns for every run;
and each run's induction queries pinned at rank 0 (:func:`case_queries`).
Argued (the all-gather's argument, run by run): a run's query that holds
at rank 0 holds at every rank, since under the run's case the program's
transfer (its rotation query), the ends and the invariant turn with the
ranks. So every N of 2..65536 is in some run (``cases``), where every
query of the induction holds at every rank for the program the run
proves, which is the user's call's (``same``; for 18..65536 ``choice``
and ``same`` on the replaced terms).

Premises beyond the induction's: none; the options and the N range are the
scope's. What stays bounded (postFreq above 4,
several loops, a count above 1, the all-gather) is listed in docs/proofs.md.
"""

from __future__ import annotations

import functools

import z3

from ..models import indexing as ix
from ..models.program import BITVEC_WIDTH
from ..models.generators import nccl_pat
from .induction import MAX_RANKS, Invariant
from .scope import Bound, Fixed, Scope

#: the aggregation the all-N row proves: NCCL 2.30's at postFreq 1 (count 1,
#: chunk 1) for every N >= 10 (min(8 postFreq, most), most >= 8 from N = 10)
AGGREGATION = 8
#: the fewest ranks that reach it (the generator refuses a larger aggregation than N allows)
LOWEST = 10
#: the row below it: NCCL's own aggregation at postFreq 1 for N in 2..9 (1, 2 or 4)
BELOW = "nccl-pat.reduce_scatter-below-10-exactly-once"
#: NCCL's own aggregation and postFreq at chunk 2, count 1 (postFreq 2 from N = 4, aggregation 16 from N = 18)
POSTFREQ_2 = "nccl-pat.reduce_scatter-postfreq-2-exactly-once"
#: NCCL's own aggregation and postFreq at chunk 4, count 1 (postFreq 4 from N = 6, aggregation 32 from N = 34)
POSTFREQ_4 = "nccl-pat.reduce_scatter-postfreq-4-exactly-once"

#: row -> (collective, the options of the proved program (aggregation None:
#: NCCL's choice, computed by the generator), the N it covers)
OPTIONS = {
    "nccl-pat.reduce_scatter-exactly-once": ("reduce_scatter", {"aggregation": AGGREGATION, "post": 1, "chunk": 1, "count": 1}, (LOWEST, MAX_RANKS)),
    BELOW: ("reduce_scatter", {"aggregation": None, "post": 1, "chunk": 1, "count": 1}, (2, LOWEST - 1)),
    POSTFREQ_2: ("reduce_scatter", {"aggregation": None, "post": None, "chunk": 2, "count": 1}, (2, MAX_RANKS)),
    POSTFREQ_4: ("reduce_scatter", {"aggregation": None, "post": None, "chunk": 4, "count": 1}, (2, MAX_RANKS)),
}
#: the rows with :func:`cases` whose induction is decided at rank 0 and
#: carried to every rank by :func:`run_rotation_queries` (module text)
PINNED = (POSTFREQ_2, POSTFREQ_4)


def _entry(name: str) -> tuple:
    """Row ``name``'s (collective, options, N range): a reduce-scatter row of
    :data:`OPTIONS`, or an all-gather row of
    :data:`collspec.proofs.nccl_pat_allgather.OPTIONS` (the same form; the
    case split, scope, choice and same queries below serve both)."""
    if name in OPTIONS:
        return OPTIONS[name]
    from .nccl_pat_allgather import OPTIONS as ALLGATHER

    return ALLGATHER[name]


def program(name: str, aggregation=None, post=None):
    """nccl-pat's transfer function at row ``name``'s :data:`OPTIONS`, with
    ``aggregation`` and ``post`` given in place of NCCL's choice if set
    (the program a run of :func:`cases` proves)."""
    collective, options, _ = _entry(name)
    given = {k: v for k, v in (("aggregation", aggregation), ("post", post)) if v is not None}
    return nccl_pat.pat_program(collective, **{**options, **given})


def user_program(name: str):
    """nccl-pat's transfer function at row ``name``'s chunk and count only,
    aggregation and postFreq left to the generator: what a user's call with
    that chunk and count builds (``collspec check -a nccl-pat -o chunk=..
    -o count=..``; the dtype does not enter once a chunk is given)."""
    collective, options, _ = _entry(name)
    return nccl_pat.pat_program(collective, chunk=options["chunk"], count=options["count"])


def scope(name: str) -> Scope:
    """The row's scope: its N range (bit-vectors), and :func:`premises`."""
    low, high = _entry(name)[2]
    return Scope((Bound("N", ">=", low), Bound("N", "<=", high))) + premises(name)


def nccl_post(n: int, chunk: int, count: int) -> int:
    """postFreq of NCCL 2.30's ``PatRSAlgorithm`` for n ranks, restated:
    doubled from 1 while below n / 2 (integer division) and while a chunk
    holds at least twice the aggregated data (chunk // (count postFreq) >= 2)."""
    post = 1
    while post < n // 2 and chunk // (count * post) >= 2:
        post *= 2
    return post


def nccl_aggregation(n: int, post: int = 1) -> int:
    """aggFactor of NCCL 2.30's ``PatRSAlgorithm`` for n ranks at postFreq
    ``post``, restated: min(8 postFreq, the power of two at or above n / 2
    (integer division, at least 1))."""
    return min(8 * post, 1 << (max(1, n // 2) - 1).bit_length())


def _choice(name: str, n: int) -> tuple[int, int]:
    """(aggregation, postFreq) of row ``name``'s program at n ranks: the
    given options, else NCCL's (restated)."""
    o = _entry(name)[1]
    post = o["post"] if o["post"] is not None else nccl_post(n, o["chunk"], o["count"])
    return (o["aggregation"] if o["aggregation"] is not None else nccl_aggregation(n, post)), post


def cases(name: str) -> tuple:
    """The row's case split: ``(lowest N, highest N, P, A, postFreq)`` runs
    of N with one power of two P at or above N, one aggregation A and one
    postFreq (:func:`_choice`), covering the row's N range; () for the
    aggregation-8 row, whose invariant takes P as a term of N. In a row
    that reaches 65536 ranks, the last runs with the aggregation and
    postFreq of N = 65536 are one run with P None: its invariant takes P as
    a term of N, as the aggregation-8 row's."""
    low, high = _entry(name)[2]
    if _entry(name)[1]["aggregation"] is not None:
        return ()
    runs = []
    for n in range(low, high + 1):
        key = (1 << (n - 1).bit_length(), *_choice(name, n))
        if runs and runs[-1][2:] == key:
            runs[-1] = (runs[-1][0], n, *key)
        else:
            runs.append((n, n, *key))
    if high == MAX_RANKS:
        last = [r for r in runs if r[3:] == runs[-1][3:]]
        if len(last) > 1 and runs[-len(last):] == last:
            runs[-len(last):] = [(last[0][0], high, None, *runs[-1][3:])]
    return tuple(runs)


def premises(name: str) -> tuple:
    """The row's premises besides N <= 65536: its N range and the options
    its program fixes (:mod:`collspec.proofs.scope`); a test builds the
    generator's schedule with exactly these."""
    _, o, (low, high) = _entry(name)
    fixed = []
    for option, at in (("aggregation", 0), ("post", 1)):
        if o[option] is not None:
            fixed.append(Fixed(option, lambda n, v=o[option]: v, f"{_WORDS[option]} {o[option]}"))
        else:
            runs = ", ".join(f"{v} (N {lo}..{hi})" if lo < hi else f"{v} (N={lo})" for lo, hi, v in _runs(name, at))
            fixed.append(Fixed(option, lambda n, at=at: _choice(name, n)[at], f"NCCL's {_WORDS[option]} {runs}"))
    return (
        Bound("N", ">=", low),
        *((Bound("N", "<=", high),) if high < MAX_RANKS else ()),
        *fixed,
        Fixed("chunk", lambda n: o["chunk"], f"chunk {o['chunk']}"),
        Fixed("count", lambda n: o["count"], f"count {o['count']}"),
    )


_WORDS = {"aggregation": "aggregation", "post": "postFreq"}


def _runs(name: str, at: int) -> list:
    """Runs of N in the row's range with one value of :func:`_choice` item ``at``."""
    return list(_runs_of(name, at, repr(_entry(name))))


@functools.lru_cache(maxsize=64)
def _runs_of(name: str, at: int, options: str) -> tuple:
    """:func:`_runs` for the row's ``options`` (their text: the cache's key)."""
    out = []
    low, high = _entry(name)[2]
    for n in range(low, high + 1):
        v = _choice(name, n)[at]
        if out and out[-1][2] == v:
            out[-1] = (out[-1][0], n, v)
        else:
            out.append((n, n, v))
    return tuple(out)


# -- NCCL's definitions, restated (module text) ------------------------------------------------


def _pow2_at_or_above(v):
    """The smallest power of two >= v (v >= 1)."""
    return ix.where(v <= 1, 1, ix.shift_left(2, ix.floor_log2(ix.where(v <= 1, 1, v - 1)), like=v))


def _log2(power):
    return ix.floor_log2(power)


def _mirror(i, size):
    """NCCL's mirrorInvert: i's log2(size) low bits reversed (size a power of two)."""
    out = 0 * i
    for k in range(ix.RANK_BITS - 1):
        bit = ix.shift_right(i, k) & 1
        out = out + ix.where(ix.both(bit == 1, ix.shift_left(1, k, like=i) < size), ix.shift_right(size, k + 1), 0)
    return out


def _low_bit(v):
    return v & -v


def _constants(n, p, a):
    """(delta, log2 A, log2 delta) at P = p: Python ints where p is given, else terms of n."""
    log_a = a.bit_length() - 1
    if p is None:
        delta = ix.shift_right(_pow2_at_or_above(n), log_a)
        return delta, log_a, _log2(delta)
    return p >> log_a, log_a, (p >> log_a).bit_length() - 1


def _shr(v, bits: int):
    """v >> bits for a constant ``bits`` (v itself for 0)."""
    return ix.shift_right(v, bits) if bits else v


def _shl(v, bits: int, like):
    return ix.shift_left(v, bits, like=like) if bits else v


def _ops(n, o, p, a):
    """Offset o's step: (low part l, scale exponent k, NCCL's op number in
    the step: A - 1 - mirror(i, A) in a step ``as``, L - 1 - mirror(inner,
    L) in scale step 2**k of L = A / 2**(k+1) blocks), and delta, log2 A."""
    delta, log_a, log_delta = _constants(n, p, a)
    l = o & (delta - 1)
    i = ix.shift_right(o, log_delta)
    k = _log2(_low_bit(ix.where(i == 0, 1, i)))  # scale 2**k
    blocks = ix.shift_right(a, k + 1)  # blocks of scale step 2**k
    inner = ix.shift_right(i, k + 1)  # i = (2 inner + 1) 2**k
    return l, k, i, inner, blocks, delta, log_a


def send_step(n, o, p=None, a=AGGREGATION, f=1):
    """T(o): the message of a loop that sends offset o, 1 <= o < P (module
    text), at P = ``p`` (a power of two) if given, else the one at or above
    n; aggregation ``a``, postFreq ``f`` (q = A / f messages of f blocks in
    a step ``as``; scale step 2**k: max(1, q / 2**(k+1)) messages)."""
    l, k, i, inner, blocks, delta, log_a = _ops(n, o, p, a)
    log_f = f.bit_length() - 1
    q, log_q = a >> log_f, log_a - log_f
    as_step = _shl(delta - 1 - l, log_q, o) + q - 1 - _shr(_mirror(i, a), log_f)
    first = _shl(delta - 1, log_q, o)
    scale_step = first + q - ix.shift_right(q, k + 1) - 1 - _shr(_mirror(inner, blocks), log_f)
    if log_f:  # scales 2**k, k >= log2 q: one message each, after the q - 1 of the others
        scale_step = ix.where(k < log_q, scale_step, first + q - 1 + k - log_q)
    return ix.where(l == 0, scale_step, as_step)


def place(n, o, p=None, a=AGGREGATION, f=1):
    """The place of offset o's block in its message (NCCL's op number mod
    the blocks of the message: postFreq, or L for a one-message scale step)."""
    if f == 1:
        return 0 * o
    l, k, i, inner, blocks, _, log_a = _ops(n, o, p, a)
    log_q = log_a - (f.bit_length() - 1)
    op_scale = blocks - 1 - _mirror(inner, blocks)
    return ix.where(l != 0, (a - 1 - _mirror(i, a)) & (f - 1), ix.where(k < log_q, op_scale & (f - 1), op_scale))


def distance(n, t, p=None, a=AGGREGATION, f=1):
    """The distance of message t of a loop (module text), at P = ``p`` if
    given, aggregation ``a``, postFreq ``f``."""
    delta, log_a, _ = _constants(n, p, a)
    log_f = f.bit_length() - 1
    q, log_q = a >> log_f, log_a - log_f
    first = _shl(delta - 1, log_q, t)
    in_as = t < first
    low = delta - 1 - _shr(t, log_q)
    t2 = t - first
    k = log_q - 1 - _log2(ix.where(q - 1 - t2 >= 1, q - 1 - t2, 1))
    if log_f:
        k = ix.where(t2 < q - 1, k, log_q + t2 - (q - 1))
    return ix.where(in_as, _low_bit(ix.where(low == 0, 1, low)), ix.shift_left(delta, ix.where(in_as, 0, k), like=t))


# -- the invariant --------------------------------------------------------------------------


def invariant(name: str, p=None, a=AGGREGATION, f=1, timing=None, lowbit=None, highbit=None, step_distance=None, placement=None) -> Invariant:
    """The claim of the module text for the program of row ``name``, at
    aggregation ``a``, postFreq ``f`` and P = ``p`` (for N in p/2 + 1..p)
    if given, else P a term of N. It sees ranks and cells only through
    k = c and offsets (c - r mod N), and its witness is r minus a function
    of the step: what lets it turn with the ranks. ``timing(o)``,
    ``lowbit(o)``, ``highbit(d)`` and ``step_distance(s)``, if given, stand
    for T(o) (:func:`send_step`), lowbit, the highest set bit and
    :func:`distance`, and ``placement(o)`` for the witness's slot at
    postFreq ``f`` above 1 (:func:`place` of the sender's offset o) (the
    turning query passes functions Z3 leaves free)."""
    lowbit = _low_bit if lowbit is None else lowbit

    def offset(n, r, c):
        return ix.wrap(c - r, n)

    def holds(n, s, r, c, x, k):
        o, o2 = offset(n, r, c), offset(n, x, c)
        d = o2 - o
        high = ix.shift_left(1, _log2(ix.where(d >= 1, d, 1)), like=d) if highbit is None else highbit(d)
        sent = send_step(n, o + high, p, a, f) if timing is None else timing(o + high)
        feeds = ix.both(o2 > o, ix.either(o == 0, d < lowbit(o)), sent < s)
        return ix.both(k == c, ix.either(o2 == o, feeds))

    def defined(n, s, r, c):
        return True

    def witness(n, s, r, c, *rest):
        """The one slot that writes (r, c) at step s: on rank q = r -
        distance, the place of the block of q's offset c - q (slot 0 at postFreq 1)."""
        q = ix.wrap(r - (distance(n, s, p, a, f) if step_distance is None else step_distance(s)), n)
        if placement is not None:
            return q, placement(ix.wrap(c - q, n))
        return q, (0 * s if f == 1 else place(n, ix.wrap(c - q, n), p, a, f))

    return Invariant(defined=defined, holds=holds, writer=witness, source=witness, premises=premises(name))


def prove(name: str):
    """Row ``name``: the spec's postcondition check, then the induction
    (each check within the row's resource limit, ``proofs.suite.RLIMITS``);
    for a row with :func:`cases`, a query that they cover its N range, one
    that the generator's own choice of aggregation and postFreq is the
    run's in each run, then the induction once per run on the program with
    that aggregation and postFreq given, the run's N bounds added to each
    query as a case (:class:`~collspec.proofs.solver.Query`) and P, A and
    postFreq constants in its invariant, after a query per run that the
    program of a call with only the row's chunk and count is that run's
    program for every N of the run (:func:`_same`)."""
    from dataclasses import replace

    from .induction import queries, spec_check
    from .solver import Query, run_queries

    collective = _entry(name)[0]
    split = cases(name)
    if not split:
        o = _entry(name)[1]
        from .nccl_pat_allgather import pinned

        return run_queries([spec_check(collective), own_choice_query(user_program(name), o["aggregation"], o["post"], scope(name)),
                            chosen_same_query(name), *rotation_queries(name), *pinned(queries(program(name), invariant(name)))])
    n = z3.BitVec("N", BITVEC_WIDTH)
    within = [z3.And(n >= low, n <= high) for low, high, *_ in split]
    o = _entry(name)[1]
    choice = [nccl_pat.post_frequency(n, o["chunk"], o["count"]) if o["post"] is None else o["post"]]
    choice.insert(0, nccl_pat.nccl_aggregation(n, choice[0]) if o["aggregation"] is None else o["aggregation"])
    asked = [
        spec_check(collective),
        Query("cases: the runs of N cover the row's N range", scope(name).assertions({"N": n}), z3.Or(*within)),
        Query("choice: in each run the generator's own aggregation and postFreq are the run's", scope(name).assertions({"N": n}),
              z3.And(*(z3.Implies(case, z3.And(choice[0] == a, choice[1] == f)) for (_, _, _, a, f), case in zip(split, within)))),
    ]
    for (low, high, p, a, f), case in zip(split, within):
        if p is None:  # the run of P a term of N: the program's own choice functions, as the aggregation-8 row (module text)
            q = own_choice_query(user_program(name), a, f, scope(name))
            asked.append(replace(q, name=f"{q.name} [N in {low}..{high}]", case=[*q.case, case]))
            asked.append(_same(name, a, f, scope(name).assertions({"N": n}), case, f"N in {low}..{high}: aggregation {a}, postFreq {f}", chosen=True))
        else:
            asked.append(_same(name, a, f, scope(name).assertions({"N": n}), case, f"N in {low}..{high}: aggregation {a}, postFreq {f}"))
    if name in PINNED:
        asked += run_rotation_queries(name)
    for run in split:
        asked += case_queries(name, run)
    return run_queries(asked)


def _run_words(run) -> str:
    low, high, p, a, f = run
    return f"N in {low}..{high}: P {'= pow2_above(N)' if p is None else p}, aggregation {a}, postFreq {f}"


def _within(run):
    """The run's N bounds on the bit-vector N of the queries."""
    n = z3.BitVec("N", BITVEC_WIDTH)
    return z3.And(n >= run[0], n <= run[1])


def case_queries(name: str, run) -> list:
    """The induction's queries for one run ``(low, high, P, A, postFreq)``
    of :func:`cases`: on the program with the run's aggregation and
    postFreq given, the invariant at its P (a term of N where None), A and
    postFreq, the run's N bounds added to each query as a case; in a
    :data:`PINNED` row each query's rank pinned to 0 (``Query.pin``)."""
    from dataclasses import replace

    from .induction import queries
    from .nccl_pat_allgather import pinned

    low, high, p, a, f = run
    asked = [replace(q, case=[*q.case, _within(run)]) for q in queries(program(name, a, f), invariant(name, p, a, f))]
    if name in PINNED:
        return pinned(asked, _run_words(run) + ", ")
    return [replace(q, name=f"{q.name} [{_run_words(run)}]") for q in asked]


def run_rotation_queries(name: str) -> list:
    """The lemmas that carry a :data:`PINNED` row's rank-0 queries to every
    rank (module text), each on the programs and N of the runs it is
    about: the rotation of the transfer of each run's program (one query
    per aggregation and postFreq, the N of its runs a case), of the ends
    and the arithmetic mod N (:mod:`collspec.proofs.nccl_pat_allgather`,
    on the row's scope), the witness's distance in 0..N-1 at every step of
    each run (:func:`distance_query`), and the turning of the invariant
    with T, lowbit, highbit, the step's distance and the witness's slot
    functions Z3 leaves free (one query for every run: the invariant of
    each run is that one with the run's functions in their place)."""
    from dataclasses import replace

    from .nccl_pat_allgather import ends_rotation_query, invariant_turning_query, transfer_rotation_query, turning_queries

    split = cases(name)
    asked = []
    for a, f in dict.fromkeys((a, f) for *_, a, f in split):
        runs = [run for run in split if run[3:] == (a, f)]
        spans = ", ".join(f"{lo}..{hi}" for lo, hi, *_ in runs)
        q = transfer_rotation_query(name, made=program(name, a, f))
        asked.append(replace(q, name=f"{q.name} [aggregation {a}, postFreq {f}: N in {spans}]", case=[*q.case, z3.Or(*(_within(run) for run in runs))]))
    asked += [ends_rotation_query(name), *turning_queries(name), *(distance_query(name, run) for run in split)]
    n, s = z3.Ints("N s")
    free = {g: z3.Function(g, z3.IntSort(), z3.IntSort()) for g in ("highbit", "D", "place")}
    asked.append(invariant_turning_query(
        name, make=lambda t, lb: invariant(name, timing=t, lowbit=lb, highbit=free["highbit"], step_distance=free["D"], placement=free["place"]),
        assumed=[0 <= free["D"](s), free["D"](s) < n],
        words="T, lowbit, highbit, the step's distance D and the witness's slot any functions, D into 0..N-1"))
    return asked


def distance_query(name: str, run=None):
    """The witness's distance (:func:`distance`) of every step s of the
    loop, 0 <= s < steps, is in 0..N-1, for every N of the row's scope; for
    a ``run`` of :func:`cases`, at its P, aggregation and postFreq, on its
    program's steps, for the N of the run (a case)."""
    from ..models.program import as_term, symbolic
    from .solver import Query

    p, a, f = (None, AGGREGATION, 1) if run is None else run[2:]
    sym, v = symbolic(program(name) if run is None else program(name, a, f))
    n, s = v["N"], v["s"]
    t = as_term(distance(n, s, p, a, f), n)
    return Query("turning: the witness's distance at each step is in 0..N-1" + ("" if run is None else f" [{_run_words(run)}]"),
                 scope(name).assertions(v) + [0 <= s, s < as_term(sym.steps(n), n)], z3.And(0 <= t, t < n), (), () if run is None else [_within(run)])


def rotation_queries(name: str) -> list:
    """The lemmas that carry the aggregation-8 row's rank-0 queries to every
    rank (module text): those of :mod:`collspec.proofs.nccl_pat_allgather`
    on this row's program, ends and invariant, and :func:`distance_query`."""
    from .nccl_pat_allgather import ends_rotation_query, invariant_turning_query, transfer_rotation_query, turning_queries

    n, s = z3.Ints("N s")
    free = {f: z3.Function(f, z3.IntSort(), z3.IntSort()) for f in ("highbit", "D")}
    return [transfer_rotation_query(name), ends_rotation_query(name), *turning_queries(name), distance_query(name),
            invariant_turning_query(name, make=lambda t, lb: invariant(name, timing=t, lowbit=lb, highbit=free["highbit"], step_distance=free["D"]),
                                    assumed=[0 <= free["D"](s), free["D"](s) < n],
                                    words="T, lowbit, highbit and the step's distance D any functions, D into 0..N-1")]


def chosen_same_query(name: str):
    """For a row with the aggregation and postFreq given (no :func:`cases`):
    :func:`_same` with ``chosen``, over the row's whole scope: the user's
    call's program, its own choice terms replaced by the row's aggregation
    and postFreq (which its ``choice`` query decides they are), is the
    row's program at every N, step, rank and slot."""
    o = _entry(name)[1]
    n = z3.BitVec("N", BITVEC_WIDTH)
    low, high = _entry(name)[2]
    return _same(name, o["aggregation"], o["post"], scope(name).assertions({"N": n}), z3.And(n >= low, n <= high),
                 f"N in {low}..{high}: aggregation {o['aggregation']}, postFreq {o['post']}", chosen=True)


def own_choice_query(made, aggregation: int, post: int, within: Scope):
    """The query that, for every N of ``within``, the program ``made`` (a
    user's call: aggregation and postFreq left to the generator) chooses
    aggregation ``aggregation`` and postFreq ``post`` with its own choice
    functions (``Program.choices``: the very ``agg`` and ``pf`` its steps,
    width and transfers call). Given those values, ``pat_program`` computes
    the rest of the program from them alone (module text), so the proved
    program with them given is the user's."""
    from ..models.program import as_term
    from .solver import Query

    n = z3.BitVec("N", BITVEC_WIDTH)
    agg, pf = (as_term(made.choices[k](n), n) for k in ("aggregation", "post"))
    return Query(f"choice: a call with only chunk and count chooses aggregation {aggregation} and postFreq {post} for every N of the scope",
                 within.assertions({"N": n}), z3.And(agg == aggregation, pf == post))


def _same(name: str, a: int, f: int, premises: list, case, words: str, chosen: bool = False):
    """The query that, for N in ``case``, the program the row's options
    build (no aggregation or postFreq given: the generator's own choice,
    what a user's call with the row's chunk and count runs) is the run's
    program (aggregation ``a``, postFreq ``f`` given): the same steps,
    width, cells and link capacity, and at every step, rank and slot the
    same transfer (active alike; where active, the same peer, cells and op).

    ``chosen``: the user's program's terms with its own choice terms
    (``Program.choices``, the very ``agg(N)`` and ``pf(N)`` terms its
    functions build) replaced by ``a`` and ``f`` (``z3.substitute``), and
    the claim that those choice terms are ``a`` and ``f`` at every N of
    ``case`` (as :func:`own_choice_query`, here on the same built
    program): where they are, the replaced terms have the user's
    program's values (the one meta-step: replacing a subterm by an equal
    value keeps a term's value). The solver then compares the two programs without
    re-deriving NCCL's choice at every point (a fraction of a second
    where the full query over 18..65536 took 57 s of CPU); any code the
    user's call runs that the given program does not (a branch on the
    options being None) is still compared, at every N, step, rank and slot."""
    from ..models.program import as_term, symbolic
    from .solver import Query

    (built, v), (given, _) = symbolic(user_program(name)), symbolic(program(name, a, f))
    n, s, r, j = v["N"], v["s"], v["r"], v["j"]
    pairs = [(as_term(built.choices[k](n), n), as_term(value, n)) for k, value in (("aggregation", a), ("post", f))] if chosen else []
    pairs = [(x, y) for x, y in pairs if not x.eq(y)]

    def replaced(term):
        return z3.substitute(term, *pairs) if pairs and not isinstance(term, bool) else term

    def shape(made):
        return [as_term(g(n), n) for g in (made.steps, made.width, made.chunks, *((made.link_capacity,) if made.link_capacity else ()))]

    def transfer(made):
        t = made.transfer(n, s, r, j)
        return [as_term(x, n) for x in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)]

    mine, theirs = [replaced(x) for x in transfer(built)], transfer(given)
    steps, width = as_term(given.steps(n), n), as_term(given.width(n), n)
    how = " (its own aggregation and postFreq terms replaced by the run's, as choice decides them)" if chosen else ""
    return Query(
        f"same: the program NCCL's options build is the run's{how} [{words}]",
        [*premises, 0 <= s, s < steps, 0 <= r, r < n, 0 <= j, j < width],
        z3.And(*(x == y for x, y in pairs), *(replaced(x) == y for x, y in zip(shape(built), shape(given))), mine[0] == theirs[0],
               z3.Implies(theirs[0], z3.And(*(x == y for x, y in zip(mine[1:], theirs[1:]))))),
        (), [case])
