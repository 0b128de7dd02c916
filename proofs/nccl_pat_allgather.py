"""nccl-pat's all-gather copies every block exactly once to every rank, for every N in 10..256.

The induction of :mod:`collspec.proofs.induction` on ``nccl-pat``'s own
all-gather transfer function
(:func:`collspec.models.generators.nccl_pat.pat_program`), N symbolic in
10..256 on bit-vectors, at the options of :data:`OPTIONS`: aggregation 8,
postFreq 1, chunk 1, count 1, what NCCL 2.30's ``PatAGAlgorithm``
constructor chooses at chunk 1, count 1 from N = 10.

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

Proved vs argued. The induction's queries are decided one power of two
at a time: for each P in 16, 32, .., 256 (:data:`POWERS`), every query of
the induction with the case ``P/2 < N <= P and pow2_above(N) = P`` added
(``pow2_above`` the generator's own term, so that the program's P, delta
and shifts are constants to the solver) and the invariant's P the number
P. One more query (``cases``) shows that these cases cover the scope: every
N in 10..256 is in one of them. The step from the per-P queries and the
cover to the induction over all N of the scope is the argument that a
claim that holds in each case of an exhaustive split holds (each query is
a universally quantified implication with the case among its premises).

Why 256: the solver's work per case grows with the range of N the case
leaves free (the wrap-arounds mod N of the program and the invariant: with
N fixed, the case P = 256 takes about a sixth of the units), by about 1.5 to 2
times per doubling of P. Measured on z3-solver 5.4.1, 2 shared cores, the
CPU time of a case's queries (the heaviest check): P = 16: 3 s (4 million
units), 256: 14 s (32 million), 512: 25 s (69 million), 1024: about 60 s
(115 million), 4096: 95 s (165 million); at P = 65536 four queries reach
200 million units each without a verdict. Cases up to 256 fit
``--full``'s budget (40 s for the row).

Premises beyond the induction's: none; the options and 10 <= N <= 256 are
the scope's. What stays bounded (N below 10 or above 256, other
aggregations and postFreq, several loops) is listed in docs/proofs.md.
"""

from __future__ import annotations

from dataclasses import replace

import z3

from ..models import indexing as ix
from ..models.generators import nccl_pat
from ..models.program import BITVEC_WIDTH
from .induction import Invariant
from .nccl_pat import _log2, _low_bit
from .scope import Bound, Fixed, Scope
from .solver import Query

#: the aggregation the row proves: NCCL 2.30's at postFreq 1 (count 1,
#: chunk 1) for every N >= 10 (min(8 postFreq, most), most >= 8 from N = 10)
AGGREGATION = 8
#: the fewest ranks that reach it (the generator refuses a larger aggregation than N allows)
LOWEST = 10
ROW = "nccl-pat.allgather-exactly-once"
#: row -> (collective, the options of the proved program)
OPTIONS = {ROW: ("allgather", {"aggregation": AGGREGATION, "post": 1, "chunk": 1, "count": 1})}
#: the most ranks the row covers (module text: why not 65536)
HIGHEST = 256
#: the powers of two at or above some N of the scope: one case each
POWERS = tuple(1 << b for b in range((LOWEST - 1).bit_length(), HIGHEST.bit_length()))


def program(name: str = ROW):
    """The transfer function row ``name`` proves: nccl-pat's, at :data:`OPTIONS`."""
    collective, options = OPTIONS[name]
    return nccl_pat.pat_program(collective, **options)


def scope(name: str = ROW) -> Scope:
    """The row's scope: :func:`premises` (N in 10..256 and the options)."""
    return Scope(premises(name))


def premises(name: str = ROW) -> tuple:
    """The row's premises: 10 <= N <= 256 and the options its program fixes
    (:mod:`collspec.proofs.scope`); a test builds the generator's schedule
    with exactly these."""
    _, o = OPTIONS[name]
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
    return _popcount(l, delta.bit_length() - 1) - 1 + delta - _low_bit(l) - l


def arrival(p: int, o):
    """T(o): the message of the loop that brings offset o, 1 <= o < p, for
    the power of two p at or above N (module text)."""
    a = AGGREGATION
    log_a = a.bit_length() - 1
    delta = p >> log_a
    log_delta = delta.bit_length() - 1
    l = o & (delta - 1)
    i = ix.shift_right(o, log_delta)
    k = _log2(_low_bit(ix.where(i == 0, 1, i)))  # scale 2**k: i = (2 m + 1) 2**k
    scale = ix.shift_right(a, k + 1) - 1 + ix.shift_right(i, k + 1)
    steps_as = a - 1 + ix.shift_left(position(delta, l), log_a, like=o) + i
    return ix.where(l == 0, scale, steps_as)


# -- the invariant --------------------------------------------------------------------------


def invariant(p: int, name: str = ROW) -> Invariant:
    """The claim of the module text, for the power of two ``p`` at or above N
    (one case of the row)."""

    def offset(n, r, c):
        return ix.wrap(c - r, n)

    def arrived(n, s, r, c):
        o = offset(n, r, c)
        return ix.either(o == 0, arrival(p, o) < s)

    def holds(n, s, r, c, x, k):
        return ix.both(k == c, x == c, arrived(n, s, r, c))

    def defined(n, s, r, c):
        return arrived(n, s, r, c)

    def witness(n, s, r, c, *rest):
        """Slot 0 of rank r + lowbit(o): the one that brings offset o."""
        return ix.wrap(r + _low_bit(offset(n, r, c)), n), 0 * s

    return Invariant(defined=defined, holds=holds, writer=witness, source=witness, premises=premises(name))


def case(n, p: int) -> list:
    """Case P = p of the row: p/2 < N <= p, and the generator's own
    P (``nccl_pat.pow2_above``) is p."""
    return [n > p // 2, n <= p, nccl_pat.pow2_above(n) == p]


def cover_query() -> Query:
    """The cases of :data:`POWERS` cover the scope."""
    n = z3.BitVec("N", BITVEC_WIDTH)
    domain = scope().assertions({"N": n})
    return Query(f"cases: every N of the scope has P/2 < N <= P = pow2_above(N) for one P in {POWERS[0]}..{POWERS[-1]}",
                 domain, z3.Or(*[z3.And(*case(n, p)) for p in POWERS]))


def _bv(name: str):
    return z3.BitVec(name, BITVEC_WIDTH)


def case_queries(p: int, name: str = ROW) -> list:
    """Every query of the induction (:func:`collspec.proofs.induction.queries`)
    with the invariant of ``p`` and the case P = p added."""
    from .induction import queries

    here = case(_bv("N"), p)
    return [replace(q, name=f"{q.name} [P = {p}]", case=[*q.case, *here]) for q in queries(program(name), invariant(p, name))]


def prove(name: str = ROW):
    """The row: the spec's postcondition check, the cover, then the
    induction's queries for each P (each check within the row's resource
    limit, ``proofs.suite.RLIMITS``)."""
    from .induction import spec_check
    from .solver import run_queries

    collective, _ = OPTIONS[name]
    return run_queries([spec_check(collective), cover_query(), *(q for p in POWERS for q in case_queries(p, name))])
