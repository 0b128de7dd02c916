"""Bugs planted in the generators themselves, not only in index functions.

The transfer function *is* the generator (models/program.py), so a bug in
it must make an all-N proof fail with a counterexample; a bug in the
enumeration that turns the function into steps must be caught by the
refinement check on every schedule it builds. The first case is the one
the issue names: a wrong neighbour on the last all-gather hop only for
N >= 17, which every per-N check up to 16 misses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import z3

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, program
from collspec.models.generators import ring as ring_gen
from collspec.models.program import Program, RefinementError
from collspec.proofs import induction, invariants, ring
from collspec.proofs.solver import FAILED, PROVED, TRIVIAL, Query, decide, run_queries

ORIGINAL_PHASE = ring_gen._phase_transfer
ORIGINAL_EITHER = ring_gen._either_phase


def wrong_neighbour_on_last_hop_from_17(phase, owner, r, hop, n):
    t = ORIGINAL_PHASE(phase, owner, r, hop, n)
    if phase != ring_gen.AG:
        return t
    bad = ix.both(n >= 17, hop == ix.ring_hops(n) - 1)
    return dataclasses.replace(t, dst=ix.where(bad, (r + 2) % n, t.dst))


def phases_swapped(n, s, first, second):
    return ORIGINAL_EITHER(n, s, second, first)


def induction_outcome(algorithm="ring", collective="allreduce"):
    return run_queries(induction.queries(program(algorithm, collective), invariants.invariant(algorithm, collective)))


def test_wrong_neighbour_from_17_passes_every_check_to_16_and_fails_the_all_n_proofs(monkeypatch):
    monkeypatch.setattr(ring_gen, "_phase_transfer", wrong_neighbour_on_last_hop_from_17)
    for n in (2, 5, 16):
        assert check(generate("ring", "allreduce", n)).ok  # the per-N check cannot see it
    assert not check(generate("ring", "allreduce", 17)).ok
    busy = ring.prove("ring", "links-busy")
    assert busy.status == FAILED and busy.counterexample["N"] >= 17
    exact = induction_outcome()
    assert exact.status == FAILED and exact.counterexample["N"] >= 17


def test_a_dropped_hop_fails_the_induction_at_its_end(monkeypatch):
    monkeypatch.setattr(ring_gen, "_two_phases", lambda n: 2 * ix.ring_hops(n) - 1)
    outcome = induction_outcome()
    assert outcome.status == FAILED
    assert outcome.queries[-1][0].startswith("end:")
    assert "N" in outcome.counterexample


def test_swapped_phases_fail_the_induction(monkeypatch):
    monkeypatch.setattr(ring_gen, "_either_phase", phases_swapped)
    outcome = induction_outcome()
    assert outcome.status == FAILED and "N" in outcome.counterexample
    assert not check(generate("ring", "allreduce", 4)).ok


def test_an_enumeration_that_drops_a_step_is_refused(monkeypatch):
    original = Program.enumerate
    monkeypatch.setattr(Program, "enumerate", lambda self, n: original(self, n)[:-1])
    with pytest.raises(RefinementError, match="built 5 steps, the proved function has 6"):
        generate("ring", "allreduce", 4)


def test_an_enumeration_that_redirects_the_last_step_is_refused(monkeypatch):
    original = Program.enumerate

    def redirected(self, n):
        steps = original(self, n)
        last = steps[-1]
        return steps[:-1] + [dataclasses.replace(last, dst=(last.dst + 1) % n)]

    monkeypatch.setattr(Program, "enumerate", redirected)
    with pytest.raises(RefinementError, match="step 5, rank"):
        generate("ring", "allreduce", 4)


def test_the_refinement_compares_numpy_with_the_z3_evaluation(monkeypatch):
    """A helper that means one thing on numpy and another on Z3 is caught:
    here numpy's ring_next skips a rank while Z3 still sees r + 1."""
    original = ix.ring_next

    def numpy_only_bug(r, n):
        return (r + 2) % n if isinstance(r, np.ndarray) else original(r, n)

    monkeypatch.setattr(ix, "ring_next", numpy_only_bug)
    with pytest.raises(RefinementError, match="the schedule has"):
        generate("ring", "allreduce", 5)


def test_every_schedule_built_is_refined():
    for algorithm, collective, n in [("ring", "allreduce", 64), ("halving-doubling", "allreduce", 12), ("hierarchical-ring", "allreduce", 12), ("binary-tree", "broadcast", 9)]:
        assert generate(algorithm, collective, n).transfers > 0  # refine() raised nothing


def test_a_query_that_only_rereads_a_definition_is_not_a_proof():
    n = z3.Int("N")
    assert decide(Query("N - 1 hops", [n >= 2], n - 1 == n - 1)).status == TRIVIAL
    assert run_queries([Query("N - 1 hops", [n >= 2], n - 1 == n - 1)]).status == TRIVIAL
    mixed = run_queries([Query("by definition", [n >= 2], n == n), Query("real", [n >= 2], n * n >= n)])
    assert mixed.status == PROVED and "1 queries (1 re-reading a definition, not counted)" == mixed.message


def test_a_situation_that_never_arises_is_proved_as_such_but_contradictory_premises_are_not():
    n = z3.Int("N")
    never = decide(Query("two writers", [n >= 2], n < 0, when=[n < 1]))
    assert never.status == PROVED
    assert decide(Query("vacuous", [n >= 2, n < 1], n < 0)).status == FAILED
