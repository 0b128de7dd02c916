"""nccl-pat's all-gather row (:mod:`collspec.proofs.nccl_pat_allgather`,
``--full`` only): its scope, the program it proves, the restated order
against the built schedule, the cover of its cases, and bugs planted in
nccl-pat's all-gather from N = 17 that fail the row with a counterexample
while the per-N checks up to 16 pass, one of them on rank 1 alone (the
queries are pinned to rank 0; the rotation lemma must catch it). The planted-bug tests build the
whole row, with its first range of N 10..32 (the same cover), and decide under Z3 only the query
where the bug shows: the unchanged program's proof is ``collspec prove --full``'s."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_pat
from collspec.proofs import nccl_pat_allgather as proof
from collspec.proofs.solver import FAILED, PROVED, Row, decide, within
from collspec.proofs.suite import run_proof, suite

from proof_results import deciding_only

ROW = proof.ROW
ORIGINAL_NEXT_AS = nccl_pat.next_as
ORIGINAL_PROGRAM = nccl_pat.pat_program
OPTIONS = proof.OPTIONS[ROW][1]
#: the row's ranges with 10..32 first: the same cover (the cover query still
#: decides it), so a bug from N = 17 fails the first, cheap range
SMALL_FIRST = ((10, 32), (33, 16384), *proof.RANGES[1:])


def row():
    (found,) = [p for p in suite(full=True) if p.name == ROW]
    return run_proof(found)


def _failed_query(result):
    return [q for q, status, _ in result.queries if status == FAILED]


def test_the_row_is_full_only_with_its_options_and_range_in_the_scope():
    (found,) = [p for p in suite(full=True) if p.name == ROW]
    assert found.scope == "all N in 10..65536, aggregation 8, postFreq 1, chunk 1, count 1"
    assert ROW not in [p.name for p in suite()]
    assert proof.POWERS == (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
    assert proof.RANGES == ((10, 16384), (16385, 32768), (32769, 65536))


def test_the_proved_program_is_the_generators_at_the_scope_options():
    (found,) = [p for p in suite(full=True) if p.name == ROW]
    made = proof.program()
    assert made.meta == {**OPTIONS, "dtype": "float32"}
    for n in (10, 17, 256):
        assert found.premises.fixed(n) == OPTIONS
        assert _plain(made.schedule(n)) == _plain(generate("nccl-pat", "allgather", n, **OPTIONS))
        # NCCL 2.30's own choice at chunk 1, count 1 from N = 10 (no aggregation or post given)
        assert _plain(made.schedule(n)) == _plain(generate("nccl-pat", "allgather", n, chunk=1, count=1))


def test_the_restated_order_is_the_built_schedules():
    """T(o) and the sender r + lowbit(o) of the invariant against every
    message the generator builds, and every offset arrives once."""
    for n in (10, 16, 17, 33, 100, 256):
        p = int(nccl_pat.pow2_above(n))
        arrived = set()
        for t, step in enumerate(proof.program().schedule(n).steps):
            src, dst, c = (np.asarray(getattr(step, f), dtype=np.int64) for f in ("src", "dst", "dst_chunk"))
            o = (c - dst) % n
            assert (proof.arrival(p, o) == t).all(), (n, t)
            assert (proof.arrival(None, o, n=np.int64(n)) == t).all(), (n, t)  # P a term of N, as the row's ranges ask
            assert (src == (dst + (o & -o)) % n).all(), (n, t)
            arrived |= set(zip(dst.tolist(), c.tolist()))
        assert arrived == {(r, c) for r in range(n) for c in range(n) if r != c}


def test_the_position_is_nccls_next_as_walk():
    for delta in (2, 4, 8, 32):
        walk = [int(nccl_pat.next_as(np.int64(p), np.int64(delta))) for p in range(delta - 1)]
        assert sorted(walk) == list(range(1, delta))
        assert [int(proof.position(delta, np.int64(l))) for l in walk] == list(range(delta - 1))
    assert [int(nccl_pat.next_as(np.int64(p), np.int64(8))) for p in range(7)] == [4, 6, 7, 5, 2, 3, 1]


def test_the_cases_cover_the_scope_and_a_missing_case_is_found(monkeypatch):
    with within(Row(ROW, proof.scope(), 10_000_000)):
        assert decide(proof.cover_query()).status == PROVED
    monkeypatch.setattr(proof, "RANGES", ((10, 16384), (16386, 32768), (32769, 65536)))
    with within(Row(ROW, proof.scope(), 10_000_000)):
        result = decide(proof.cover_query())
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.counterexample["N"] == 16385


def child_before_parent_from_17(p, delta):
    """NCCL's nextAs with its first two steps swapped: ``as`` = 3 delta / 4
    before its parent delta / 2. A walk of delta = 2 (N <= 16) has one step,
    so only N >= 17 sees it."""
    swapped = ix.where(p == 0, 1, ix.where(p == 1, 0, p))
    return ORIGINAL_NEXT_AS(ix.where(delta >= 4, swapped, p), delta)


def next_block_at_the_first_scale_step_from_17(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's all-gather with the first message (scale A/2) writing the
    block after the one it read, when N >= 17."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        wrong = ix.both(n >= 17, s == 0)
        return dataclasses.replace(t, dst_chunk=ix.where(wrong, ix.wrap(t.dst_chunk + 1, n), t.dst_chunk))

    return dataclasses.replace(made, transfer=transfer)


def test_a_child_sent_before_its_parent_from_17_fails_the_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "next_as", child_before_parent_from_17)
    monkeypatch.setattr(proof, "RANGES", SMALL_FIRST)
    for n in range(10, 17):
        assert check(generate("nccl-pat", "allgather", n, **OPTIONS)).ok  # the per-N check up to 16 cannot see it
    assert not check(generate("nccl-pat", "allgather", 17, **OPTIONS)).ok
    failing = "reads-data: a transfer reads a cell holding data, and a reduce adds into one [N in 10..32, q = 0]"
    passed_over = deciding_only(monkeypatch, lambda name: name == failing)
    result = row()
    assert "cases: every N of the scope is in one of the ranges 10..32, 33..16384, 16385..32768, 32769..65536" in passed_over
    assert result.status == FAILED and result.reason == "counterexample"
    assert 17 <= result.counterexample["N"] <= 32
    assert _failed_query(result) == [failing]


def test_the_next_block_at_the_first_scale_step_from_17_fails_the_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", next_block_at_the_first_scale_step_from_17)
    monkeypatch.setattr(proof, "RANGES", SMALL_FIRST)
    for n in range(10, 17):
        assert check(generate("nccl-pat", "allgather", n, **OPTIONS)).ok
    assert not check(generate("nccl-pat", "allgather", 17, **OPTIONS)).ok
    failing = "keeps-arrivals: after the step the cell holds data and what arrived [N in 10..32, r = 0]"
    passed_over = deciding_only(monkeypatch, lambda name: name == failing)
    result = row()
    assert "cases: every N of the scope is in one of the ranges 10..32, 33..16384, 16385..32768, 32769..65536" in passed_over
    assert result.status == FAILED and result.reason == "counterexample"
    assert 17 <= result.counterexample["N"] <= 32
    assert _failed_query(result) == [failing]


def rank_one_off_from_17(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's all-gather with rank 1 alone writing the block after the
    one it read in the first message, when N >= 17: a bug the queries
    pinned to rank 0 cannot see, only the rotation of the transfer."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        wrong = ix.both(n >= 17, ix.both(s == 0, r == 1))
        return dataclasses.replace(t, dst_chunk=ix.where(wrong, ix.wrap(t.dst_chunk + 1, n), t.dst_chunk))

    return dataclasses.replace(made, transfer=transfer)


def test_the_rank_queries_are_pinned_to_rank_0_and_named_so():
    for made, words in ((proof.case_queries(16), "P = 16"), (proof.range_queries(10, 16384), "N in 10..16384")):
        names = [q.name for q in made]
        assert len(names) == 13
        # the pin is carried apart from the cases (whose contract is the cover query's)
        assert all(len(q.pin) == 1 and str(q.pin[0]) in ("r == 0", "q == 0") for q in made)
        assert all(not any(str(c) in ("r == 0", "q == 0") for c in q.case) for q in made)
        assert sum(name.endswith(f"[{words}, q = 0]") for name in names) == 3
        assert sum(name.endswith(f"[{words}, r = 0]") for name in names) == 10


def test_the_rotation_lemmas_hold_and_a_turned_rank_bug_fails_them(monkeypatch):
    with within(Row(ROW, proof.scope(), 250_000_000)):
        for query in [proof.ends_rotation_query(), *proof.turning_queries()]:
            assert decide(query).status == PROVED, query.name
    monkeypatch.setattr(nccl_pat, "pat_program", rank_one_off_from_17)
    for n in range(10, 17):
        assert check(generate("nccl-pat", "allgather", n, **OPTIONS)).ok
    assert not check(generate("nccl-pat", "allgather", 17, **OPTIONS)).ok
    with within(Row(ROW, proof.scope(), 250_000_000)):
        result = decide(proof.transfer_rotation_query())
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.counterexample["r"] == 1 and result.counterexample["s"] == 0 and result.counterexample["N"] >= 17


def test_the_invariant_turns_with_the_ranks_and_one_that_does_not_fails():
    """The decided turning of the invariant and its witness, and two
    variants that use a rank where the invariant uses an offset: each fails
    it with a counterexample."""
    with within(Row(ROW, proof.scope(), 50_000_000)):
        assert decide(proof.invariant_turning_query()).status == PROVED

    def sum_not_offset(timing, lowbit):  # c + r where the offset is c - r
        made = proof.invariant(16, timing=timing, lowbit=lowbit)

        def holds(n, s, r, c, x, k):
            o = ix.wrap(c + r, n)
            return ix.both(k == c, x == c, ix.either(o == 0, timing(o) < s))

        return dataclasses.replace(made, holds=holds)

    def witness_without_r(timing, lowbit):  # the writer lowbit(o), not r + lowbit(o)
        made = proof.invariant(16, timing=timing, lowbit=lowbit)

        def witness(n, s, r, c, *rest):
            return lowbit(ix.wrap(c - r, n)), 0 * s

        return dataclasses.replace(made, writer=witness, source=witness)

    for variant in (sum_not_offset, witness_without_r):
        with within(Row(ROW, proof.scope(), 50_000_000)):
            result = decide(proof.invariant_turning_query(make=variant))
        assert result.status == FAILED and result.reason == "counterexample", variant.__name__
        assert 10 <= result.counterexample["N"] <= proof.HIGHEST


def test_a_users_call_chooses_the_rows_options_and_a_default_branch_bug_fails_the_choice(monkeypatch):
    """The user's call (chunk and count only) takes the generator's default
    branch; its own choice functions give aggregation 8 and postFreq 1 on
    the whole scope. A wrong aggregation on that branch alone (N in 20..30)
    leaves the proved program (both options given) unchanged and fails the
    choice query, run inside the row (the rotation and case queries left out)."""
    from collspec.proofs import nccl_pat as rs

    with within(Row(ROW, proof.scope(), 10_000_000)):
        assert decide(rs.own_choice_query(proof.user_program(), 8, 1, proof.scope())).status == PROVED
    original = nccl_pat.nccl_aggregation
    monkeypatch.setattr(nccl_pat, "nccl_aggregation", lambda n, post: ix.where(ix.both(n >= 20, n <= 30), 4, original(n, post)))
    assert _plain(generate("nccl-pat", "allgather", 24, **OPTIONS)) == _plain(ORIGINAL_PROGRAM("allgather", **OPTIONS).schedule(24))
    assert "aggregation 4" in proof.user_program().title(24)
    monkeypatch.setattr(proof, "rotation_queries", lambda name: [])
    monkeypatch.setattr(proof, "case_queries", lambda p, name: [])
    result = row()
    assert result.status == FAILED and result.reason == "counterexample"
    assert _failed_query(result) == ["choice: a call with only chunk and count chooses aggregation 8 and postFreq 1 for every N of the scope"]
    assert 20 <= result.counterexample["N"] <= 30


def test_a_turned_rank_bug_from_17_fails_the_row_at_the_rotation(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", rank_one_off_from_17)
    deciding_only(monkeypatch, lambda name: name.startswith("rotation: "))
    result = row()
    assert result.status == FAILED and result.reason == "counterexample"
    assert _failed_query(result) == ["rotation: rank r's transfer is rank 0's turned by r (destination and cells + r mod N)"]
    assert result.counterexample["r"] == 1 and result.counterexample["N"] >= 17


def _plain(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


def test_the_invariant_turns_with_the_ranks_at_concrete_n():
    """What the invariant-turning query decides (with T and lowbit free),
    checked on numbers with NCCL's T: every rank's claim is rank 0's
    turned, at every step, for N = 17 and 40."""
    for n in (17, 40):
        p = int(nccl_pat.pow2_above(n))
        inv = proof.invariant(p)
        r, c = np.meshgrid(*[np.arange(n, dtype=np.int64)] * 2, indexing="ij")
        zero = 0 * r
        for s in range(int(proof.program().steps(n)) + 1):
            s = np.int64(s)
            for x, k in ((c, c), (c, (c + 1) % n), ((c + 3) % n, c)):
                assert (inv.holds(n, s, r, c, x, k) == inv.holds(n, s, zero, (c - r) % n, (x - r) % n, (k - r) % n)).all()
            assert (inv.defined(n, s, r, c) == inv.defined(n, s, zero, (c - r) % n)).all()
            wq, wj = inv.writer(n, s, r, c)
            wq0, wj0 = inv.writer(n, s, zero, (c - r) % n)
            assert (wq == (wq0 + r) % n).all() and (np.asarray(wj) == np.asarray(wj0)).all()
