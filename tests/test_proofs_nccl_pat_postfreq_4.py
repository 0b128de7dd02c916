"""nccl-pat's postFreq-4 rows (chunk 4, count 1: NCCL's postFreq 4 from
N = 6, aggregation 32 from N = 34), reduce-scatter
(:mod:`collspec.proofs.nccl_pat`) and all-gather
(:mod:`collspec.proofs.nccl_pat_allgather`), ``--full`` only: their runs,
the rank-0 pin with a rotation per run's program, and a bug planted in the
fourth block of a message (slot 3, which exists only at postFreq 4 with
count 1) from N = 40, inside the run 34..65536 whose invariant takes P as a
term of N: each fails its row at the named query of that run with an N from
40. Each planted-bug test decides only that query, as the row decides it
(its scope and resource limit); the unchanged program's proof is
``collspec prove --full``'s."""

from __future__ import annotations

import dataclasses

import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_pat
from collspec.proofs import nccl_pat as reduce_scatter
from collspec.proofs import nccl_pat_allgather as allgather
from collspec.proofs.solver import FAILED, Row, decide, within
from collspec.proofs.suite import RLIMITS, suite

ORIGINAL_PROGRAM = nccl_pat.pat_program
RS, AG = reduce_scatter.POSTFREQ_4, allgather.POSTFREQ_4
#: the runs of both rows: NCCL 2.30's P, aggregation and postFreq at chunk 4, count 1
RUNS = ((2, 2, 2, 1, 1), (3, 3, 4, 1, 1), (4, 4, 4, 2, 2), (5, 5, 8, 2, 2), (6, 8, 8, 4, 4), (9, 9, 16, 4, 4), (10, 16, 16, 8, 4),
        (17, 17, 32, 8, 4), (18, 32, 32, 16, 4), (33, 33, 64, 16, 4), (34, 65536, None, 32, 4))
TOP = RUNS[-1]
OPTIONS = {"chunk": 4, "count": 1}
SCOPE = ("all N in 2..65536, NCCL's aggregation 1 (N 2..3), 2 (N 4..5), 4 (N 6..9), 8 (N 10..17), 16 (N 18..33), 32 (N 34..65536), "
         "NCCL's postFreq 1 (N 2..3), 2 (N 4..5), 4 (N 6..65536), chunk 4, count 1")


def _decide(name, query):
    """Decide one query of row ``name`` as the row does: within its scope and resource limit."""
    (found,) = [p for p in suite(full=True) if p.name == name]
    with within(Row(name, found.premises, RLIMITS[name])):
        return decide(query)


def fourth_block_one_cell_on_from_40(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program with the fourth block of every message (slot 3:
    postFreq 4 at count 1) read and written one cell on, only from N = 40."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        on = ix.both(n >= 40, j == 3)
        return dataclasses.replace(t, src_chunk=ix.where(on, ix.wrap(t.src_chunk + 1, n), t.src_chunk),
                                   dst_chunk=ix.where(on, ix.wrap(t.dst_chunk + 1, n), t.dst_chunk))

    return dataclasses.replace(made, transfer=transfer)


def _plain(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


def test_the_rows_are_full_only_with_nccls_choice_at_chunk_4_in_the_scope():
    rows = {p.name: p.scope for p in suite(full=True) if p.name in (RS, AG)}
    assert rows == {RS: SCOPE, AG: SCOPE}
    assert not [p for p in suite() if p.name in (RS, AG)]
    assert reduce_scatter.cases(RS) == RUNS == reduce_scatter.cases(AG)
    assert {a for *_, a, f in RUNS if f == 4} == {4, 8, 16, 32}


def test_the_reduce_scatter_row_is_pinned_at_rank_0_with_a_rotation_per_program():
    """Every induction query of the row is pinned to rank 0, and the
    transfer's rotation is asked of each aggregation and postFreq's own
    program on the N of its runs (aggregation 32 on 34..65536)."""
    assert RS in reduce_scatter.PINNED
    asked = reduce_scatter.case_queries(RS, TOP)
    assert asked and all(len(q.pin) == 1 and q.name.endswith(("r = 0]", "q = 0]")) for q in asked)
    rotations = [q.name for q in reduce_scatter.run_rotation_queries(RS) if q.name.startswith("rotation: rank r's transfer")]
    assert [n[n.index("[aggregation"):] for n in rotations] == [
        "[aggregation 1, postFreq 1: N in 2..2, 3..3]", "[aggregation 2, postFreq 2: N in 4..4, 5..5]", "[aggregation 4, postFreq 4: N in 6..8, 9..9]",
        "[aggregation 8, postFreq 4: N in 10..16, 17..17]", "[aggregation 16, postFreq 4: N in 18..32, 33..33]", "[aggregation 32, postFreq 4: N in 34..65536]"]


#: row -> (the collective, the query of the run 34..65536 where the planted bug shows)
PLANTED = {
    RS: ("reduce_scatter", "keeps-arrivals: after the step the cell holds data and what arrived "
                           "[N in 34..65536: P = pow2_above(N), aggregation 32, postFreq 4, r = 0]"),
    AG: ("allgather", "keeps-arrivals: after the step the cell holds data and what arrived "
                      "[N in 34..65536: P = pow2_above(N), aggregation 32, postFreq 4, r = 0]"),
}


def _top_query(name, wanted):
    queries = reduce_scatter.case_queries(name, TOP) if name == RS else allgather.run_queries(name, TOP)
    (found,) = [q for q in queries if q.name == wanted]
    return found


@pytest.mark.parametrize("name", list(PLANTED))
def test_a_bug_in_a_messages_fourth_block_from_40_fails_the_top_run(monkeypatch, name):
    collective, wanted = PLANTED[name]
    monkeypatch.setattr(nccl_pat, "pat_program", fourth_block_one_cell_on_from_40)
    for options in ({"chunk": 2, "count": 1}, {"chunk": 1, "count": 1}):  # postFreq 2 and 1: no fourth block, the program unchanged
        assert _plain(generate("nccl-pat", collective, 40, **options)) == _plain(ORIGINAL_PROGRAM(collective, **options).schedule(40))
    assert check(generate("nccl-pat", collective, 39, **OPTIONS)).ok  # the per-N check to 39 cannot see it
    assert not check(generate("nccl-pat", collective, 40, **OPTIONS)).ok
    result = _decide(name, _top_query(name, wanted))
    assert result.status == FAILED and result.reason == "counterexample" and 40 <= result.counterexample["N"] <= 65536
