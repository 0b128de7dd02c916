"""The ring all-reduce is right for every N >= 2: proofs about models/' own code.

Each proof evaluates the ring all-reduce's transfer function, the one the
generator enumerates (:class:`RingCode` reads
:func:`collspec.models.generators.ring.allreduce_program` phase by phase:
steps 0 .. hops(N)-1 are the reduce-scatter, the next hops(N) the
all-gather), on Z3 integers N, r, s, ... and asks Z3 whether a property holds
for all of them. Which ranks send at which step, the step count, the chunk
count and each phase's op are all read from that function, so a change
anywhere in the generator is seen by the proofs (the mutation tests plant
such changes). Facts that hold by the function's definition (one slot per
rank, every slot active, 2 hops(N) steps) are still asked, and reported as
re-reading a definition, not counted as proofs.

Premises shared by every proof, in words:

- N >= 2 ranks form the directed ring; the link into rank q comes from the
  rank b with (q - b) mod N = 1 (this is the topology, not the algorithm);
- steps are synchronous: a transfer reads the sender's cell as it was at the
  start of the hop (the interpreter's semantics), and sending never changes
  the sender's cell.

Integer ``%`` is the mathematical modulus in Python and in Z3 alike for a
positive modulus, so the functions mean the same on both.

Where a statement needs "there is a rank (hop) such that ...", the proof
exhibits the witness as a candidate term such as ``(c + k) % N`` and has Z3
prove it works for every N (:func:`~collspec.proofs.solver.prove_exists`).
The only helper the proofs take from models/ without proving it correct is
``ring_prev``, as the candidate for "the rank that sends to r"; every claim
that uses it first proves that this rank does send to r. Which chunk each
rank must complete (its *owner*) is not read from the generator: it is the
spec's (rank r owns chunk r) for ``ring`` and the declared rotation (rank r
owns chunk r + 1) for ``ring-seed``, stated in
:data:`collspec.proofs.invariants.OWNERS`.

>>> run_queries(same_index(RingCode.of("ring"))).status
'proved'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from ..models import indexing as ix
from ..models.generators import ring as ring_gen
from ..models.program import Program, as_term
from ..models.schedule import COPY, REDUCE
from ..spec.bandwidth import FACTORS
from .invariants import OWNERS
from .solver import Outcome, Query, prove_exists, run_queries

N, r, r2, s, t, x, c = z3.Ints("N r r2 s t x c")

#: candidate offsets k for witnesses written as (term + k) mod N
OFFSETS = (0, -1, 1, -2, 2)
#: concrete rank counts searched for a genuine counterexample when no witness works
SEARCH_RANKS = range(2, 17)


@dataclass(frozen=True)
class RingCode:
    """The ring all-reduce as the code defines it: the transfer function
    the generator enumerates (:func:`collspec.models.generators.ring.allreduce_program`),
    read per phase, and the owner function whose properties are stated
    (the spec's or the declared one, :data:`collspec.proofs.invariants.OWNERS`,
    never the generator's).
    Tests pass variants with a deliberately wrong program to show that the
    proofs then fail."""

    variant: str
    owner: Callable  # owner(r, n): the chunk rank r completes in the reduce-scatter
    program: Program  # both phases: reduce-scatter hops, then all-gather hops
    prev: Callable  # candidate for the rank that sends to r; always checked

    @classmethod
    def of(cls, variant: str = "ring") -> "RingCode":
        return cls(variant, OWNERS[variant][0], ring_gen.allreduce_program(variant), ix.ring_prev)

    def hops(self, n):
        """Hops per phase: the program's phase boundary."""
        return ix.ring_hops(n)

    def _at(self, step, rank, n):
        t = self.program.transfer(n, step, rank, 0)
        return tuple(as_term(v, N) for v in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op))

    def rs(self, rank, hop, n):
        return self._at(hop, rank, n)[1:4]

    def ag(self, rank, hop, n):
        return self._at(hop + self.hops(n), rank, n)[1:4]

    def rs_op(self, hop):
        return self._at(hop, r, N)[4]

    def ag_op(self, hop):
        return self._at(hop + self.hops(N), r, N)[4]

    def active(self, step):
        return self._at(step, r, N)[0]

    def phases(self) -> list[tuple[str, Callable]]:
        return [("reduce-scatter", self.rs), ("all-gather", self.ag)]


# -- premises and small vocabulary ---------------------------------------------------


def _ranks(*vs) -> list[z3.BoolRef]:
    """N >= 2 and every v is a rank, 0 <= v < N."""
    return [N >= 2] + [b for v in vs for b in (0 <= v, v < N)]


def _hops(code: RingCode, *vs, first: int = 0) -> list[z3.BoolRef]:
    """Every v is a hop of a phase, first <= v < hops(N)."""
    return [b for v in vs for b in (first <= v, v < code.hops(N))]


def _ring_link(a, b) -> z3.BoolRef:
    """The topology: a -> b is a link of the directed ring on N ranks."""
    return z3.And(0 <= b, b < N, (b - a) % N == 1)


def _among(end, length, rank) -> z3.BoolRef:
    """``rank`` is one of the ``length`` consecutive ranks ending at ``end``
    (end - length + 1, ..., end, mod N)."""
    return (end - rank) % N < length


def _one_if(condition) -> z3.ArithRef:
    return z3.If(condition, 1, 0)


def _search(predicate: Callable[[int], dict | None]) -> Callable[[], dict | None]:
    """Look for a genuine counterexample on concrete rank counts."""

    def run() -> dict | None:
        for n in SEARCH_RANKS:
            found = predicate(n)
            if found is not None:
                return found
        return None

    return run


# -- the proofs ------------------------------------------------------------------------


def same_index(code: RingCode) -> list[Query]:
    """Same index: whatever a rank sends at hop s lands in the same chunk
    index at the receiver (added in the reduce-scatter, copied in the
    all-gather), and every index is a valid rank and chunk.

    Premises: N >= 2; 0 <= r < N; 0 <= s < hops(N).
    """
    queries = []
    for phase, hop in code.phases():
        dst, sent, into = hop(r, s, N)
        claim = z3.And(into == sent, 0 <= sent, sent < N, 0 <= dst, dst < N)
        op, what = (code.rs_op(s), "adds (op reduce)") if phase == "reduce-scatter" else (code.ag_op(s), "copies")
        claim = z3.And(claim, op == (REDUCE if phase == "reduce-scatter" else COPY))
        queries.append(Query(f"{phase}: the receiver {what} into the chunk index that was sent", _ranks(r) + _hops(code, s), claim))
    return queries


def link_once(code: RingCode) -> list[Query]:
    """No chunk crosses the same directed link twice within a phase.

    Rank r is the only sender on its links, so it is enough that r never
    sends one chunk to one receiver at two different hops.
    Premises: N >= 2; 0 <= r < N; 0 <= s, t < hops(N); s != t.
    """
    queries = []
    for phase, hop in code.phases():
        dst_s, chunk_s, _ = hop(r, s, N)
        dst_t, chunk_t, _ = hop(r, t, N)
        queries.append(
            Query(
                f"{phase}: rank r never sends the same chunk over the same link at two hops",
                _ranks(r) + _hops(code, s, t) + [s != t],
                z3.Implies(dst_s == dst_t, chunk_s != chunk_t),
            )
        )
    return queries


def links_busy(code: RingCode) -> list[Query]:
    """Every link carries exactly one chunk in every hop, 2(N - 1) hops in all.

    With one transfer per rank per hop (premise), this follows from: each
    phase has N - 1 hops; every transfer uses a ring link (so rank r's one
    transfer is the one chunk on link r -> r+1); every rank receives from
    exactly one rank per hop.
    Premises: N >= 2; 0 <= r, r2 < N; 0 <= s < hops(N).
    """
    queries = [
        Query("each phase has N - 1 hops, 2(N - 1) in all", [N >= 2], z3.And(code.hops(N) == N - 1, as_term(code.program.steps(N), N) == 2 * (N - 1))),
        Query("every rank sends in every hop", _ranks(r) + [0 <= s, s < 2 * code.hops(N)], code.active(s)),
    ]
    for phase, hop in code.phases():
        dst, _, _ = hop(r, s, N)
        sender = code.prev(r, N)
        dst_of_sender, _, _ = hop(sender, s, N)
        dst_other, _, _ = hop(r2, s, N)
        queries += [
            Query(f"{phase}: every transfer uses a link of the ring", _ranks(r) + _hops(code, s), _ring_link(r, dst)),
            Query(
                f"{phase}: every rank receives from exactly one rank in every hop",
                _ranks(r, r2) + _hops(code, s),
                z3.And(0 <= sender, sender < N, dst_of_sender == r, z3.Implies(dst_other == r, r2 == sender)),
            ),
        ]
    return queries


def forwarding(code: RingCode) -> list[Query]:
    """A rank never forwards, in a hop, what it receives in that hop, and
    from the second hop on always forwards the chunk it finished
    accumulating (reduce-scatter) or receiving (all-gather) in the hop
    before; the all-gather starts with the chunk finished in the last
    reduce-scatter hop (and, for the all-gather collective, with the
    rank's own block).

    Premises: N >= 2; 0 <= r < N; 0 <= s < hops(N) (1 <= s for the second).
    """
    sender = code.prev(r, N)
    last = code.hops(N) - 1
    queries = []
    for phase, hop in code.phases():
        to_r, received, _ = hop(sender, s, N)
        _, sent, _ = hop(r, s, N)
        to_r_before, received_before, _ = hop(sender, s - 1, N)
        queries += [
            Query(
                f"{phase}: a rank never forwards in a hop the chunk it receives in that hop",
                _ranks(r) + _hops(code, s),
                z3.And(to_r == r, sent != received),
            ),
            Query(
                f"{phase}: from hop 1 on, a rank forwards the chunk it received in the hop before",
                _ranks(r) + _hops(code, s, first=1),
                z3.And(to_r_before == r, sent == received_before),
            ),
        ]
    to_r, finished, _ = code.rs(sender, last, N)
    _, first_sent, _ = code.ag(r, 0, N)
    queries.append(
        Query(
            "all-reduce: the all-gather starts with the chunk each rank finished in the last reduce-scatter hop",
            _ranks(r),
            z3.And(to_r == r, first_sent == finished),
        )
    )
    if code.variant == "ring":  # the all-gather collective: rank r starts with block r
        queries.append(Query("all-gather collective: each rank first sends its own block", _ranks(r), first_sent == r))
    return queries


def contributors(code: RingCode) -> list:
    """The contributor invariant of the reduce-scatter, by induction on the hop.

    After hop s, the chunk rank r received holds exactly the contributions
    of the s + 2 consecutive ranks ending at r, each once. Hence after the
    N - 1 hops each rank holds one complete chunk (the one it owns), and
    every chunk is complete at exactly one rank.

    The base case (hop 0) and the inductive step (hop s >= 1, assuming the
    invariant at hop s - 1 for the sender) are separate queries; the step
    is split into: what the sender passes on, that the receiver's cell is
    still its own input, and the counting. A cell's value is a count per
    contributor rank x.

    Premises: N >= 2; 0 <= r, x < N; 0 <= s < hops(N) (1 <= s in the step);
    r receives only from ``prev(r)`` (proved in links-busy, and re-checked
    here); the invariant at hop s - 1 (in the step).
    """
    sender = code.prev(r, N)
    last = code.hops(N) - 1
    to_r0, chunk0, _ = code.rs(sender, 0, N)
    to_r, chunk, _ = code.rs(sender, s, N)
    to_sender, chunk_sender_got, _ = code.rs(code.prev(sender, N), s - 1, N)
    _, chunk_at_t, _ = code.rs(sender, t, N)
    to_r_last, chunk_last, _ = code.rs(sender, last, N)

    def owner_onto() -> Outcome:
        def missing(n: int) -> dict | None:
            owned = {int(code.owner(q, n)) for q in range(n)}
            gaps = [k for k in range(n) if k not in owned]
            return {"N": n, "c": gaps[0]} if gaps else None

        return prove_exists(
            "every chunk is complete at some rank (some r owns chunk c)",
            [N >= 2, 0 <= c, c < N],
            [(f"r = (c{k:+d}) mod N", (c + k) % N) for k in OFFSETS],
            lambda w: z3.And(0 <= w, w < N, code.owner(w, N) == c),
            _search(missing),
        )

    return [
        Query(
            "base (hop 0): the chunk rank r receives holds ranks prev(r) and r, once each",
            _ranks(r, x),
            z3.And(to_r0 == r, _one_if(x == sender) + _one_if(x == r) == _one_if(_among(r, 2, x))),
        ),
        Query(
            "step, sender: at hop s >= 1 the sender passes on the cell it received at hop s - 1",
            _ranks(r) + _hops(code, s, first=1),
            z3.And(to_r == r, to_sender == sender, chunk == chunk_sender_got),
        ),
        Query(
            "step, receiver: before hop s, rank r never received the chunk it receives at hop s",
            _ranks(r) + _hops(code, s, first=1) + [0 <= t, t < s],
            chunk_at_t != chunk,
        ),
        Query(
            "step, counts: sender's s + 1 ranks ending at prev(r), plus r's own input, are the s + 2 ranks ending at r, once each",
            _ranks(r, x) + _hops(code, s, first=1),
            _one_if(_among(sender, s + 1, x)) + _one_if(x == r) == _one_if(_among(r, s + 2, x)),
        ),
        Query(
            "conclusion: after the last hop rank r's cell holds all N ranks once each, and it is the chunk r owns",
            _ranks(r, x),
            z3.And(to_r_last == r, _among(r, last + 2, x), chunk_last == code.owner(r, N)),
        ),
        Query(
            "conclusion: a cell last written before the last hop (or never) holds fewer than N ranks",
            _ranks() + _hops(code, s) + [s < last],
            z3.And(s + 2 < N, 1 < N),
        ),
        Query(
            "conclusion: no two ranks own the same chunk",
            _ranks(r, r2),
            z3.Implies(code.owner(r, N) == code.owner(r2, N), r == r2),
        ),
        owner_onto,
    ]


def _after_all_gather(code: RingCode, before, incoming, combine):
    """The receiver's cell after all-gather hop s, by the code's op."""
    return z3.If(code.ag_op(s) == COPY, incoming, combine(before, incoming))


def _all_gather_forwards(code: RingCode, first_words: str, step_words: str) -> list[Query]:
    """The induction both all-gather proofs share: hop 0 sends the owner's
    chunk, and every later hop forwards what arrived the hop before."""
    sender = code.prev(r, N)
    _, first, _ = code.ag(r, 0, N)
    _, sent, _ = code.ag(r, s, N)
    to_r_before, received_before, _ = code.ag(sender, s - 1, N)
    return [
        Query(first_words, _ranks(r), first == code.owner(r, N)),
        Query(step_words, _ranks(r) + _hops(code, s, first=1), z3.And(to_r_before == r, sent == received_before)),
    ]


def all_gather(code: RingCode) -> list:
    """After the all-gather every rank holds every chunk, complete.

    By induction on the all-gather hop: at hop 0 each rank sends the chunk
    it owns, which the reduce-scatter completed (contributors); at hop s >= 1
    it forwards the chunk it received at hop s - 1, complete by induction;
    the receiver's cell becomes a copy, whatever it held before. Finally
    every chunk c reaches every rank r: r owns c, or receives it at some hop.

    Premises: N >= 2; 0 <= r, c < N; 0 <= s < hops(N) (1 <= s in the step);
    a cell's value is a count per contributor, complete = 1 for every rank.
    """
    sender = code.prev(r, N)
    before = z3.Int("count_before")

    def reaches_every_rank() -> Outcome:
        def missing(n: int) -> dict | None:
            for q in range(n):
                got = {int(code.owner(q, n))} | {int(code.ag(p, h, n)[1]) for h in range(int(code.hops(n))) for p in range(n) if int(code.ag(p, h, n)[0]) == q}
                gaps = [k for k in range(n) if k not in got]
                if gaps:
                    return {"N": n, "r": q, "c": gaps[0]}
            return None

        def holds(w):
            to_r, chunk_w, _ = code.ag(sender, w, N)
            return z3.Or(c == code.owner(r, N), z3.And(0 <= w, w < code.hops(N), to_r == r, chunk_w == c))

        return prove_exists(
            "conclusion: rank r holds chunk c (it owns c, or receives c at some hop)",
            _ranks(r, c),
            [(f"hop = (r - c{k:+d}) mod N", (r - c + k) % N) for k in OFFSETS],
            holds,
            _search(missing),
        )

    return _all_gather_forwards(
        code,
        "base (hop 0): each rank first sends the chunk it owns, completed by the reduce-scatter",
        "step (hop s >= 1): each rank forwards the chunk it received at hop s - 1",
    ) + [
        Query(
            "every hop: the receiver's cell becomes the complete chunk (count 1 per rank), whatever it held",
            _ranks(r) + _hops(code, s) + [before >= 0],
            _after_all_gather(code, before, z3.IntVal(1), lambda a, b: a + b) == 1,
        ),
        reaches_every_rank,
    ]


def identical_bits(code: RingCode) -> list[Query]:
    """After a ring all-reduce every rank holds identical bits, in any
    floating-point type: each chunk's final value is computed once, by its
    owner (contributors: complete at exactly one rank), and only copied
    after that: every all-gather transfer is a copy, each hop forwards what
    arrived the hop before, starting from the owner's value, and nothing
    writes the owner's cell (all-gather shows every rank receives it).

    Values are of an uninterpreted sort and ``combine`` an uninterpreted
    function, so nothing about the arithmetic is assumed.
    Premises: N >= 2; 0 <= r < N; 0 <= s < hops(N) (1 <= s in the step).
    """
    value = z3.DeclareSort("Value")
    before, incoming = z3.Consts("before incoming", value)
    combine = z3.Function("combine", value, value, value)
    to_r, received, _ = code.ag(code.prev(r, N), s, N)
    return [
        Query("every all-gather transfer is a copy: the receiver's cell becomes the incoming value", _ranks(r) + _hops(code, s), _after_all_gather(code, before, incoming, combine) == incoming),
    ] + _all_gather_forwards(
        code,
        "base: the first all-gather hop sends the owner's final value",
        "step: every later hop forwards the value received the hop before (a copy of its owner's)",
    ) + [
        Query(
            "the owner's final value is never overwritten: no rank receives its own chunk in the all-gather",
            _ranks(r) + _hops(code, s),
            z3.And(to_r == r, received != code.owner(r, N)),
        ),
    ]


def traffic(code: RingCode) -> list:
    """Per-rank traffic is 2(N - 1)/N of the vector for the all-reduce,
    (N - 1)/N for each phase alone: the lower bounds of
    :mod:`collspec.spec.bandwidth`, whose formulas (``FACTORS``) are
    evaluated here with N symbolic.

    Each rank sends one chunk (1/chunks(N) of the vector) per step and
    receives one (links-busy: every rank is active in every step, one slot
    each, and receives from exactly one rank), for steps(N) steps, hops(N)
    per phase.
    Premises: N >= 2.
    """
    n = z3.ToReal(N)
    chunk = 1 / z3.ToReal(as_term(code.program.chunks(N), N))
    steps = z3.ToReal(as_term(code.program.steps(N), N))
    hops = z3.ToReal(code.hops(N))
    return [
        Query("one slot per rank per step", [N >= 2], as_term(code.program.width(N), N) == 1),
        Query("all-reduce: each rank sends and receives steps(N)/chunks(N) = spec.bandwidth's allreduce factor", [N >= 2], steps * chunk == FACTORS["allreduce"](n)),
        Query("each phase: hops(N)/chunks(N) = spec.bandwidth's reduce_scatter and allgather factors", [N >= 2], z3.And(hops * chunk == FACTORS["reduce_scatter"](n), hops * chunk == FACTORS["allgather"](n))),
    ]


#: name -> function building the proof's queries, in the order the suite runs them
PROOFS: dict[str, Callable[[RingCode], list]] = {
    "same-index": same_index,
    "link-once": link_once,
    "links-busy": links_busy,
    "forwarding": forwarding,
    "contributors": contributors,
    "all-gather": all_gather,
    "identical-bits": identical_bits,
    "traffic": traffic,
}

VARIANTS = ("ring", "ring-seed")


def prove(variant: str, name: str, code: RingCode | None = None) -> Outcome:
    """Run one ring proof against the code (or a given variant of it)."""
    return run_queries(PROOFS[name](code or RingCode.of(variant)))
