"""The proofs ``collspec prove`` runs, with their scope, in order.

===========================  ============  ====================================================
proof                        scope         what it shows
===========================  ============  ====================================================
ring.<property>              all N>=2      :mod:`collspec.proofs.ring`, about the ring's own
                                           transfer function
ring-seed.<property>         all N>=2      the same for the worked example's rotation
<algorithm>.<collective>-    all N ...     every output holds every contribution exactly once
exactly-once                               and reduces add into the same index, by induction
                                           over the algorithm's own transfer function
                                           (:mod:`collspec.proofs.induction`); "all N>=2" on
                                           integers, "all N in 2..65536" on bit-vectors (the
                                           most ranks the generators accept), plus "all roots"
                                           where the root is symbolic too (the rooted trees:
                                           at root 0, then every root as a renaming)
nccl-ring.<collective>-      all N>=2,     the same for NCCL's ring (every collective; the
exactly-once                 every chunk,  chains for all roots) on 1 channel, any number of
                             align, count  loops: loops, rounding and cells as lemmas, each
                                           loop by induction (:mod:`collspec.proofs.nccl_ring_loops`)
nccl-ring.<collective>-      all N>=2,     every collective on every channel count 1..64,
channels-exactly-once        channels in   every split into parts, every ring: each channel
                             1..64, every  (its index a solver variable) is the 1-channel
                             part and ring program on its part, ranks renamed, cells moved
hierarchical-ring.           all N>=2,     the same, node count and GPUs per node both
allreduce-exactly-once       all group     symbolic, on the algorithm's coordinate function
                             sizes         (:mod:`collspec.proofs.hierarchical`)
builtin.<algorithm>          N<=K          every built-in schedule computes its collective for
                                           all inputs (:mod:`collspec.proofs.schedules`); the
                                           NCCL models with several option sets each
<dtype>.ring-differs         N=3           inputs where the ring's float result is not the
                                           rank-order sum (:mod:`collspec.proofs.floating`)
<dtype>.two-ranks-agree      N=2           ... while for two ranks it always is
<dtype>.identical-bits       N<=K          every rank ends with the same bits
nccl-tree.double-binary-    all N in      NCCL's two trees are spanning binary trees; who
tree                         2..65536     forwards in both (:mod:`collspec.proofs.nccl_trees`)
lower-bound.ring             N<=K          no ring all-reduce in fewer than 2(N-1) steps, one
                                           in 2(N-1) (:mod:`collspec.proofs.lower_bound`)
===========================  ============  ====================================================

A query whose claim Z3 simplifies to True with no premises only re-reads a
definition: it is listed as ``trivial`` and never counted, and a row made
only of such queries has the result ``trivial``, not ``proved``.

A row's scope is a :class:`~collspec.proofs.scope.Scope`: its premises as
data, from which the scope text is made; it says "all N" only where N is a
variable in the solver. While a row runs, every premise of its queries on
N, the root or an option alone must follow from that scope, or the row
fails (:func:`collspec.proofs.solver.decide`).

Every solver check of a row has the row's resource limit (:data:`RLIMITS`,
Z3's deterministic ``rlimit``, never wall time): the same verdict on a
loaded machine as on an idle one. ``run_proof(proof, factor)`` scales it
(``collspec prove --rlimit-factor``).

The default suite keeps K small (under 30 s of CPU time);
``full=True`` (``collspec prove --full``) raises K.

>>> [p.name for p in suite()][:2]
['ring.same-index', 'ring.link-once']
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

import z3

from ..models.generators import ALGORITHMS, generate, program
from ..models.generators import nccl_pat
from ..models.program import symbolic
from . import floating, hierarchical, induction, invariants, lower_bound, nccl_pat as nccl_pat_proofs, nccl_pat_allgather, nccl_pat_sizes, nccl_ring_loops, nccl_tree_allreduce, nccl_tree_sizes, nccl_trees, ring, schedules
from .scope import Bound, Scope
from .solver import COUNTEREXAMPLE, FAILED, NARROWS, PROVED, RESOURCE_LIMIT, TRIVIAL, UNKNOWN, VACUOUS, Outcome, Row, run_queries, within

#: N >= 2, a solver variable (integers)
ALL_N = Scope.all_n()
#: 2 <= N <= 65536, a solver variable (bit-vectors: the most ranks the generators accept)
ALL_BITVEC_N = Scope.all_n(Bound("N", "<=", induction.MAX_RANKS))


@dataclass(frozen=True)
class Proof:
    """One row: its name, its scope (premises as data: :attr:`scope` is
    their text), what it states, how to run it, and its resource limit per
    solver check (Z3 units, :data:`RLIMITS`)."""

    name: str
    premises: Scope
    statement: str
    run: Callable[[], Outcome]
    rlimit: int = 0

    @property
    def scope(self) -> str:
        return self.premises.text()


@dataclass
class ProofResult:
    """One row of ``collspec prove``."""

    name: str
    scope: str
    status: str
    seconds: float
    message: str = ""
    counterexample: dict = field(default_factory=dict)
    queries: list = field(default_factory=list)
    premises: list = field(default_factory=list)
    reason: str = ""
    rlimit: int = 0
    most_used: int = 0

    @property
    def ok(self) -> bool:
        """Proved, or true by definition (not counted as a proof, not a failure)."""
        return self.status in (PROVED, TRIVIAL)

    @property
    def why(self) -> str:
        """Why it is not proved, in words ("" when it is)."""
        if self.ok:
            return ""
        return f"{self.status} ({self.reason})" if self.reason else self.status

    @property
    def advice(self) -> str:
        """What to do about a row that is not proved ("" when it is)."""
        if self.ok:
            return ""
        again = f"collspec prove --only {self.name}"
        if self.reason == RESOURCE_LIMIT:
            return f"Z3 ran out of resource units (limit {self.rlimit:,} per check), which is no verdict: rerun with a larger limit, `{again} --rlimit-factor 10`"
        if self.reason == COUNTEREXAMPLE:
            return f"the claim is false at the values shown: fix the algorithm (or the claim it is checked against); `{again}` reruns this row"
        if self.reason == NARROWS:
            return "state the premise in the row's scope (collspec.proofs.scope), so that the scope shows it, or remove it"
        if self.reason == VACUOUS:
            return "premises that cannot hold prove nothing: fix them"
        if self.reason == PREMISE_UNPROVED:
            return "this row holds only with the rows its scope names: fix the premise rows first"
        return f"see the message; `{again}` reruns this row"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "scope": self.scope,
            "premises": self.premises,
            "result": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
            "rlimit": {"limit": self.rlimit, "most_used": self.most_used},
            "message": self.message,
            "counterexample": self.counterexample,
            "queries": [{"name": q, "result": s, "seconds": t} for q, s, t in self.queries],
        }


@dataclass(frozen=True)
class Bounds:
    """How far the bounded proofs go."""

    builtin_ranks: int
    differs_ranks: range
    identical_ranks: int
    lower_bound_ranks: range


DEFAULT = Bounds(builtin_ranks=6, differs_ranks=range(3, 4), identical_ranks=8, lower_bound_ranks=range(2, 7))
FULL = Bounds(builtin_ranks=16, differs_ranks=range(3, 9), identical_ranks=32, lower_bound_ranks=range(2, 9))


def _first_line(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def suite(full: bool = False) -> list[Proof]:
    """Every proof, in the order they run."""
    bounds = FULL if full else DEFAULT
    proofs = [
        Proof(f"{variant}.{name}", ALL_N + invariants.OWNERS[variant][1], _first_line(build.__doc__), _ring_proof(variant, build))
        for variant in ring.VARIANTS
        for name, build in ring.PROOFS.items()
    ]
    proofs += [
        Proof(f"{algorithm}.{collective}-exactly-once", induction_scope(algorithm, collective), INDUCTION_STATEMENT, _induction_proof(algorithm, collective))
        for algorithm, collective in invariants.INVARIANTS
    ]
    proofs += [Proof(f"nccl-ring.{collective}-exactly-once", nccl_ring_loops.scope(collective), INDUCTION_STATEMENT, nccl_ring_loops.PROOFS[collective])
               for collective in nccl_ring_loops.PROOFS]
    proofs += [Proof(f"nccl-ring.{collective}-channels-exactly-once", nccl_ring_loops.channels_scope(collective), INDUCTION_STATEMENT,
                     lambda collective=collective: nccl_ring_loops.channels_proof(collective)) for collective in nccl_ring_loops.CHANNEL_AT]
    if full:  # ~25 s, ~30 s and ~34 s (sizes) of CPU: only under --full
        proofs += [Proof(nccl_tree_allreduce.row(name), ALL_BITVEC_N + nccl_tree_allreduce.premises(name), INDUCTION_STATEMENT, lambda name=name: nccl_tree_allreduce.prove(name))
                   for name in nccl_tree_allreduce.OPTIONS]
        proofs.append(Proof(nccl_tree_sizes.ROW, nccl_tree_sizes.scope(), INDUCTION_STATEMENT, nccl_tree_sizes.prove))
    if full:  # reduce-scatter ~16 s (N >= 10), ~13 s (N 2..9), ~43 s (postFreq 2), ~68 s (postFreq 4); all-gather ~65 s (N >= 10), ~10 s (N 2..9), ~66 s (postFreq 2), ~61 s (postFreq 4): only under --full
        proofs += [Proof(name, nccl_pat_proofs.scope(name), INDUCTION_STATEMENT, lambda name=name: nccl_pat_proofs.prove(name))
                   for name in nccl_pat_proofs.OPTIONS]
        proofs += [Proof(name, nccl_pat_allgather.scope(name), INDUCTION_STATEMENT, lambda name=name: nccl_pat_allgather.prove(name))
                   for name in nccl_pat_allgather.OPTIONS]
        # nccl-pat at every count and chunk with chunk // count < 8, ~2 s of CPU each: lanes of the count-1 rows above, so
        # only where those run (premises_held fails them where a count-1 row is not proved)
        proofs += [Proof(name, nccl_pat_sizes.scope(name), SIZES_STATEMENT, lambda name=name: nccl_pat_sizes.prove(name)) for name in nccl_pat_sizes.ROWS]
    proofs.append(Proof("hierarchical-ring.allreduce-exactly-once", hierarchical.SCOPE, INDUCTION_STATEMENT, _hierarchical_proof))
    proofs += [
        Proof(
            f"builtin.{algorithm}",
            Scope.bounded(range(1, bounds.builtin_ranks + 1)) + (invariants.OWNERS[algorithm][1] if algorithm in invariants.OWNERS else ()),
            f"every {algorithm} schedule ({', '.join(ALGORITHMS[algorithm])}) computes its collective for all inputs"
            + (f", {BUILTIN_OPTION_WORDS[algorithm]}" if algorithm in BUILTIN_OPTION_WORDS else ""),
            _builtin_proof(algorithm, bounds.builtin_ranks, full),
        )
        for algorithm in ALGORITHMS
    ]
    for dtype in floating.FORMATS:
        proofs += [
            Proof(
                f"{dtype}.ring-differs",
                Scope.bounded(bounds.differs_ranks),
                f"some {dtype} inputs give a ring all-reduce result other than the rank-order sum (numpy confirms)",
                _each(bounds.differs_ranks, lambda n, d=dtype: floating.ring_differs(d, n)),
            ),
            Proof(f"{dtype}.two-ranks-agree", Scope.bounded(range(2, 3)), _first_line(floating.two_ranks_agree.__doc__), lambda d=dtype: floating.two_ranks_agree(d)),
            Proof(
                f"{dtype}.identical-bits",
                Scope.bounded(range(2, bounds.identical_ranks + 1)),
                f"every rank ends a ring or ring-seed all-reduce with the same {dtype} bits, for every input",
                _each(
                    range(2, bounds.identical_ranks + 1),
                    lambda n, d=dtype: run_queries([lambda v=v: floating.identical_bits(d, generate(v, "allreduce", n)) for v in ring.VARIANTS]),
                ),
            ),
        ]
    proofs.append(Proof("nccl-tree.double-binary-tree", ALL_BITVEC_N, _first_line(nccl_trees.__doc__), nccl_trees.prove))
    proofs.append(
        Proof(
            "lower-bound.ring",
            Scope.bounded(bounds.lower_bound_ranks),
            "no schedule on a directed ring (N chunks, one per link per step) finishes an all-reduce in fewer than 2(N-1) steps; one finishes in 2(N-1)",
            lambda: lower_bound.lower_bounds(bounds.lower_bound_ranks),
        )
    )
    return [replace(p, rlimit=p.rlimit or rlimit_of(p.name, full)) for p in proofs]


#: Z3 resource units per solver check of a row (``rlimit``: deterministic,
#: unlike wall time), by row name. Calibrated with bench/proofs_cpu.py
#: --full (z3-solver 5.4.1, each check in a fresh context, so the units are
#: the query's alone): 8 times the most units one check of the row used
#: (shown after each entry; under --full for the bounded rows), rounded up,
#: at least 10 million (50 million for the builtin.* rows, whose checks find
#: counterexamples to broken schedules). tests/test_proofs_suite.py holds every
#: default row to at least 4 times its need.
RLIMITS: dict[str, int] = {
    "ring.same-index": 10_000_000,  # 1,506
    "ring.link-once": 10_000_000,  # 33,728
    "ring.links-busy": 10_000_000,  # 17,665
    "ring.forwarding": 10_000_000,  # 112,740
    "ring.contributors": 10_000_000,  # 162,340
    "ring.all-gather": 10_000_000,  # 112,740
    "ring.identical-bits": 10_000_000,  # 112,740
    "ring.traffic": 10_000_000,  # 4,590
    "ring-seed.same-index": 10_000_000,  # 1,418
    "ring-seed.link-once": 10_000_000,  # 37,461
    "ring-seed.links-busy": 10_000_000,  # 17,665
    "ring-seed.forwarding": 10_000_000,  # 147,137
    "ring-seed.contributors": 10_000_000,  # 131,619
    "ring-seed.all-gather": 10_000_000,  # 147,137
    "ring-seed.identical-bits": 10_000_000,  # 147,137
    "ring-seed.traffic": 10_000_000,  # 4,590
    "ring.allreduce-exactly-once": 10_000_000,  # 629,506
    "ring.reduce_scatter-exactly-once": 10_000_000,  # 373,287
    "ring.allgather-exactly-once": 10_000_000,  # 130,676
    "ring.broadcast-exactly-once": 10_000_000,  # 156,966
    "ring.reduce-exactly-once": 10_000_000,  # 346,518
    "ring-seed.allreduce-exactly-once": 10_000_000,  # 511,508
    "ring-seed.reduce_scatter-exactly-once": 10_000_000,  # 212,968
    "direct.allreduce-exactly-once": 10_000_000,  # 2,488
    "direct.reduce_scatter-exactly-once": 10_000_000,  # 2,765
    "direct.allgather-exactly-once": 10_000_000,  # 3,021
    "direct.alltoall-exactly-once": 10_000_000,  # 4,007
    "direct.broadcast-exactly-once": 10_000_000,  # 1,720
    "direct.reduce-exactly-once": 10_000_000,  # 2,953
    "hub.allreduce-exactly-once": 10_000_000,  # 5,090
    "hub.broadcast-exactly-once": 10_000_000,  # 1,720
    "hub.reduce-exactly-once": 10_000_000,  # 2,953
    "binary-tree.allreduce-exactly-once": 20_000_000,  # 2,015,880
    "binary-tree.reduce-exactly-once": 10_000_000,  # 1,083,200
    "binary-tree.broadcast-exactly-once": 10_000_000,  # 1,083,200
    "recursive-doubling.allreduce-exactly-once": 10_000_000,  # 448,027
    "recursive-doubling.allgather-exactly-once": 10_000_000,  # 1,164,748
    "halving-doubling.allreduce-exactly-once": 20_000_000,  # 1,714,311
    "halving-doubling.reduce_scatter-exactly-once": 10_000_000,  # 957,825
    "nccl-ring.allreduce-exactly-once": 75_000_000,  # 1,430,228 with --only; 8,525,612 in a --full run (bench/z3_units_spread.py)
    "nccl-ring.reduce_scatter-exactly-once": 10_000_000,  # 362,984
    "nccl-ring.allgather-exactly-once": 10_000_000,  # 58,311
    "nccl-ring.broadcast-exactly-once": 10_000_000,  # 532,216
    "nccl-ring.reduce-exactly-once": 10_000_000,  # 1,051,002
    "nccl-ring.allreduce-channels-exactly-once": 75_000_000,  # 3,310,724 with --only; 8,851,921 after other rows (bench/z3_units_spread.py)
    "nccl-ring.reduce_scatter-channels-exactly-once": 10_000_000,  # 779,118
    "nccl-ring.allgather-channels-exactly-once": 10_000_000,  # 779,118
    "nccl-ring.broadcast-channels-exactly-once": 10_000_000,  # 1,159,547
    "nccl-ring.reduce-channels-exactly-once": 10_000_000,  # 1,159,547
    "hierarchical-ring.allreduce-exactly-once": 10_000_000,  # 1,142,775
    "builtin.ring": 50_000_000,  # 0
    "builtin.ring-seed": 50_000_000,  # 98,363
    "builtin.direct": 50_000_000,  # 0
    "builtin.hub": 50_000_000,  # 0
    "builtin.recursive-doubling": 50_000_000,  # 0
    "builtin.halving-doubling": 50_000_000,  # 0
    "builtin.binary-tree": 50_000_000,  # 0
    "builtin.hierarchical-ring": 50_000_000,  # 0
    "builtin.nccl-ring": 50_000_000,  # 0
    "builtin.nccl-tree": 50_000_000,  # 0
    "builtin.nccl-pat": 50_000_000,  # 0
    "float16.ring-differs": 100_000_000,  # 11,849,312
    "float16.two-ranks-agree": 10_000_000,  # 0
    "float16.identical-bits": 10_000_000,  # 2,114
    "bfloat16.ring-differs": 30_000_000,  # 3,566,050
    "bfloat16.two-ranks-agree": 10_000_000,  # 0
    "bfloat16.identical-bits": 10_000_000,  # 2,114
    "nccl-tree.double-binary-tree": 30_000_000,  # 2,714,257
    "nccl-tree.allreduce-one-channel-exactly-once": 650_000_000,  # 77,649,417
    "nccl-tree.allreduce-sizes-exactly-once": 670_000_000,  # 83,418,379 (copy (k, e); the one-cell induction 46,650,144)
    "nccl-tree.allreduce-two-channels-exactly-once": 310_000_000,  # 38,306,889 (channel 0's cells, channel 1 by the renaming lemmas)
    "nccl-pat.reduce_scatter-exactly-once": 190_000_000,  # 23,379,008 (rank-0 pinned induction)
    "nccl-pat.reduce_scatter-below-10-exactly-once": 38_000_000,  # 4,637,354 (the same query of run 6..8)
    "nccl-pat.reduce_scatter-postfreq-2-exactly-once": 258_000_000,  # 32,231,631 (N up to 65536, rank-0 pinned induction)
    "nccl-pat.reduce_scatter-postfreq-4-exactly-once": 469_000_000,  # 58,620,066 (N up to 65536; run 34..65536 with P a term of N)
    "nccl-pat.allgather-exactly-once": 430_000_000,  # 53,609,811 (N up to 65536, three ranges of N with P a term of N)
    "nccl-pat.allgather-below-10-exactly-once": 28_000_000,  # 3,439,358
    "nccl-pat.allgather-postfreq-2-exactly-once": 575_000_000,  # 71,795,199 (N up to 65536; run 18..65536 with P a term of N)
    "nccl-pat.allgather-postfreq-4-exactly-once": 462_000_000,  # 57,719,179 (N up to 65536; run 34..65536 with P a term of N)
    "nccl-pat.reduce_scatter-sizes-exactly-once": 23_000_000,  # 2,775,480 (shape, case 2)
    "nccl-pat.allgather-sizes-exactly-once": 23_000_000,  # 2,775,480 (shape, case 2)
    "lower-bound.ring": 30_000_000,  # 2,797,915
}
#: the limit of a row not in :data:`RLIMITS` (a new row: calibrate it)
DEFAULT_ROW_RLIMIT = 50_000_000


def rlimit_of(name: str, full: bool) -> int:
    """The resource limit per check of row ``name``."""
    return RLIMITS.get(name, DEFAULT_ROW_RLIMIT)


SIZES_STATEMENT = ("every output cell holds every contribution exactly once, and reduces add only into the same index "
                   "(lanes of the count-1 rows' program, by lemmas on the transfer function: proofs/nccl_pat_sizes.py)")
INDUCTION_STATEMENT = "every output cell holds every contribution exactly once, and reduces add only into the same index (induction over the transfer function)"


def induction_scope(algorithm: str, collective: str) -> Scope:
    """The scope of an ``-exactly-once`` row: :func:`collspec.proofs.induction.scope_of`
    for the proved program and its invariant (the same premises its queries assert)."""
    return induction.scope_of(proved_program(algorithm, collective), invariants.invariant(algorithm, collective, params={"root": 0}).premises)


def proved_program(algorithm: str, collective: str):
    """The program an ``-exactly-once`` row of :data:`invariants.INVARIANTS`
    proves: the generator's with its default options (nccl-ring's rows are
    :mod:`collspec.proofs.nccl_ring_loops`'s)."""
    return program(algorithm, collective)


#: nccl-ring's all-reduce on 2 channels for all N, every part, chunk, align and count
CHANNELS_ROW = "nccl-ring.allreduce-channels-exactly-once"


def _hierarchical_proof() -> Outcome:
    """The induction on hierarchical-ring's pair program, G and L symbolic,
    and the renaming to the generator's ranks and chunks (:mod:`collspec.proofs.hierarchical`)."""
    made = hierarchical.pair_program(1, 1)
    v = symbolic(made)[1]
    return run_queries([
        induction.spec_check("allreduce"),
        *induction.queries(made, hierarchical.pair_invariant(v["groups"], v["size"])),
        *hierarchical.renaming_queries(),
    ])


def _induction_proof(algorithm: str, collective: str) -> Callable[[], Outcome]:
    def run() -> Outcome:
        made = proved_program(algorithm, collective)
        if (algorithm, collective) in invariants.ROTATED:
            zero = induction.at_root_zero(made)
            return run_queries([
                induction.spec_check(collective),
                *induction.queries(zero, invariants.invariant(algorithm, collective, root=0)),
                *induction.rotation_queries(made, *invariants.ROTATED[(algorithm, collective)]),
            ])
        v = symbolic(made)[1]
        params = {name: v[name] for name in made.params}
        return run_queries([induction.spec_check(collective), *induction.queries(made, invariants.invariant(algorithm, collective, params=params))])

    return run


def _ring_proof(variant: str, build) -> Callable[[], Outcome]:
    return lambda: run_queries(build(ring.RingCode.of(variant)))


def _each(ranks: range, prove: Callable[[int], Outcome]) -> Callable[[], Outcome]:
    return lambda: run_queries([lambda n=n: prove(n) for n in ranks])


def _reversed_second_ring(n: int) -> dict:
    """Two channels, the second on the ring in reverse (per-channel rings),
    with 3 and 2 elements: NCCL 2.30's host split puts 5 elements on one
    channel, so the parts are given, as NCCL splits a collective that shares
    its plan with others."""
    return {"channels": 2, "chunk": 1, "count": 5, "parts": [3, 2], "rings": [list(range(n)), list(range(n))[::-1]]}


def _every_aggregation(n: int) -> list[dict]:
    """Every aggregation the model accepts on n ranks: 1, 2, ... up to the
    maximum, each with every postFreq 1, 2, ... up to it (the messages of
    1 .. A blocks); this includes every pair NCCL 2.30 reaches (A from
    min(8, max) to max)."""
    most = int(nccl_pat.max_aggregation(n)).bit_length()
    return [{"aggregation": 1 << b, "post": 1 << f} for b in range(most) for f in range(b + 1)]


#: algorithm -> (full?) -> n -> the option sets its bounded row proves for
#: every collective (default: the generator's defaults only). Counts per
#: rank for reduce-scatter and all-gather are capped at 3 (see _options).
BUILTIN_OPTIONS: dict[str, Callable[[bool, int], list[dict]]] = {
    "nccl-ring": lambda full, n: [{}, _reversed_second_ring(n)]
    + ([{"channels": 1, "chunk": 1, "count": 7}, {"channels": 2, "chunk": 2, "align": 2, "count": 7, "parts": [4, 3]}] if full else []),
    "nccl-tree": lambda full, n: [{}, {"channels": 4, "chunk": 1, "count": 11, "parts": [3, 3, 3, 2]}]
    + ([{"channels": 1, "chunk": 1, "count": 5}, {"channels": 2, "chunk": 2, "count": 12, "parts": [6, 6]}]
       if full else []),
    "nccl-pat": lambda full, n: _every_aggregation(n),
}
#: how the statement of a bounded row names its option sets
BUILTIN_OPTION_WORDS = {
    "nccl-ring": "with the default options and with a second channel on the reversed ring (--full: also 1 channel of chunk 1, and align 2)",
    "nccl-tree": "with the default options (NCCL's split: one channel) and 4 channels of parts 3, 3, 3, 2 (--full: also 1 channel of chunk 1, "
                 "and 2 channels of parts 6, 6 in chunks of 2)",
    "nccl-pat": "with every aggregation the model accepts (1, 2, ... up to N/2) and every postFreq up to it, which includes every pair NCCL 2.30 reaches",
}


def _options(algorithm: str, collective: str, full: bool, n: int) -> list[dict]:
    if algorithm not in BUILTIN_OPTIONS:
        return [{}]
    made = BUILTIN_OPTIONS[algorithm](full, n)
    if collective in ("reduce_scatter", "allgather"):
        made = [_capped(o, 3) if "count" in o else o for o in made]
    return made


def _capped(options: dict, most: int) -> dict:
    """``options`` with the count per rank at most ``most``; given parts are
    cut again over as many channels, the first ones one element more."""
    count = min(options["count"], most)
    out = {**options, "count": count}
    if "parts" in options:
        k = len(options["parts"])
        out["parts"] = [count // k + (i < count % k) for i in range(k)]
    return out


def _builtin_proof(algorithm: str, max_ranks: int, full: bool = False) -> Callable[[], Outcome]:
    """Every collective of ``algorithm`` for N = 1..max_ranks, with each of
    its option sets (:data:`BUILTIN_OPTIONS`). ring-seed's reduce-scatter
    leaves rank r with chunk r + 1: it is proved against that declared
    ownership, and must fail against the default one."""

    def run() -> Outcome:
        steps = []
        for collective in ALGORITHMS[algorithm]:
            for n in range(1, max_ranks + 1):
                for options in _options(algorithm, collective, full, n):
                    schedule = generate(algorithm, collective, n, **options)
                    if algorithm == "ring-seed" and collective == "reduce_scatter" and n > 1:
                        steps.append(lambda s=schedule: _must_fail(schedules.prove_schedule(s)))
                        schedule = schedules.declared_owner(schedule, invariants.RING_SEED_OWNS.value)
                    steps.append(lambda s=schedule: schedules.prove_schedule(s))
        outcome = run_queries(steps)
        if outcome.ok:
            outcome.message = f"{len(steps)} schedules"
        return outcome

    return run


def _must_fail(outcome: Outcome) -> Outcome:
    """A proof that has to find a counterexample (a known, intended failure)."""
    name = outcome.queries[0][0] if outcome.queries else "expected failure"
    if outcome.status == FAILED and outcome.counterexample:
        return Outcome(PROVED, queries=[(f"fails as it must: {name}", PROVED, outcome.queries[0][2] if outcome.queries else 0.0)])
    return Outcome(FAILED, f"{name}: expected a counterexample (rank r owns chunk r + 1), got {outcome.status}", queries=outcome.queries, reason=outcome.reason or "no counterexample")


def select(proofs: list[Proof], only: str | None) -> list[Proof]:
    """The proofs whose name contains ``only`` (all when None)."""
    return [p for p in proofs if only is None or only in p.name]


#: the reason of a row whose scope's ``Proved`` premise names a row that ran and was not proved
PREMISE_UNPROVED = "a premise row is not proved"


def premises_held(results: list[ProofResult]) -> list[ProofResult]:
    """``results`` with each row whose scope's :class:`~collspec.proofs.scope.Proved`
    premise names a row of ``results`` that is not proved turned into a
    failure (reason :data:`PREMISE_UNPROVED`) naming it: such a row holds
    only with its premise rows. A premise row that did not run (the default
    set, or ``--only``) leaves the row as it is: its scope names the premise."""
    ran = {r.name: r for r in results}
    held = []
    for result in results:
        named = [row for premise in result.premises for row in premise.get("proved_by", ())]
        broken = [row for row in named if row in ran and not ran[row].ok]
        if result.ok and broken:
            result = replace(result, status=FAILED, reason=PREMISE_UNPROVED, counterexample={},
                             message=f"premise rows not proved in this run: {', '.join(broken)} ({'; '.join(ran[row].why for row in broken)})")
        held.append(result)
    return held


def run_proof(proof: Proof, factor: float = 1.0) -> ProofResult:
    """Run one proof, every solver check within ``factor`` times its
    resource limit and held to its scope; a Z3 error is reported as a
    failure to prove."""
    started = time.perf_counter()
    row = Row(proof.name, proof.premises, max(1, int((proof.rlimit or rlimit_of(proof.name, False)) * factor)))
    with within(row):
        try:
            outcome = proof.run()
        except z3.Z3Exception as error:
            outcome = Outcome(UNKNOWN, f"Z3 error: {error}", reason="Z3 error")
    return ProofResult(proof.name, proof.scope, outcome.status, time.perf_counter() - started, outcome.message, outcome.counterexample, outcome.queries,
                       proof.premises.to_json(), outcome.reason, row.rlimit, row.most_used)
