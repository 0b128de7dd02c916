"""nccl-pat's all-gather rows with NCCL's own choice
(:mod:`collspec.proofs.nccl_pat_allgather`, ``--full`` only): below 10
ranks (aggregation 1, 2, 4) and at chunk 2 (postFreq 2, aggregation up to
16). Their scopes, the programs they prove against the generator's, the
restated order (message and place of every block) against the built
schedules, the cover and choice of their runs, and bugs planted so that
they show only below 10 ranks or only at postFreq 2: each fails its row at
the named query with a counterexample, and each test decides only that
query (the row's other queries are what ``collspec prove --full`` runs)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_pat
from collspec.proofs import nccl_pat as shared
from collspec.proofs import nccl_pat_allgather as proof
from collspec.proofs.solver import FAILED, PROVED, Row, decide, within
from collspec.proofs.suite import suite
from pat_mutations import last_message_again, one_on

BELOW, POSTFREQ_2, POSTFREQ_4 = proof.BELOW, proof.POSTFREQ_2, proof.POSTFREQ_4
ORIGINAL_PROGRAM = nccl_pat.pat_program
RUN_6_TO_8 = (6, 8, 8, 4, 1)
RUN_4 = (4, 4, 4, 2, 2)


def _plain(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


def _decide(name, query):
    with within(Row(name, proof.scope(name), 50_000_000)):
        return decide(query)


def _query(name, run, starts):
    """The one query of ``run`` whose name starts with ``starts``: a query of the row."""
    (found,) = [q for q in proof.run_queries(name, run) if q.name.startswith(starts)]
    return found


def test_the_rows_are_full_only_with_nccls_choice_in_the_scope():
    rows = {p.name: p.scope for p in suite(full=True) if p.name in (BELOW, POSTFREQ_2, POSTFREQ_4)}
    assert rows == {
        BELOW: "all N in 2..9, NCCL's aggregation 1 (N 2..3), 2 (N 4..5), 4 (N 6..9), postFreq 1, chunk 1, count 1",
        POSTFREQ_2: "all N in 2..65536, NCCL's aggregation 1 (N 2..3), 2 (N 4..5), 4 (N 6..9), 8 (N 10..17), 16 (N 18..65536), "
                    "NCCL's postFreq 1 (N 2..3), 2 (N 4..65536), chunk 2, count 1",
        POSTFREQ_4: "all N in 2..65536, NCCL's aggregation 1 (N 2..3), 2 (N 4..5), 4 (N 6..9), 8 (N 10..17), 16 (N 18..33), 32 (N 34..65536), "
                    "NCCL's postFreq 1 (N 2..3), 2 (N 4..5), 4 (N 6..65536), chunk 4, count 1",
    }
    assert not [p for p in suite() if p.name in (BELOW, POSTFREQ_2, POSTFREQ_4)]
    assert shared.cases(BELOW) == ((2, 2, 2, 1, 1), (3, 3, 4, 1, 1), (4, 4, 4, 2, 1), (5, 5, 8, 2, 1), (6, 8, 8, 4, 1), (9, 9, 16, 4, 1))
    assert shared.cases(POSTFREQ_2)[2:] == ((4, 4, 4, 2, 2), (5, 5, 8, 2, 2), (6, 8, 8, 4, 2), (9, 9, 16, 4, 2), (10, 16, 16, 8, 2),
                                            (17, 17, 32, 8, 2), (18, 65536, None, 16, 2))  # P a term of N from 18
    assert shared.cases(POSTFREQ_4)[4:] == ((6, 8, 8, 4, 4), (9, 9, 16, 4, 4), (10, 16, 16, 8, 4), (17, 17, 32, 8, 4), (18, 32, 32, 16, 4),
                                            (33, 33, 64, 16, 4), (34, 65536, None, 32, 4))  # P a term of N from 34


def test_each_runs_program_is_the_generators_and_a_users_calls():
    """At the first and last N of every run with P a number, and N = 18, 100 and 257
    of the postFreq-2 run 18..65536 (34 and 65 of the postFreq-4 run
    34..65536; the same query covers the rest): the
    scope's options are the run's, and the program a run proves
    (aggregation and postFreq given) builds the schedule of a user's call
    with only the row's chunk and count."""
    rows = {p.name: p for p in suite(full=True)}
    for name in (BELOW, POSTFREQ_2, POSTFREQ_4):
        _, options, _ = proof.OPTIONS[name]
        for lo, hi, p, a, f in shared.cases(name):
            for n in sorted({lo, hi}) if p else ((18, 100, 257) if name == POSTFREQ_2 else (34, 65)):  # the run with P a term of N at a few of its N
                assert rows[name].premises.fixed(n) == {**options, "aggregation": a, "post": f}
                assert p is None or int(nccl_pat.pow2_above(n)) == p
                built = _plain(proof.program(name, a, f).schedule(n))
                assert built == _plain(generate("nccl-pat", "allgather", n, chunk=options["chunk"], count=options["count"]))


def test_the_restated_message_and_place_are_the_built_schedules():
    """T(o), the block's place (its slot) and the sender r + lowbit(o) of the
    invariant against every message the generator builds, for every N of
    the row below 10, the first and last N of each postFreq-2 run with P a
    number and N = 18, 33, 64, 100, 257 of its run 18..65536 (P a term of
    N, and the first and last N of each postFreq-4 run with P a number and
    N = 34, 40, 65 of its run 34..65536; every offset arrives once."""
    cases = [(BELOW, n, run) for run in shared.cases(BELOW) for n in range(run[0], run[1] + 1)]
    cases += [(POSTFREQ_2, n, run) for run in shared.cases(POSTFREQ_2) for n in (sorted({run[0], run[1]}) if run[2] else (18, 33, 64, 100, 257))]
    cases += [(POSTFREQ_4, n, run) for run in shared.cases(POSTFREQ_4) for n in (sorted({run[0], run[1]}) if run[2] else (34, 40, 65))]
    for name, n, (_, _, p, a, f) in cases:
        made, ranks, arrived = proof.program(name, a, f), np.arange(n, dtype=np.int64), set()
        for t in range(int(made.steps(n))):
            for j in range(int(made.width(n))):
                moved = made.transfer(np.int64(n), np.int64(t), ranks, np.int64(j))
                active = np.broadcast_to(np.asarray(moved.active, dtype=bool), ranks.shape)
                src, dst, c = ranks[active], np.broadcast_to(moved.dst, ranks.shape)[active], np.broadcast_to(moved.dst_chunk, ranks.shape)[active]
                o = (c - dst) % n
                assert (proof.arrival(p, o, a, f, n=np.int64(n)) == t).all(), (name, n, t, j)  # P a term of N where the run's p is None
                assert (proof.place(p, o, a, f, n=np.int64(n)) == j).all(), (name, n, t, j)
                assert (src == (dst + (o & -o)) % n).all(), (name, n, t, j)
                arrived |= set(zip(dst.tolist(), c.tolist()))
        assert arrived == {(r, c) for r in range(n) for c in range(n) if r != c}, (name, n)


def test_the_runs_cover_the_rows_and_a_missing_run_fails_the_cover(monkeypatch):
    for name in (BELOW, POSTFREQ_2, POSTFREQ_4):
        assert _decide(name, proof.runs_choice_query(name)).status == PROVED
        assert _decide(name, proof.runs_cover_query(name)).status == PROVED
    runs = shared.cases(BELOW)
    monkeypatch.setattr(shared, "cases", lambda name: tuple(r for r in runs if r[0] != 5))
    result = _decide(BELOW, proof.runs_cover_query(BELOW))
    assert result.status == FAILED and result.counterexample["N"] == 5


def test_a_run_with_another_aggregation_than_the_users_call_fails_the_choice_query(monkeypatch):
    """A run naming aggregation 8 where the user's call chooses 16 (N 18..65536)
    would prove another program than the one NCCL's options build."""
    runs = shared.cases(POSTFREQ_2)
    monkeypatch.setattr(shared, "cases", lambda name: tuple((lo, hi, p, 8 if lo == 18 else a, f) for lo, hi, p, a, f in runs))
    result = _decide(POSTFREQ_2, proof.runs_choice_query(POSTFREQ_2))
    assert result.status == FAILED and 18 <= result.counterexample["N"] <= 65536


#: the all-gather's first message (scale A/2) writes the block after the one it read, at N = 7 only (aggregation 4)
next_block_in_the_first_message_at_7 = one_on("dst_chunk", lambda n, s, r, j: ix.both(n == 7, s == 0), ORIGINAL_PROGRAM)


def test_a_bug_at_7_ranks_fails_the_below_10_row_at_its_run(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", next_block_in_the_first_message_at_7)
    assert not check(generate("nccl-pat", "allgather", 7, chunk=1, count=1)).ok
    for n in (6, 8, 9, 10):
        assert check(generate("nccl-pat", "allgather", n, chunk=1, count=1)).ok
    assert RUN_6_TO_8 in shared.cases(BELOW)
    result = _decide(BELOW, _query(BELOW, RUN_6_TO_8, "keeps-arrivals"))
    assert result.status == FAILED and result.reason == "counterexample" and result.counterexample["N"] == 7


#: the second block of every message (slot 1, which exists only from postFreq 2 at count 1) written one cell on
second_block_of_a_message_one_cell_on = one_on("dst_chunk", lambda n, s, r, j: j == 1, ORIGINAL_PROGRAM)


def test_a_bug_in_a_messages_second_block_fails_the_postfreq_2_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", second_block_of_a_message_one_cell_on)
    for n in (4, 9, 17):  # postFreq 1: one block a message, the program unchanged
        assert _plain(generate("nccl-pat", "allgather", n, chunk=1, count=1)) == _plain(ORIGINAL_PROGRAM("allgather", chunk=1, count=1).schedule(n))
    assert not check(generate("nccl-pat", "allgather", 4, chunk=2, count=1)).ok  # postFreq 2
    assert shared.cases(POSTFREQ_2)[2] == RUN_4  # the row's first run at postFreq 2
    result = _decide(POSTFREQ_2, _query(POSTFREQ_2, RUN_4, "keeps-arrivals"))
    assert result.status == FAILED and result.reason == "counterexample" and result.counterexample["N"] == 4


#: rank 1 alone writes the block after the one it read in the first message, at N = 7: the queries pinned to rank 0 cannot see it
rank_1_one_cell_on_at_7 = one_on("dst_chunk", lambda n, s, r, j: ix.both(n == 7, s == 0, r == 1), ORIGINAL_PROGRAM)


def test_a_rank_1_bug_at_7_fails_the_runs_rotation(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", rank_1_one_cell_on_at_7)
    assert not check(generate("nccl-pat", "allgather", 7, chunk=1, count=1)).ok
    assert _decide(BELOW, _query(BELOW, RUN_6_TO_8, "keeps-arrivals")).status == PROVED  # rank 0 is right
    result = _decide(BELOW, _query(BELOW, RUN_6_TO_8, "rotation: rank r's transfer"))
    assert result.status == FAILED and result.counterexample["N"] == 7 and result.counterexample["r"] == 1


def last_message_again_at_7_in_the_users_call(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """A bug only where the generator makes NCCL's choice itself (a user's
    call): at N = 7 the last message is sent again. The programs the runs
    prove (aggregation and postFreq given) are unchanged."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)
    if aggregation is not None:
        return made

    return last_message_again(made, lambda n: n == 7)


def test_a_bug_only_in_the_users_call_fails_the_runs_same_query(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", last_message_again_at_7_in_the_users_call)
    assert len(generate("nccl-pat", "allgather", 7, chunk=1, count=1).steps) == len(ORIGINAL_PROGRAM("allgather", chunk=1, count=1).schedule(7).steps) + 1
    assert _plain(proof.program(BELOW, 4, 1).schedule(7)) == _plain(ORIGINAL_PROGRAM("allgather", 4, 1, 1, 1).schedule(7))
    result = _decide(BELOW, _query(BELOW, RUN_6_TO_8, "same:"))
    assert result.status == FAILED and result.counterexample["N"] == 7


def test_the_invariant_at_postfreq_2_turns_and_a_slot_of_the_cell_not_the_offset_fails():
    """The decided turning of the postFreq-2 invariant (T, lowbit and the
    place free functions), and a variant whose witness slot is the place of
    the cell c rather than of the offset c - r: it fails with a counterexample."""
    queries = [q for q in proof.runs_turning_queries(POSTFREQ_2) if "postFreq 2" in q.name]
    assert len(queries) == 1 and _decide(POSTFREQ_2, queries[0]).status == PROVED
    import z3

    placing = z3.Function("place", z3.IntSort(), z3.IntSort())

    def slot_of_the_cell(timing, lowbit):
        made = proof.invariant(16, POSTFREQ_2, timing=timing, lowbit=lowbit, f=2, placing=placing)

        def witness(n, s, r, c, *rest):
            return made.writer(n, s, r, c)[0], placing(c)

        return dataclasses.replace(made, writer=witness, source=witness)

    result = _decide(POSTFREQ_2, proof.invariant_turning_query(POSTFREQ_2, make=slot_of_the_cell))
    assert result.status == FAILED and result.reason == "counterexample"


@pytest.mark.parametrize("name", [BELOW, POSTFREQ_2, POSTFREQ_4])
def test_every_run_asks_same_rotation_and_the_pinned_induction(name):
    """Each run's queries: same, the rotation of its program's transfer and
    ends, and the 13 of the induction, each pinned to rank 0 and named with
    the run."""
    run = shared.cases(name)[-1]
    made = proof.run_queries(name, run)
    assert made[0].name.startswith("same:") and made[1].name.startswith("rotation: rank r's transfer") and made[2].name.startswith("rotation: the cells")
    assert len(made) == 16 and all(len(q.pin) == 1 for q in made[3:]) and not any(q.pin for q in made[:3])
    p = "= pow2_above(N)" if run[2] is None else run[2]  # the last run of the postFreq-2 and -4 rows: P a term of N
    assert all(q.name.endswith(("r = 0]", "q = 0]")) and f"N in {run[0]}..{run[1]}: P {p}" in q.name for q in made[3:])


def test_the_postfreq_2_invariant_turns_with_the_ranks_at_concrete_n():
    """What the turning query decides with T, lowbit and the place free,
    checked on numbers with NCCL's at N = 40 (P 64, aggregation 16,
    postFreq 2), every step: every rank's claim and witness (rank and
    slot) are rank 0's turned."""
    n, (_, _, p, a, f) = 40, next(run for run in shared.cases(POSTFREQ_2) if run[0] <= 40 <= run[1])
    inv = proof.invariant(p, POSTFREQ_2, a=a, f=f)
    r, c = np.meshgrid(*[np.arange(n, dtype=np.int64)] * 2, indexing="ij")
    zero = 0 * r
    for s in range(int(proof.program(POSTFREQ_2, a, f).steps(n)) + 1):
        s = np.int64(s)
        assert (inv.holds(n, s, r, c, c, c) == inv.holds(n, s, zero, (c - r) % n, (c - r) % n, (c - r) % n)).all()
        wq, wj = inv.writer(n, s, r, c)
        wq0, wj0 = inv.writer(n, s, zero, (c - r) % n)
        assert (wq == (wq0 + r) % n).all() and (np.asarray(wj) == np.asarray(wj0)).all()
    assert set(np.unique(np.asarray(inv.writer(n, np.int64(0), r, c)[1]))) == {0, 1}  # both slots of a message are named


#: the second block of every message (slot 1: postFreq 2) written one cell on, only from N = 100: inside the run 18..65536, whose invariant takes P as a term of N
second_block_one_cell_on_from_100 = one_on("dst_chunk", lambda n, s, r, j: ix.both(n >= 100, j == 1), ORIGINAL_PROGRAM)


def test_a_postfreq_2_bug_from_100_fails_the_top_run_of_the_postfreq_2_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", second_block_one_cell_on_from_100)
    assert check(generate("nccl-pat", "allgather", 99, chunk=2, count=1)).ok  # the per-N check to 99 cannot see it
    assert not check(generate("nccl-pat", "allgather", 100, chunk=2, count=1)).ok
    top = shared.cases(POSTFREQ_2)[-1]
    assert top == (18, 65536, None, 16, 2)
    query = _query(POSTFREQ_2, top, "keeps-arrivals")
    assert query.name == "keeps-arrivals: after the step the cell holds data and what arrived [N in 18..65536: P = pow2_above(N), aggregation 16, postFreq 2, r = 0]"
    result = _decide(POSTFREQ_2, query)
    assert result.status == FAILED and result.reason == "counterexample" and result.counterexample["N"] >= 100
