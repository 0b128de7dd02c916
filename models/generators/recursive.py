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
"""

from __future__ import annotations

import numpy as np

from ..indexing import hypercube_partner
from ..schedule import COPY, REDUCE, Schedule, Step


def _split(n: int) -> tuple[int, int, int]:
    """(P, E, log2 P): largest power of two P <= n, extras E = n - P."""
    p = 1 << (n.bit_length() - 1)
    return p, n - p, p.bit_length() - 1


def _virtual(c: np.ndarray, p: int) -> np.ndarray:
    return np.where(c < p, c, c - p)


def _send_sets(pairs: list[tuple[int, int, np.ndarray]], op: int, phase: str, name: str) -> Step:
    """One step from (src, dst, chunks) triples."""
    parts = [Step.of(s, d, c, c, op, phase=phase) for s, d, c in pairs if len(c)]
    return Step.concat(parts, phase=phase, name=name)


def _fold(n: int, chunks: np.ndarray, op: int) -> Step:
    p, e, _ = _split(n)
    return _send_sets([(p + j, j, chunks) for j in range(e)], op, "fold", "extra ranks fold into their partners")


def _unfold(n: int, chunks_for) -> Step:
    p, e, _ = _split(n)
    return _send_sets([(j, p + j, chunks_for(j)) for j in range(e)], COPY, "unfold", "partners send the result to the extra ranks")


def rd_allreduce(n: int) -> Schedule:
    p, e, levels = _split(n)
    steps = [_fold(n, np.array([0]), REDUCE)] if e else []
    i = np.arange(p)
    for k in range(levels):
        steps.append(Step.of(i, hypercube_partner(i, k), 0, 0, REDUCE, phase="recursive doubling", name=f"exchange across bit {k}"))
    if e:
        steps.append(_unfold(n, lambda j: np.array([0])))
    return Schedule("allreduce", n, 1, tuple(steps), name=f"recursive-doubling allreduce, {n} ranks")


def rd_allgather(n: int) -> Schedule:
    p, e, levels = _split(n)
    chunks = np.arange(n)
    v = _virtual(chunks, p)
    steps = [_send_sets([(p + j, j, np.array([p + j])) for j in range(e)], COPY, "fold", "extra ranks send their chunk to their partners")] if e else []
    for k in range(levels):
        # before step k rank i holds the chunks of the 2**k ranks sharing its high bits
        pairs = [(i, hypercube_partner(i, k), chunks[(v >> k) == (i >> k)]) for i in range(p)]
        steps.append(_send_sets(pairs, COPY, "all-gather", f"exchange across bit {k}"))
    if e:
        steps.append(_unfold(n, lambda j: chunks[chunks != p + j]))
    return Schedule("allgather", n, n, tuple(steps), name=f"recursive-doubling allgather, {n} ranks", link_capacity=_largest_message(steps))


def _hypercube_phase(n: int, bits: range, op: int, phase: str, verb: str, keeps_partner_half: bool) -> list[Step]:
    """One step per bit: rank i sends its partner across ``bit`` the chunks
    whose finishing rank agrees with the partner (halving: the half it hands
    over) or with itself (doubling: everything it has finished so far) on
    that bit and every higher one."""
    p, _, _ = _split(n)
    chunks = np.arange(n)
    v = _virtual(chunks, p)
    steps = []
    for b in bits:
        pairs = []
        for i in range(p):
            partner = hypercube_partner(i, b)
            owner = partner if keeps_partner_half else i
            pairs.append((i, partner, chunks[(v >> b) == (owner >> b)]))
        steps.append(_send_sets(pairs, op, phase, f"{verb} across bit {b}"))
    return steps


def _halving(n: int) -> list[Step]:
    levels = _split(n)[2]
    return _hypercube_phase(n, range(levels - 1, -1, -1), REDUCE, "reduce-scatter", "halving", True)


def _doubling(n: int) -> list[Step]:
    return _hypercube_phase(n, range(_split(n)[2]), COPY, "all-gather", "doubling", False)


def _largest_message(steps: list[Step]) -> int:
    """The most chunks any directed link carries in one step."""
    largest = 1
    for step in steps:
        if len(step):
            _, counts = np.unique(step.src.astype(np.int64) * (1 << 32) + step.dst, return_counts=True)
            largest = max(largest, int(counts.max()))
    return largest


def hd_allreduce(n: int) -> Schedule:
    _, e, _ = _split(n)
    every = np.arange(n)
    steps = ([_fold(n, every, REDUCE)] if e else []) + _halving(n) + _doubling(n)
    if e:
        steps.append(_unfold(n, lambda j: every))
    return Schedule("allreduce", n, n, tuple(steps), name=f"halving-doubling allreduce, {n} ranks", link_capacity=_largest_message(steps))


def hd_reduce_scatter(n: int) -> Schedule:
    p, e, _ = _split(n)
    every = np.arange(n)
    steps = ([_fold(n, every, REDUCE)] if e else []) + _halving(n)
    if e:
        steps.append(_unfold(n, lambda j: np.array([p + j])))
    return Schedule("reduce_scatter", n, n, tuple(steps), name=f"halving-doubling reduce_scatter, {n} ranks", link_capacity=_largest_message(steps))
