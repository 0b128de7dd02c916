"""The default proof suite holds, each proof on its own (this is what
`collspec prove` runs in CI), and the solver layer never passes by accident."""

from __future__ import annotations

import doctest
import importlib
import re

import pytest
import z3

from collspec.proofs import ring
from collspec.proofs.solver import FAILED, PROVED, UNKNOWN, Query, decide, prove_exists, run_queries
from collspec.proofs.suite import CHANNELS_ROW, select, suite
from proof_results import result_of

SUITE = suite()


@pytest.mark.parametrize("proof", SUITE, ids=[p.name for p in SUITE])
def test_every_default_proof_holds(proof):
    result = result_of(proof)  # run here, once: the site's tests show these results
    assert result.ok, f"{result.name}: {result.message} {result.counterexample}"
    assert result.status == PROVED or result.name.endswith("two-ranks-agree")  # true by IEEE's definition: shown as trivial
    assert result.queries, "a proof that asked Z3 nothing proves nothing"
    assert result.rlimit >= 4 * result.most_used, f"{result.name}: limit {result.rlimit} is under 4x the {result.most_used} units a check used: recalibrate RLIMITS"


def test_suite_covers_every_ring_property_for_both_variants_for_all_n():
    names = {p.name: p.scope for p in SUITE}
    for variant in ("ring", "ring-seed"):
        for prop in ("same-index", "link-once", "links-busy", "forwarding", "contributors", "all-gather", "identical-bits", "traffic"):
            assert names[f"{variant}.{prop}"] == ("all N>=2" if variant == "ring" else "all N>=2, rank r owns chunk r + 1 (declared)")
    assert names["lower-bound.ring"] == "2<=N<=6"
    assert names["float16.ring-differs"] == "N=3" and names["bfloat16.ring-differs"] == "N=3"
    assert all(scope.startswith("all N") or re.match(r"(\d+<=)?N(<=|=)\d+", scope) for scope in names.values())


def test_full_suite_raises_the_bounds_only():
    full = {p.name: p.scope for p in suite(full=True)}
    from collspec.proofs import nccl_pat as nccl_pat_proofs, nccl_pat_allgather, nccl_pat_sizes, nccl_tree_allreduce, nccl_tree_sizes

    full_only = ({nccl_tree_allreduce.row(name) for name in nccl_tree_allreduce.OPTIONS} | {nccl_tree_sizes.ROW} | set(nccl_pat_proofs.OPTIONS)
                 | set(nccl_pat_allgather.OPTIONS) | set(nccl_pat_sizes.ROWS))
    assert CHANNELS_ROW in {p.name for p in SUITE}  # nccl-ring's channels rows (every channel count) are default rows (a few seconds)
    assert set(full) - full_only == {p.name for p in SUITE}  # the rows only --full runs (~15 s, ~150 s of CPU; nccl-pat's minutes)
    assert full["lower-bound.ring"] == "2<=N<=8" and full["builtin.ring"] == "N<=16" and full["float16.ring-differs"] == "3<=N<=8"


def test_contributor_induction_has_separate_base_and_step_queries():
    queries = [q.name for q in ring.contributors(ring.RingCode.of("ring")) if isinstance(q, Query)]
    assert sum(name.startswith("base") for name in queries) == 1
    assert sum(name.startswith("step") for name in queries) >= 1
    outcome = ring.prove("ring", "contributors")
    ran = [name for name, status, _ in outcome.queries]
    assert ran.index(next(n for n in ran if n.startswith("base"))) < ran.index(next(n for n in ran if n.startswith("step")))


def test_every_ring_proof_states_its_premises_in_words():
    for name, build in ring.PROOFS.items():
        assert "Premises" in (build.__doc__ or ""), name


def test_select_is_a_substring_match():
    assert [p.name for p in select(SUITE, "ring-seed.traffic")] == ["ring-seed.traffic"]
    assert {p.name for p in select(SUITE, "identical-bits")} >= {"ring.identical-bits", "float16.identical-bits"}
    assert select(SUITE, "no-such-proof") == []


# -- the solver layer -----------------------------------------------------------------

N, r, s = z3.Ints("N r s")


def test_a_false_claim_fails_with_the_named_variables_only():
    outcome = decide(Query("r + 1 stays a rank", [N >= 2, 0 <= r, r < N], (r + 1) % N == r + 1))
    assert outcome.status == FAILED
    assert set(outcome.counterexample) == {"N", "r"}  # nothing of Z3's own (div0, mod0)
    assert outcome.counterexample["r"] == outcome.counterexample["N"] - 1
    assert "fails for N=" in outcome.message


def test_contradictory_premises_are_a_failure_not_a_pass():
    outcome = decide(Query("anything", [N >= 2, N < 2], N == 7))
    assert outcome.status == FAILED and "vacuously" in outcome.message


def test_unknown_is_reported_as_unknown_unless_a_later_query_fails():
    x, y, z = z3.Ints("x y z")
    fermat = Query("no cubes add up", [x > 0, y > 0, z > 0], x * x * x + y * y * y != z * z * z)
    outcome = run_queries([fermat, Query("never reached", [], z3.BoolVal(True))], rlimit=2000)
    assert outcome.status == UNKNOWN and not outcome.ok
    assert [name for name, _, _ in outcome.queries] == ["no cubes add up", "never reached"]  # a later counterexample would settle it
    wrong = Query("x is 0", [x > 0], x == 0)
    settled = run_queries([fermat, wrong], rlimit=2000)
    assert settled.status == FAILED and settled.counterexample["x"] > 0


def test_witness_search_proves_with_a_witness_and_fails_with_a_genuine_counterexample():
    c = z3.Int("c")
    onto = prove_exists("r + 1 hits c", [N >= 2, 0 <= c, c < N], [("c", c), ("c - 1", (c - 1) % N)], lambda w: (w + 1) % N == c, lambda: None)
    assert onto.ok and onto.message == "witness c - 1"
    doubling = lambda q, n: (2 * q) % n  # noqa: E731 - not onto for even N
    search = lambda: next(({"N": n, "c": k} for n in range(2, 9) for k in range(n) if all(doubling(q, n) != k for q in range(n))), None)  # noqa: E731
    not_onto = prove_exists("2r hits c", [N >= 2, 0 <= c, c < N], [("c", c)], lambda w: doubling(w, N) == c, search)
    assert not_onto.status == FAILED and not_onto.counterexample == {"N": 2, "c": 1}
    undecided = prove_exists("2r hits c", [N >= 2, 0 <= c, c < N], [("c", c)], lambda w: doubling(w, N) == c, lambda: None)
    assert undecided.status == UNKNOWN


@pytest.mark.parametrize(
    "module",
    ["collspec.proofs.solver", "collspec.proofs.ring", "collspec.proofs.schedules", "collspec.proofs.floating", "collspec.proofs.lower_bound", "collspec.proofs.suite"],
)
def test_module_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 1
