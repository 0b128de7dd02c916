"""The nccl-pat rows whose top N are tied to a user's call by its own
choice functions (the aggregation-8 rows, 10..65536, the postFreq-2
rows' run 18..65536 and the postFreq-4 rows' run 34..65536) decide that the user's call's program is
the proved one, not only that it chooses the same aggregation and
postFreq: a bug that ``pat_program`` runs only when the aggregation and
postFreq are left to it (the path every user's call without ``-o
aggregation``/``-o post`` takes) fails the row.

Each test builds the row as ``collspec prove --full`` builds it and decides
only the ``same`` query (:func:`tests.proof_results.deciding_only`); the
induction and rotation queries are about the programs with the aggregation
and postFreq given, which the planted bug leaves alone (the reduce-scatter
rows with runs do not even build them here: that alone is several seconds)."""

from __future__ import annotations

import dataclasses

import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_pat
from collspec.proofs import nccl_pat as proof
from collspec.proofs import nccl_pat_allgather as allgather
from collspec.proofs.solver import FAILED, Row, within
from collspec.proofs.suite import RLIMITS, suite

from proof_results import deciding_only

ORIGINAL_PROGRAM = nccl_pat.pat_program


def default_branch_bug_from_40(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program in which, from N = 40, every rank sends to the rank
    after its peer, only when neither aggregation nor postFreq is given
    (NCCL's choice: a user's call); with either given it is the generator's."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)
    if aggregation is not None or post is not None:
        return made

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        return dataclasses.replace(t, dst=ix.where(n >= 40, ix.wrap(t.dst + 1, n), t.dst))

    return dataclasses.replace(made, transfer=transfer)


#: row -> (its prove, the user's call's options, the collective, the
#: aggregation and postFreq of its top N, the N range of its same query there)
ROWS = {
    proof.POSTFREQ_2: (proof.prove, {"chunk": 2, "count": 1}, "reduce_scatter", {"aggregation": 16, "post": 2}, "18..65536"),
    proof.POSTFREQ_4: (proof.prove, {"chunk": 4, "count": 1}, "reduce_scatter", {"aggregation": 32, "post": 4}, "34..65536"),
    "nccl-pat.reduce_scatter-exactly-once": (proof.prove, {"chunk": 1, "count": 1}, "reduce_scatter", {"aggregation": 8, "post": 1}, "10..65536"),
    allgather.ROW: (allgather.prove, {"chunk": 1, "count": 1}, "allgather", {"aggregation": 8, "post": 1}, "10..65536"),
    allgather.POSTFREQ_2: (allgather.prove, {"chunk": 2, "count": 1}, "allgather", {"aggregation": 16, "post": 2}, "18..65536"),
    allgather.POSTFREQ_4: (allgather.prove, {"chunk": 4, "count": 1}, "allgather", {"aggregation": 32, "post": 4}, "34..65536"),
}


def _prove_deciding_same(monkeypatch, row):
    """Row ``row`` built as ``collspec prove`` builds it, deciding only its
    ``same`` queries of the top N (a postFreq-2 or -4 row: its run
    18..65536 or 34..65536), within the row's scope and resource limit."""
    from collspec.proofs import induction

    prove, top = ROWS[row][0], ROWS[row][4]
    # the given programs' induction (and the reduce-scatter runs' rotation): untouched by the bug, seconds to build
    monkeypatch.setattr(induction, "queries", lambda program, invariant: [])
    if row in proof.PINNED:
        monkeypatch.setattr(proof, "run_rotation_queries", lambda name: [])
    passed = deciding_only(monkeypatch, lambda name: name.startswith("same:") and top in name)
    (found,) = [p for p in suite(full=True) if p.name == row]
    with within(Row(row, found.premises, RLIMITS[row])):
        return prove(row), passed


@pytest.mark.parametrize("row", list(ROWS))
def test_a_bug_only_in_the_users_choice_branch_from_40_fails_the_row(monkeypatch, row):
    _, options, collective, given, _ = ROWS[row]
    monkeypatch.setattr(nccl_pat, "pat_program", default_branch_bug_from_40)
    assert check(generate("nccl-pat", collective, 39, **options)).ok
    assert not check(generate("nccl-pat", collective, 40, **options)).ok
    assert check(generate("nccl-pat", collective, 40, **given, **options)).ok
    result, _ = _prove_deciding_same(monkeypatch, row)
    assert result.status == FAILED and result.counterexample["N"] >= 40
    failed = result.queries[-1][0]
    assert failed.startswith("same: the program NCCL's options build is the run's (its own aggregation and postFreq terms replaced"), failed


@pytest.mark.parametrize("row", list(ROWS))
def test_the_users_call_is_the_proved_program_on_the_generators_code(monkeypatch, row):
    """No false alarm: on the generator as it is, the same query holds."""
    result, passed = _prove_deciding_same(monkeypatch, row)
    assert result.ok, result.message
    decided = [name for name, status, _ in result.queries if name.startswith("same:") and name not in passed]
    assert len(decided) == 1 and "replaced by the run's" in decided[0]


def test_a_choice_branch_bug_at_one_n_of_the_top_run_fails_with_that_n(monkeypatch):
    """The bug of the test above only at N = 40000 (far past what a schedule
    can be built and checked for): the postFreq-2 row's same query on the
    run 18..65536 fails with exactly that N."""

    def at_40000(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
        made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)
        if aggregation is not None or post is not None:
            return made
        return dataclasses.replace(made, transfer=lambda n, s, r, j: (lambda t: dataclasses.replace(
            t, dst=ix.where(n == 40000, ix.wrap(t.dst + 1, n), t.dst)))(made.transfer(n, s, r, j)))

    monkeypatch.setattr(nccl_pat, "pat_program", at_40000)
    result, _ = _prove_deciding_same(monkeypatch, proof.POSTFREQ_2)
    assert result.status == FAILED and result.counterexample["N"] == 40000
    assert "18..65536" in result.queries[-1][0]


def test_choice_functions_that_are_not_the_ones_the_transfer_calls_do_not_hide_a_bug(monkeypatch):
    """A default branch whose ``Program.choices`` answer 16 and 2 whatever N
    is (not the terms its transfer calls): nothing is replaced, so the same
    query compares the two programs as they are and finds the bug."""
    import z3

    def lying(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
        made = default_branch_bug_from_40(collective, aggregation, chunk, count, post, dtype)
        if aggregation is not None or post is not None:
            return made
        return dataclasses.replace(made, choices={"aggregation": lambda n: 16 + 0 * n, "post": lambda n: 2 + 0 * n})

    monkeypatch.setattr(nccl_pat, "pat_program", lying)
    n = z3.BitVec("N", 20)
    query = proof._same(proof.POSTFREQ_2, 16, 2, proof.scope(proof.POSTFREQ_2).assertions({"N": n}), z3.And(n >= 18, n <= 65536), "N in 18..65536", chosen=True)
    (found,) = [p for p in suite(full=True) if p.name == proof.POSTFREQ_2]
    with within(Row(proof.POSTFREQ_2, found.premises, RLIMITS[proof.POSTFREQ_2])):
        from collspec.proofs.solver import decide

        result = decide(query)
    assert result.status == FAILED and result.counterexample["N"] >= 40
