"""Bugs planted in the generators themselves, not only in index functions.

The transfer function *is* the generator (models/program.py), so a bug in
it must make an all-N proof fail with a counterexample. The schedule is
built from the function's Z3 term, so no Python branch may split what is
proved from what is built: one is an error naming the line. The first case is the one
the issue names: a wrong neighbour on the last all-gather hop only for
N >= 17, which every per-N check up to 16 misses."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import numpy as np
import pytest
import z3

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, program
from collspec.models.generators import ring as ring_gen
from collspec.models.program import SymbolicBranchError
from collspec.proofs import induction, invariants, ring
from collspec.proofs.solver import FAILED, PROVED, TRIVIAL, Query, decide, run_queries
from collspec.proofs.suite import run_proof, suite

ORIGINAL_PHASE = ring_gen._phase_transfer
ORIGINAL_EITHER = ring_gen._either_phase
ORIGINAL_ONE = ring_gen._one


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


def python_branch_on_n(phase, owner, r, hop, n):
    """The audit's bug: a Python conditional on N inside the all-gather. With N a
    Z3 term ``n % 2 == 1`` is a structural comparison (False), so the proofs
    would follow the else branch while numpy, once, followed the other."""
    if phase == ring_gen.AG:
        hop = hop - 1 if n % 2 == 1 and n >= 17 else hop  # PLANTED-BRANCH
    return ORIGINAL_PHASE(phase, owner, r, hop, n)


def planted_width(n):
    return 2 if n % 2 == 1 and n >= 17 else 1  # PLANTED-WIDTH


def planted_chunks(n):
    return n + 1 if n % 2 == 1 and n >= 17 else n  # PLANTED-CHUNKS


def line_of(marker: str) -> str:
    """``tests/test_proofs_generator_mutations.py:LINE`` of the line carrying ``marker``."""
    lines = pathlib.Path(__file__).read_text().splitlines()
    (number,) = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    return f"tests/{pathlib.Path(__file__).name}:{number}"


def exactly_once_row(name):
    (proof,) = [p for p in suite() if p.name == name]
    return run_proof(proof)


def test_a_python_branch_on_n_is_an_error_naming_the_algorithm_and_the_line(monkeypatch):
    monkeypatch.setattr(ring_gen, "_phase_transfer", python_branch_on_n)
    where = line_of("PLANTED-BRANCH")
    for n in (4, 17, 18):
        with pytest.raises(SymbolicBranchError, match=f"^ring allgather: {re.escape(where)}: a symbolic value used as a Python truth value in transfer"):
            generate("ring", "allgather", n)
    with pytest.raises(SymbolicBranchError, match=re.escape(where)):
        exactly_once_row("ring.allgather-exactly-once")  # the proof does not say "proved"


@pytest.mark.parametrize("field, plant, marker", [("_one", planted_width, "PLANTED-WIDTH"), ("_chunks", planted_chunks, "PLANTED-CHUNKS")])
def test_a_python_branch_in_width_or_chunks_is_an_error_naming_the_line(monkeypatch, field, plant, marker):
    monkeypatch.setattr(ring_gen, field, plant)
    name = "width" if field == "_one" else "chunks"
    for n in (5, 17):
        with pytest.raises(SymbolicBranchError, match=f"^ring allgather: {re.escape(line_of(marker))}: .* in {name}\\(\\)"):
            generate("ring", "allgather", n)
    with pytest.raises(SymbolicBranchError, match=re.escape(line_of(marker))):
        exactly_once_row("ring.allgather-exactly-once")


def test_floor_division_on_a_symbolic_value_names_the_line(monkeypatch):
    def floor_divided(n):
        return n // 1  # PLANTED-FLOORDIV

    monkeypatch.setattr(ring_gen, "_chunks", floor_divided)
    with pytest.raises(SymbolicBranchError, match=f"^ring allgather: {re.escape(line_of('PLANTED-FLOORDIV'))}: unsupported operand"):
        generate("ring", "allgather", 4)


def test_the_width_and_chunk_count_built_are_the_terms_values(monkeypatch):
    """Written with where (no Python branch), the plants reach the schedule
    through the same terms the proofs read: width 2 duplicates every
    transfer from N = 17 (odd), and N + 1 chunks leave a cell no rank owns."""
    monkeypatch.setattr(ring_gen, "_one", lambda n: ix.where(ix.both(n % 2 == 1, n >= 17), 2, 1))
    assert generate("ring", "allgather", 17).transfers == 2 * 17 * 16
    assert not check(generate("ring", "allgather", 17)).ok
    assert generate("ring", "allgather", 16).transfers == 16 * 15
    monkeypatch.setattr(ring_gen, "_one", ORIGINAL_ONE)
    monkeypatch.setattr(ring_gen, "_chunks", lambda n: ix.where(ix.both(n % 2 == 1, n >= 17), n + 1, n))
    assert generate("ring", "allgather", 17).chunks == 18 and generate("ring", "allgather", 18).chunks == 18


def test_a_helper_that_meant_something_else_on_numpy_cannot_reach_the_schedule(monkeypatch):
    """The schedule is the compiled Z3 term, not a numpy run of the Python
    code: a helper that would differ on numpy arrays changes nothing."""
    original = ix.ring_next
    want = generate("ring", "allreduce", 5)

    def numpy_only_bug(r, n):
        return (r + 2) % n if isinstance(r, np.ndarray) else original(r, n)

    monkeypatch.setattr(ix, "ring_next", numpy_only_bug)
    got = generate("ring", "allreduce", 5)
    assert [(list(a.dst), list(a.src_chunk)) for a in got.steps] == [(list(b.dst), list(b.src_chunk)) for b in want.steps]
    assert check(got).ok


def test_every_schedule_built_is_refined():
    for algorithm, collective, n in [("ring", "allreduce", 64), ("halving-doubling", "allreduce", 12), ("hierarchical-ring", "allreduce", 12), ("binary-tree", "broadcast", 9)]:
        assert check(generate(algorithm, collective, n)).ok  # built from the terms, every point


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
