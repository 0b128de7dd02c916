"""Hypercube algorithms: recursive doubling and halving-doubling (Rabenseifner).

Both work on the largest power of two P <= N. When N is not a power of two,
the E = N - P extra ranks first *fold* their data into ranks 0..E-1 and are
*unfolded* (sent the result) at the end, the usual way; this costs extra
traffic, which the checker reports as not bandwidth-optimal.

``recursive-doubling``: in step k, rank i and rank i XOR 2**k exchange
everything they have. All-reduce sends the whole vector (one chunk) log2 P
times; all-gather doubles the number of chunks sent each step.

``halving-doubling``: a reduce-scatter by recursive halving (step k halves
the chunks a rank is responsible for and sends the other half to its
partner) followed by an all-gather by recursive doubling: 2 log2 P steps
moving 2(P-1)/P of the vector, the bound when N = P. Chunk c is finished
by rank c for c < P and by rank c - P above, so that rank j < E also
finishes chunk P + j for the extra rank P + j.

These algorithms send one message per link per step whose size grows (up to
half the vector, or all of it when folding). Their schedules therefore
declare ``link_capacity`` as their largest message in chunks: the
link-overload check holds them to that, and the cost model charges each
step for its largest message.

Each is one transfer function (:class:`~collspec.models.program.Program`,
on bit-vectors because of the XOR): slot j of rank r stands for chunk j.
A step is a fold (only when E > 0), one step per bit, or an unfold (only
when E > 0), in that order.
"""

from __future__ import annotations

import numpy as np

from .. import indexing as ix
from ..indexing import hypercube_partner
from ..program import BITVEC, Program, Transfer
from ..schedule import COPY, REDUCE, Schedule, Step


def split(n):
    """(P, E, log2 P): largest power of two P <= n, extras E = n - P."""
    p = ix.largest_power_of_two(n)
    return p, n - p, ix.floor_log2(n)


def virtual(c, p):
    """The rank < P that finishes chunk c (c for c < P, c - P above)."""
    return ix.where(c < p, c, c - p)


def _has_fold(n):
    return ix.where(split(n)[1] > 0, 1, 0)


def _steps(n, bit_phases: int):
    return 2 * _has_fold(n) + bit_phases * split(n)[2]


def _pick(cases: list, default: Transfer) -> Transfer:
    """The transfer of the first case whose condition holds."""
    result = default
    for condition, t in reversed(cases):
        result = Transfer(*(ix.where(condition, a, b) for a, b in zip((t.active, t.dst, t.src_chunk, t.dst_chunk, t.op), (result.active, result.dst, result.src_chunk, result.dst_chunk, result.op))))
    return result


def _bits(n, s, r, j, phases, fold: Transfer, unfold: Transfer) -> Transfer:
    """Fold, then one step per bit for each of ``phases`` (functions of the
    bit's index k in that phase), then unfold."""
    _, _, levels = split(n)
    f = _has_fold(n)
    cases = [(ix.both(f == 1, s == 0), fold)]
    for i, phase in enumerate(phases):
        k = s - f - i * levels
        cases.append((ix.both(k >= 0, k < levels), phase(k)))
    return _pick(cases, unfold)


def _label(bit_phases, fold_name=None):
    """(phase, name) of step s: bit_phases is [(phase, name of bit b, bit of k)]."""

    def label(n, s):
        p, e, levels = (int(x) for x in split(n))
        f = 1 if e else 0
        if f and s == 0:
            return "fold", fold_name or FOLD_NAME
        k = s - f
        for phase, verb, bit in bit_phases:
            if k < levels:
                return phase, f"{verb} across bit {bit(k, levels)}"
            k -= levels
        return "unfold", UNFOLD_NAME

    return label


FOLD_NAME = "extra ranks fold into their partners"
UNFOLD_NAME = "partners send the result to the extra ranks"


def _largest_message(n: int, steps: list[Step]) -> int:
    """The most chunks any directed link carries in one step."""
    largest = 1
    for step in steps:
        if len(step):
            _, counts = np.unique(step.src.astype(np.int64) * (1 << 32) + step.dst, return_counts=True)
            largest = max(largest, int(counts.max()))
    return largest


def rd_allreduce_program() -> Program:
    def transfer(n, s, r, j):
        p, e, _ = split(n)
        one = j == 0
        fold = Transfer(ix.both(r >= p, one), r - p, 0, 0, REDUCE)
        unfold = Transfer(ix.both(r < e, one), r + p, 0, 0, COPY)
        return _bits(n, s, r, j, [lambda k: Transfer(ix.both(r < p, one), hypercube_partner(r, k), 0, 0, REDUCE)], fold, unfold)

    return Program("recursive-doubling", "allreduce", lambda n: 1, lambda n: _steps(n, 1), lambda n: 1, transfer,
                   _label([("recursive doubling", "exchange", lambda k, levels: k)]), rd_allreduce_program, sort=BITVEC,
                   title=lambda n: f"recursive-doubling allreduce, {n} ranks")


def rd_allgather_program() -> Program:
    """Before the step across bit k, rank i < P holds the chunks of the 2**k
    ranks sharing its bits above k, and sends them all to its partner."""

    def transfer(n, s, r, j):
        p, e, _ = split(n)
        fold = Transfer(ix.both(r >= p, j == r), r - p, j, j, COPY)
        unfold = Transfer(ix.both(r < e, j != r + p), r + p, j, j, COPY)

        def exchange(k):
            return Transfer(ix.both(r < p, ix.shift_right(virtual(j, p), k) == ix.shift_right(r, k)), hypercube_partner(r, k), j, j, COPY)

        return _bits(n, s, r, j, [exchange], fold, unfold)

    return Program("recursive-doubling", "allgather", lambda n: n, lambda n: _steps(n, 1), lambda n: n, transfer,
                   _label([("all-gather", "exchange", lambda k, levels: k)], "extra ranks send their chunk to their partners"), rd_allgather_program, capacity=_largest_message, sort=BITVEC,
                   title=lambda n: f"recursive-doubling allgather, {n} ranks")


def _halving(n, r, j, k):
    """Halving step k works on bit L-1-k: rank i hands its partner the chunks
    whose finishing rank agrees with the partner on that bit and above."""
    p, _, levels = split(n)
    bit = levels - 1 - k
    partner = hypercube_partner(r, bit)
    return Transfer(ix.both(r < p, ix.shift_right(virtual(j, p), bit) == ix.shift_right(partner, bit)), partner, j, j, REDUCE)


def _doubling(n, r, j, k):
    """Doubling step k works on bit k: rank i sends everything it has
    finished so far (the chunks agreeing with it on bit k and above)."""
    p, _, _ = split(n)
    return Transfer(ix.both(r < p, ix.shift_right(virtual(j, p), k) == ix.shift_right(r, k)), hypercube_partner(r, k), j, j, COPY)


HALVING = ("reduce-scatter", "halving", lambda k, levels: levels - 1 - k)
DOUBLING = ("all-gather", "doubling", lambda k, levels: k)


def _hd_program(collective: str) -> Program:
    allreduce = collective == "allreduce"

    def transfer(n, s, r, j):
        p, e, _ = split(n)
        fold = Transfer(r >= p, r - p, j, j, REDUCE)
        unfold = Transfer(ix.both(r < e, True if allreduce else j == r + p), r + p, j, j, COPY)
        phases = [lambda k: _halving(n, r, j, k)] + ([lambda k: _doubling(n, r, j, k)] if allreduce else [])
        return _bits(n, s, r, j, phases, fold, unfold)

    bit_phases = 2 if allreduce else 1
    return Program("halving-doubling", collective, lambda n: n, lambda n: _steps(n, bit_phases), lambda n: n, transfer,
                   _label([HALVING, DOUBLING][:bit_phases]), lambda: _hd_program(collective), capacity=_largest_message, sort=BITVEC,
                   title=lambda n: f"halving-doubling {collective}, {n} ranks")


def hd_allreduce_program() -> Program:
    return _hd_program("allreduce")


def hd_reduce_scatter_program() -> Program:
    return _hd_program("reduce_scatter")


def rd_allreduce(n: int) -> Schedule:
    return rd_allreduce_program().schedule(n)


def rd_allgather(n: int) -> Schedule:
    return rd_allgather_program().schedule(n)


def hd_allreduce(n: int) -> Schedule:
    return hd_allreduce_program().schedule(n)


def hd_reduce_scatter(n: int) -> Schedule:
    return hd_reduce_scatter_program().schedule(n)
