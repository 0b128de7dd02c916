"""nccl-pat's postFreq-2 reduce-scatter row up to 65536 ranks
(:mod:`collspec.proofs.nccl_pat`, ``--full`` only): its rank-0 pin and
rotation lemmas on each run's own program, and bugs planted in nccl-pat's
transfer function from N = 40 (above the 32 ranks the row stopped at) that
fail it with a counterexample. Each planted-bug test decides only the one
query where its bug shows, inside the row's scope (a second or two of CPU)."""

from __future__ import annotations

import dataclasses

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_pat
from collspec.proofs import nccl_pat as proof
from collspec.proofs.solver import FAILED, decide, within
from collspec.proofs.suite import RLIMITS, suite

ORIGINAL_PROGRAM = nccl_pat.pat_program
ROW = proof.POSTFREQ_2
#: the run of the row with P a term of N: aggregation 16, postFreq 2, N 18..65536
TOP = (18, 65536, None, 16, 2)
OPTIONS = {"chunk": 2, "count": 1}


def _decide(query):
    """Decide one query of the row as the row does: within its scope and resource limit."""
    from collspec.proofs.solver import Row

    (found,) = [p for p in suite(full=True) if p.name == ROW]
    with within(Row(ROW, found.premises, RLIMITS[ROW])):
        return decide(query)


def _at_postfreq_2_from_40(made, change):
    """``made`` with ``change(n, s, r, j, transfer)`` applied where N >= 40
    and the program's own postFreq is 2 (given or chosen)."""

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        return change(n, s, r, j, t, ix.both(n >= 40, made.choices["post"](n) == 2))

    return dataclasses.replace(made, transfer=transfer)


def last_message_dropped_from_40(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program that stops one message short of a loop from
    N = 40 at postFreq 2 (its last message never sent)."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)
    return dataclasses.replace(made, steps=lambda n: made.steps(n) - ix.where(ix.both(n >= 40, made.choices["post"](n) == 2), 1, 0))


def rank_1_one_rank_too_far_from_40(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program in which, from N = 40 at postFreq 2, rank 1 alone
    sends each message to the rank after its peer."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)
    return _at_postfreq_2_from_40(made, lambda n, s, r, j, t, bug: dataclasses.replace(t, dst=ix.where(ix.both(bug, r == 1), ix.wrap(t.dst + 1, n), t.dst)))


def _one(queries, start: str):
    (found,) = [q for q in queries if q.name.startswith(start)]
    return found


def test_the_row_reaches_65536_pinned_at_rank_0_with_a_rotation_per_program():
    """Every induction query of the row is pinned to rank 0; the transfer's
    rotation is asked of each aggregation and postFreq's own program, on
    the N of its runs; one run covers 18..65536 with P a term of N."""
    assert proof.OPTIONS[ROW][2] == (2, 65536) and proof.cases(ROW)[-1] == TOP
    for run in proof.cases(ROW):
        asked = proof.case_queries(ROW, run)
        assert asked and all(len(q.pin) == 1 and q.name.endswith(("r = 0]", "q = 0]")) for q in asked)
    names = [q.name for q in proof.run_rotation_queries(ROW)]
    rotations = [n for n in names if n.startswith("rotation: rank r's transfer")]
    assert [n[n.index("[aggregation"):] for n in rotations] == [
        "[aggregation 1, postFreq 1: N in 2..2, 3..3]", "[aggregation 2, postFreq 2: N in 4..4, 5..5]", "[aggregation 4, postFreq 2: N in 6..8, 9..9]",
        "[aggregation 8, postFreq 2: N in 10..16, 17..17]", "[aggregation 16, postFreq 2: N in 18..65536]"]
    assert sum(n.startswith("turning: the witness's distance at each step") for n in names) == len(proof.cases(ROW))
    # the below-10 row is not pinned: its queries keep every rank free
    assert not any(q.pin for q in proof.case_queries(proof.BELOW, proof.cases(proof.BELOW)[-1]))


def test_a_message_dropped_from_40_fails_the_top_run_at_its_end_query(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", last_message_dropped_from_40)
    for n in (32, 39):  # the per-N checks up to 39, and the row as it stood (N <= 32), cannot see it
        assert check(generate("nccl-pat", "reduce_scatter", n, **OPTIONS)).ok
    assert not check(generate("nccl-pat", "reduce_scatter", 40, **OPTIONS)).ok
    result = _decide(_one(proof.case_queries(ROW, TOP), "end:"))
    assert result.status == FAILED and result.counterexample["N"] >= 40
    monkeypatch.setattr(nccl_pat, "pat_program", ORIGINAL_PROGRAM)
    assert _decide(_one(proof.case_queries(ROW, TOP), "end:")).ok


def test_a_bug_only_in_rank_1_from_40_fails_the_rotation_of_the_top_runs_program(monkeypatch):
    """The induction is decided at rank 0 only: a bug in rank 1's transfer
    alone fails the rotation query on the program of aggregation 16,
    postFreq 2, with an N from 40."""
    monkeypatch.setattr(nccl_pat, "pat_program", rank_1_one_rank_too_far_from_40)
    assert check(generate("nccl-pat", "reduce_scatter", 39, **OPTIONS)).ok
    assert not check(generate("nccl-pat", "reduce_scatter", 40, **OPTIONS)).ok
    rotation = "rotation: rank r's transfer is rank 0's turned by r (destination and cells + r mod N) [aggregation 16"
    result = _decide(_one(proof.run_rotation_queries(ROW), rotation))
    assert result.status == FAILED and result.counterexample["N"] >= 40
    monkeypatch.setattr(nccl_pat, "pat_program", ORIGINAL_PROGRAM)
    assert _decide(_one(proof.run_rotation_queries(ROW), rotation)).ok
