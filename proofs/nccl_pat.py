"""nccl-pat's reduce-scatter computes every contribution exactly once, for every N in 10..65536.

The induction of :mod:`collspec.proofs.induction` on ``nccl-pat``'s own
transfer function (:func:`collspec.models.generators.nccl_pat.pat_program`),
N symbolic in 10..65536 on bit-vectors, at the options of :data:`OPTIONS`:
aggregation 8, postFreq 1, chunk 1, count 1, which is what NCCL 2.30's
``PatRSAlgorithm`` constructor chooses at chunk 1, count 1 from N = 10
(aggFactor = min(8 postFreq, the power of two at or above N/2)).

The invariant is stated from NCCL 2.30's definitions (``PatRSAlgorithm``
and ``mirrorInvert`` in ``src/include/collectives.h``), written here again
rather than taken from the generator, so that a wrong generator helper
fails a query instead of agreeing with itself. With P the power of two at
or above N, the aggregation A and delta = P / A, rank r's cell c is the
partial of block c at *offset* o = c - r mod N. An offset o of low part
l = o mod delta and high part i = o / delta is sent once per loop, to
o - lowbit(o) on rank r + lowbit(o): the steps ``as`` = delta - 1 down to
1 (A blocks each), then the scales 1, 2, .. A/2 (A / (2 scale) blocks
each); a step's blocks go in ``mirrorInvert`` order (block i in message
A - 1 - mirror(i)). With postFreq 1 each message is one block and one
schedule step, so offset o's send is step T(o) of the loop
(:func:`send_step`). The claim after s steps: the partial at offset o holds
the contribution of offset o + d (rank c - o - d) exactly once when d = 0,
or d is below o's lowest set bit (any d for o = 0), o + d < N, and the
partial at o + highbit(d) (the last hop of o + d's path) has been sent:
T(o + highbit(d)) < s.

Premises beyond the induction's: none; the options and N >= 10 are the
scope's. What stays bounded (N below 10, other aggregations and postFreq,
several loops, the all-gather) is listed in docs/proofs.md.
"""

from __future__ import annotations

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

#: row -> (collective, the options of the proved program (aggregation None:
#: NCCL's choice, computed by the generator), the N it covers)
OPTIONS = {
    "nccl-pat.reduce_scatter-exactly-once": ("reduce_scatter", {"aggregation": AGGREGATION, "post": 1, "chunk": 1, "count": 1}, (LOWEST, MAX_RANKS)),
    BELOW: ("reduce_scatter", {"aggregation": None, "post": 1, "chunk": 1, "count": 1}, (2, LOWEST - 1)),
}


def program(name: str):
    """The transfer function row ``name`` proves: nccl-pat's, at :data:`OPTIONS`."""
    collective, options, _ = OPTIONS[name]
    return nccl_pat.pat_program(collective, **options)


def scope(name: str) -> Scope:
    """The row's scope: its N range (bit-vectors), and :func:`premises`."""
    low, high = OPTIONS[name][2]
    return Scope((Bound("N", ">=", low), Bound("N", "<=", high))) + premises(name)


def nccl_aggregation(n: int, post: int = 1) -> int:
    """aggFactor of NCCL 2.30's ``PatRSAlgorithm`` for n ranks at postFreq
    ``post``, restated: min(8 postFreq, the power of two at or above n / 2
    (integer division, at least 1))."""
    return min(8 * post, int(_pow2_at_or_above(max(1, n // 2))))


def cases(name: str) -> tuple:
    """The row's case split: ``(lowest N, highest N, P, A)`` runs of N with
    one power of two P at or above N and one aggregation A (restated from
    NCCL, :func:`nccl_aggregation`), covering the row's N range; () for the
    aggregation-8 row, whose invariant takes P as a term of N."""
    low, high = OPTIONS[name][2]
    if OPTIONS[name][1]["aggregation"] is not None:
        return ()
    runs = []
    for n in range(low, high + 1):
        key = (int(_pow2_at_or_above(n)), nccl_aggregation(n, OPTIONS[name][1]["post"]))
        if runs and runs[-1][2:] == key:
            runs[-1] = (runs[-1][0], n, *key)
        else:
            runs.append((n, n, *key))
    return tuple(runs)


def premises(name: str) -> tuple:
    """The row's premises besides N <= 65536: its N range and the options
    its program fixes (:mod:`collspec.proofs.scope`); a test builds the
    generator's schedule with exactly these."""
    _, o, (low, high) = OPTIONS[name]
    if o["aggregation"] is None:
        runs = ", ".join(f"{a} (N {lo}..{hi})" if lo < hi else f"{a} (N={lo})" for lo, hi, _, a in _merged(cases(name)))
        aggregation = Fixed("aggregation", lambda n: nccl_aggregation(n, o["post"]), f"NCCL's aggregation {runs}")
    else:
        aggregation = Fixed("aggregation", lambda n: o["aggregation"], f"aggregation {o['aggregation']}")
    return (
        Bound("N", ">=", low),
        *((Bound("N", "<=", high),) if high < MAX_RANKS else ()),
        aggregation,
        Fixed("post", lambda n: o["post"], f"postFreq {o['post']}"),
        Fixed("chunk", lambda n: o["chunk"], f"chunk {o['chunk']}"),
        Fixed("count", lambda n: o["count"], f"count {o['count']}"),
    )


def _merged(runs):
    """``runs`` with neighbours of one aggregation joined (for the scope text)."""
    out = []
    for lo, hi, p, a in runs:
        if out and out[-1][3] == a:
            out[-1] = (out[-1][0], hi, p, a)
        else:
            out.append((lo, hi, p, a))
    return out


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
    if p is None:
        p = _pow2_at_or_above(n)
        log_a = _log2(a)
        delta = ix.shift_right(p, log_a)
        return delta, log_a, _log2(delta)
    log_a = a.bit_length() - 1
    return p >> log_a, log_a, (p >> log_a).bit_length() - 1


def send_step(n, o, p=None, a=AGGREGATION):
    """T(o): the message of a loop that sends offset o, 1 <= o < P (module
    text), at P = ``p`` (a power of two) if given, else the one at or above n."""
    delta, log_a, log_delta = _constants(n, p, a)
    l = o & (delta - 1)
    i = ix.shift_right(o, log_delta)
    k = _log2(_low_bit(ix.where(i == 0, 1, i)))  # scale 2**k
    blocks = ix.shift_right(a, k + 1)  # blocks (and messages) of scale step 2**k
    inner = ix.shift_right(i, k + 1)  # i = (2 inner + 1) 2**k
    as_step = ix.shift_left(delta - 1 - l, log_a, like=o) + a - 1 - _mirror(i, a)
    scale_step = ix.shift_left(delta - 1, log_a, like=o) + a - blocks - 1 - _mirror(inner, blocks)
    return ix.where(l == 0, scale_step, as_step)


def distance(n, t, p=None, a=AGGREGATION):
    """The distance of message t of a loop (module text), at P = ``p`` if given."""
    delta, log_a, _ = _constants(n, p, a)
    first = ix.shift_left(delta - 1, log_a, like=t)
    in_as = t < first
    low = delta - 1 - ix.shift_right(t, log_a)
    t2 = t - first
    k = log_a - 1 - _log2(ix.where(a - 1 - t2 >= 1, a - 1 - t2, 1))
    return ix.where(in_as, _low_bit(ix.where(low == 0, 1, low)), ix.shift_left(delta, ix.where(in_as, 0, k), like=t))


# -- the invariant --------------------------------------------------------------------------


def invariant(name: str, p=None, a=AGGREGATION) -> Invariant:
    """The claim of the module text for the program of row ``name``, at
    aggregation ``a`` and P = ``p`` (for N in p/2 + 1..p) if given, else P
    a term of N."""
    def offset(n, r, c):
        return ix.wrap(c - r, n)

    def holds(n, s, r, c, x, k):
        o, o2 = offset(n, r, c), offset(n, x, c)
        d = o2 - o
        high = ix.shift_left(1, _log2(ix.where(d >= 1, d, 1)), like=d)
        feeds = ix.both(o2 > o, ix.either(o == 0, d < _low_bit(o)), send_step(n, o + high, p, a) < s)
        return ix.both(k == c, ix.either(o2 == o, feeds))

    def defined(n, s, r, c):
        return True

    def witness(n, s, r, c, *rest):
        """The one slot that writes (r, c) at step s: slot 0 of rank r - distance."""
        return ix.wrap(r - distance(n, s, p, a), n), 0 * s

    return Invariant(defined=defined, holds=holds, writer=witness, source=witness, premises=premises(name))


def prove(name: str):
    """Row ``name``: the spec's postcondition check, then the induction
    (each check within the row's resource limit, ``proofs.suite.RLIMITS``);
    for a row with :func:`cases`, a query that they cover its N range, then
    the induction once per case, the case's N bounds added to each query
    as a case (:class:`~collspec.proofs.solver.Query`) and P and A
    constants in its invariant."""
    from .induction import queries, spec_check
    from .solver import Query, run_queries

    collective = OPTIONS[name][0]
    made = program(name)
    split = cases(name)
    if not split:
        return run_queries([spec_check(collective), *queries(made, invariant(name))])
    n = z3.BitVec("N", BITVEC_WIDTH)
    within = [z3.And(n >= low, n <= high) for low, high, _, _ in split]
    asked = [spec_check(collective), Query("cases: the runs of N cover the row's N range", scope(name).assertions({"N": n}), z3.Or(*within))]
    for (low, high, p, a), case in zip(split, within):
        asked += [Query(f"{q.name} [N in {low}..{high}: P {p}, aggregation {a}]", q.premises, q.claim, q.when, [*q.case, case])
                  for q in queries(made, invariant(name, p, a))]
    return run_queries(asked)
