"""nccl-pat's all-N rows (:mod:`collspec.proofs.nccl_pat`, ``--full`` only):
their scopes, the program they prove, the restated order against the built
schedule, and bugs planted in nccl-pat's transfer function that fail them
with a counterexample. The per-N checks of small N miss each bug: that is
why the all-N rows exist. A planted-bug test builds the whole row and, where
the row is heavy, decides under Z3 only the query where its bug shows
(:func:`proof_results.deciding_only`): the unchanged program's proof is
``collspec prove --full``'s."""

from __future__ import annotations


import numpy as np
import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_pat
from collspec.proofs import nccl_pat as proof
from collspec.proofs.solver import FAILED
from collspec.proofs.suite import run_proof, suite
from pat_mutations import last_message_again, one_on
from proof_results import deciding_only

ORIGINAL_PROGRAM = nccl_pat.pat_program
ORIGINAL_REVERSE = nccl_pat._reverse
RS = "nccl-pat.reduce_scatter-exactly-once"
BELOW = proof.BELOW
POSTFREQ_2 = proof.POSTFREQ_2
POSTFREQ_4 = proof.POSTFREQ_4
ORIGINAL_STEPS_PER_LOOP = nccl_pat.steps_per_loop
ADDS_NEW = "adds-new: a reduce brings nothing the cell already holds [r = 0]"


def row(name, full=True):
    (found,) = [p for p in suite(full=full) if p.name == name]
    return run_proof(found)


def one_message_too_many_from_17(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program with one message more per run when N >= 17: the
    last message sent again (a step too many)."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)

    return last_message_again(made, lambda n: n >= 17)


def one_message_too_many_below_aggregation_8(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program with one message more per run when its
    aggregation is below 8 (NCCL's choice below 10 ranks): the last message
    sent again. Where the aggregation is 8 the program is unchanged."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)

    def below_8(n):
        return (nccl_pat.nccl_aggregation(n, 1 if post is None else post) if aggregation is None else aggregation) < 8

    return last_message_again(made, below_8)


def last_message_again_at_7_by_nccls_choice(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program with a bug only where the generator makes NCCL's
    choice itself (no aggregation or postFreq given, as a user's call with
    a chunk and count): at N = 7, inside the run 6..8 of the row below 10,
    the last message is sent again. With aggregation and postFreq given
    (the programs the runs prove) it is the unchanged program."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)
    if aggregation is not None or post is not None:
        return made

    return last_message_again(made, lambda n: n == 7)


def without_the_one_message_scales(n, aggregation, post):
    """steps_per_loop that forgets the scale steps of one message each
    (scales 2**k with k >= log2(A / postFreq)): there are none at postFreq 1."""
    q = ix.floordiv(aggregation, post)
    return ORIGINAL_STEPS_PER_LOOP(n, aggregation, post) - (nccl_pat._log2(aggregation) - nccl_pat._log2(q))


def mirror_of_two_bits(x, width):
    """mirrorInvert over at most 2 bits: right while a step has at most 4
    messages (aggregation <= 4), wrong from aggregation 8."""
    return ORIGINAL_REVERSE(x, ix.where(width > 4, 4, width))


def test_rows_are_full_only_with_their_options_in_the_scope():
    rows = {p.name: p.scope for p in suite(full=True) if p.name in proof.OPTIONS}
    assert rows == {
        RS: "all N in 10..65536, aggregation 8, postFreq 1, chunk 1, count 1",
        BELOW: "all N in 2..9, NCCL's aggregation 1 (N 2..3), 2 (N 4..5), 4 (N 6..9), postFreq 1, chunk 1, count 1",
        POSTFREQ_2: "all N in 2..65536, NCCL's aggregation 1 (N 2..3), 2 (N 4..5), 4 (N 6..9), 8 (N 10..17), 16 (N 18..65536), "
                    "NCCL's postFreq 1 (N 2..3), 2 (N 4..65536), chunk 2, count 1",
        POSTFREQ_4: "all N in 2..65536, NCCL's aggregation 1 (N 2..3), 2 (N 4..5), 4 (N 6..9), 8 (N 10..17), 16 (N 18..33), 32 (N 34..65536), "
                    "NCCL's postFreq 1 (N 2..3), 2 (N 4..5), 4 (N 6..65536), chunk 4, count 1",
    }
    assert not [p for p in suite() if p.name.startswith("nccl-pat.")]


def test_the_proved_program_is_the_generators_at_the_scope_options():
    rows = {p.name: p for p in suite(full=True)}
    for name, (collective, options, (low, high)) in proof.OPTIONS.items():
        made = proof.program(name)
        assert made.meta == {**options, "dtype": "float32"}
        # each run's first and last N, and N = 33 and 40 of the run with P a term of N (the choice query covers every N of a run)
        for n in (10, 17) if name == RS else sorted({n for lo, hi, p, *_ in proof.cases(name) for n in ((lo, hi) if p else (lo, 33, 40))}):
            fixed = rows[name].premises.fixed(n)
            post = options["post"] or int(nccl_pat.post_frequency(n, options["chunk"], options["count"]))
            assert fixed == {**options, "aggregation": options["aggregation"] or int(nccl_pat.nccl_aggregation(n, post)), "post": post}
            assert _plain(made.schedule(n)) == _plain(generate("nccl-pat", collective, n, **fixed))
            # NCCL 2.30's own choice at the row's chunk and count (no aggregation or post given)
            assert _plain(made.schedule(n)) == _plain(generate("nccl-pat", collective, n, chunk=options["chunk"], count=options["count"]))
    for name in (BELOW, POSTFREQ_2, POSTFREQ_4):  # the program each run proves: the same schedules
        for lo, hi, p, a, f in proof.cases(name):
            for n in {lo, hi} if p else {lo, 40}:
                assert _plain(proof.program(name, a, f).schedule(n)) == _plain(proof.program(name).schedule(n))


def test_the_case_splits_cover_their_ranges_with_the_generators_p_aggregation_and_postfreq():
    """The case split of a row with NCCL's own choices: runs of N with one
    P, aggregation and postFreq (restated), equal to the generator's."""
    assert proof.cases(BELOW) == ((2, 2, 2, 1, 1), (3, 3, 4, 1, 1), (4, 4, 4, 2, 1), (5, 5, 8, 2, 1), (6, 8, 8, 4, 1), (9, 9, 16, 4, 1))
    assert proof.cases(RS) == ()
    # from 18 ranks on, one run with P a term of N (aggregation 16, postFreq 2 up to 65536)
    assert proof.cases(POSTFREQ_2) == ((2, 2, 2, 1, 1), (3, 3, 4, 1, 1), (4, 4, 4, 2, 2), (5, 5, 8, 2, 2), (6, 8, 8, 4, 2), (9, 9, 16, 4, 2),
                                       (10, 16, 16, 8, 2), (17, 17, 32, 8, 2), (18, 65536, None, 16, 2))
    # chunk 4: postFreq 4 from 6 ranks, aggregation 32 (one run with P a term of N) from 34
    assert proof.cases(POSTFREQ_4)[4:] == ((6, 8, 8, 4, 4), (9, 9, 16, 4, 4), (10, 16, 16, 8, 4), (17, 17, 32, 8, 4), (18, 32, 32, 16, 4),
                                           (33, 33, 64, 16, 4), (34, 65536, None, 32, 4))
    edges = {v + e for b in range(17) for v in (1 << b,) for e in (-2, -1, 0, 1, 2)}  # where P, aggregation or postFreq can change
    for name in (BELOW, POSTFREQ_2, POSTFREQ_4):
        _, options, (low, high) = proof.OPTIONS[name]
        runs = proof.cases(name)
        assert [n for lo, hi, *_ in runs for n in range(lo, hi + 1)] == list(range(low, high + 1))
        for lo, hi, p, a, f in runs:
            for n in range(lo, hi + 1):
                if n > 64 and n not in edges:
                    continue
                post = options["post"] or int(nccl_pat.post_frequency(n, options["chunk"], options["count"]))
                assert (p or int(nccl_pat.pow2_above(n)), a, f) == (int(nccl_pat.pow2_above(n)), int(nccl_pat.nccl_aggregation(n, post)), post)
    assert {a for *_, a, f in proof.cases(POSTFREQ_2) if f == 2} == {2, 4, 8, 16}
    assert {a for *_, a, f in proof.cases(POSTFREQ_4) if f == 4} == {4, 8, 16, 32}


def test_the_restated_order_is_the_built_schedules():
    """The invariant's send order (T(o), each message's distance, each
    block's place in its message) against the messages the generator builds."""
    cases = [(RS, n, None, proof.AGGREGATION, 1) for n in (10, 17, 33)]
    cases += [(name, n, p, a, f) for name in (BELOW, POSTFREQ_2) for lo, hi, p, a, f in proof.cases(name) for n in (range(lo, hi + 1) if p else (18, 32, 33, 40, 64))]
    cases += [(POSTFREQ_4, n, p, a, f) for lo, hi, p, a, f in proof.cases(POSTFREQ_4) for n in (sorted({lo, hi}) if p else (34, 40, 64, 65))]
    for name, n, p, a, f in cases:
        made = proof.program(name, *((a, f) if name != RS else ()))
        ranks = np.arange(n, dtype=np.int64)
        sent = 0
        for t in range(int(made.steps(n))):
            for j in range(int(made.width(n))):
                moved = made.transfer(np.int64(n), np.int64(t), ranks, np.int64(j))
                active = np.broadcast_to(np.asarray(moved.active, dtype=bool), ranks.shape)
                src, dst, c = ranks[active], np.broadcast_to(moved.dst, ranks.shape)[active], np.broadcast_to(moved.src_chunk, ranks.shape)[active]
                offset = (c - src) % n
                sent += len(src)
                assert (proof.send_step(np.int64(n), offset, p, a, f) == t).all(), (name, n, t, j)
                assert (proof.place(np.int64(n), offset, p, a, f) == j).all(), (name, n, t, j)
                assert ((dst - src) % n == int(proof.distance(np.int64(n), np.int64(t), p, a, f)) % n).all(), (name, n, t, j)
        assert sent == n * (n - 1)  # every partial but the own block's leaves its rank once


def _plain(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


def _failed_query(result):
    return [q for q, status, _ in result.queries if status == FAILED]


def test_one_message_too_many_from_17_fails_the_reduce_scatter_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", one_message_too_many_from_17)
    options = proof.OPTIONS[RS][1]
    for n in (10, 16):
        assert check(generate("nccl-pat", "reduce_scatter", n, **options)).ok  # the per-N check up to 16 cannot see it
    assert not check(generate("nccl-pat", "reduce_scatter", 17, **options)).ok
    assert row("builtin.nccl-pat", full=False).ok  # the default bounded row (N <= 6) passes
    deciding_only(monkeypatch, lambda name: name == ADDS_NEW)
    result = row(RS)
    assert result.status == FAILED and result.counterexample["N"] >= 17
    assert _failed_query(result) == [ADDS_NEW]


def test_mirror_over_two_bits_passes_aggregation_4_and_fails_the_all_n_rows(monkeypatch):
    monkeypatch.setattr(nccl_pat, "_reverse", mirror_of_two_bits)
    for n in range(2, 10):  # NCCL's aggregation is at most 4 here: the bug cannot show
        assert check(generate("nccl-pat", "reduce_scatter", n, chunk=1, count=1)).ok
    assert check(generate("nccl-pat", "reduce_scatter", 17, aggregation=4, post=1, chunk=1, count=1)).ok
    assert not check(generate("nccl-pat", "reduce_scatter", 17, chunk=1, count=1)).ok
    assert row("builtin.nccl-pat", full=False).ok  # the default bounded row (N <= 6, aggregation <= 4) passes
    deciding_only(monkeypatch, lambda name: name == ADDS_NEW)
    result = row(RS)
    assert result.status == FAILED and result.counterexample["N"] >= 10
    assert _failed_query(result) == [ADDS_NEW]


#: from N = 17, rank 1 alone sends each message to the rank after its peer: every other rank is unchanged
rank_1_sends_one_rank_too_far_from_17 = one_on("dst", lambda n, s, r, j: ix.both(n >= 17, r == 1), ORIGINAL_PROGRAM)


def test_a_bug_only_in_rank_1_from_17_fails_the_reduce_scatter_row_at_the_rotation_query(monkeypatch):
    """The induction is decided at rank 0 only: a bug in another rank's
    transfer must fail the rotation query that carries it to every rank."""
    monkeypatch.setattr(nccl_pat, "pat_program", rank_1_sends_one_rank_too_far_from_17)
    options = proof.OPTIONS[RS][1]
    assert check(generate("nccl-pat", "reduce_scatter", 16, **options)).ok
    assert not check(generate("nccl-pat", "reduce_scatter", 17, **options)).ok
    deciding_only(monkeypatch, lambda name: name.startswith("rotation: "))
    result = row(RS)
    assert result.status == FAILED and result.counterexample["N"] >= 17
    assert _failed_query(result) == ["rotation: rank r's transfer is rank 0's turned by r (destination and cells + r mod N)"]


def test_one_message_too_many_below_aggregation_8_fails_the_below_10_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", one_message_too_many_below_aggregation_8)
    for n in (10, 17):  # at aggregation 8 the program is the unchanged one
        assert _plain(generate("nccl-pat", "reduce_scatter", n, chunk=1, count=1)) == _plain(ORIGINAL_PROGRAM("reduce_scatter", chunk=1, count=1).schedule(n))
    assert not check(generate("nccl-pat", "reduce_scatter", 9, chunk=1, count=1)).ok  # aggregation 4
    deciding_only(monkeypatch, lambda name: name.startswith("adds-new: "))
    result = row(BELOW)
    assert result.status == FAILED and 2 <= result.counterexample["N"] <= 9
    assert _failed_query(result)[0].startswith("adds-new: a reduce brings nothing the cell already holds [N in ")


def test_a_loop_without_its_one_message_scales_fails_the_postfreq_2_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "steps_per_loop", without_the_one_message_scales)
    for n in (10, 17):  # at postFreq 1 the program is the unchanged one
        assert _plain(generate("nccl-pat", "reduce_scatter", n, chunk=1, count=1)) == _plain(ORIGINAL_PROGRAM("reduce_scatter", chunk=1, count=1).schedule(n))
    assert check(generate("nccl-pat", "reduce_scatter", 9, chunk=1, count=1)).ok
    assert not check(generate("nccl-pat", "reduce_scatter", 4, chunk=2, count=1)).ok  # postFreq 2
    deciding_only(monkeypatch, lambda name: name.startswith("end: "))
    result = row(POSTFREQ_2)
    assert result.status == FAILED and result.counterexample["N"] == 4
    assert _failed_query(result) == ["end: after the last step every output cell holds exactly its collective's contributions [N in 4..4: P 4, aggregation 2, postFreq 2, r = 0]"]


def test_runs_that_leave_out_an_n_fail_the_row_at_the_cover_query(monkeypatch):
    """A run left out would leave its N unproved: the cover query fails
    with that N as its counterexample, before any case is tried."""
    runs = proof.cases(BELOW)
    monkeypatch.setattr(proof, "cases", lambda name: tuple(r for r in runs if r[0] != 5))
    result = row(BELOW)
    assert result.status == FAILED and result.counterexample["N"] == 5
    assert _failed_query(result) == ["cases: the runs of N cover the row's N range"]


def test_a_run_with_another_aggregation_than_the_generators_fails_the_choice_query(monkeypatch):
    """A run whose aggregation is not the generator's own choice would
    prove another program than the one NCCL's options build: the choice
    query fails with an N of that run."""
    runs = proof.cases(POSTFREQ_2)
    monkeypatch.setattr(proof, "cases", lambda name: tuple((lo, hi, p, 8 if (lo, hi) == (18, 65536) else a, f) for lo, hi, p, a, f in runs))
    result = row(POSTFREQ_2)
    assert result.status == FAILED and 18 <= result.counterexample["N"] <= 65536
    assert _failed_query(result) == ["choice: in each run the generator's own aggregation and postFreq are the run's"]


def _run_6_to_8_bug(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", last_message_again_at_7_by_nccls_choice)
    assert (6, 8, 8, 4, 1) in proof.cases(BELOW)
    assert not check(generate("nccl-pat", "reduce_scatter", 7, chunk=1, count=1)).ok  # the user's call is wrong at 7
    for n in (6, 8):  # and right at the run's ends, where the schedules are compared
        assert _plain(generate("nccl-pat", "reduce_scatter", n, chunk=1, count=1)) == _plain(ORIGINAL_PROGRAM("reduce_scatter", chunk=1, count=1).schedule(n))
    for a, f in ((4, 1), (None, 1)):  # the programs the row's runs build are the unchanged ones
        assert _plain(proof.program(BELOW, a, f).schedule(7)) == _plain(ORIGINAL_PROGRAM("reduce_scatter", a, 1, 1, f).schedule(7))


def test_the_same_query_fails_where_only_the_users_call_is_wrong(monkeypatch):
    """The query that the program of a user's call (chunk and count, NCCL's
    choice left to the generator) is the run's program, alone: it fails
    with the N inside the run where only that call is wrong."""
    import z3

    from collspec.models.program import BITVEC_WIDTH
    from collspec.proofs.solver import decide

    _run_6_to_8_bug(monkeypatch)
    n = z3.BitVec("N", BITVEC_WIDTH)
    same = proof._same(BELOW, 4, 1, proof.scope(BELOW).assertions({"N": n}), z3.And(n >= 6, n <= 8), "N in 6..8")
    result = decide(same)
    assert result.status == FAILED and result.counterexample["N"] == 7
    monkeypatch.setattr(nccl_pat, "pat_program", ORIGINAL_PROGRAM)
    assert decide(proof._same(BELOW, 4, 1, proof.scope(BELOW).assertions({"N": n}), z3.And(n >= 6, n <= 8), "N in 6..8")).ok


def test_a_bug_only_in_the_users_call_inside_a_run_fails_the_below_10_row(monkeypatch):
    """The runs prove programs with aggregation and postFreq given; a bug
    only in the path that makes NCCL's choice (what a user's call runs),
    inside a run, fails the row at that run's same query with its N."""
    _run_6_to_8_bug(monkeypatch)
    result = row(BELOW)
    assert result.status == FAILED and result.counterexample["N"] == 7
    assert _failed_query(result) == ["same: the program NCCL's options build is the run's [N in 6..8: aggregation 4, postFreq 1]"]


def test_the_generators_aggregation_off_inside_a_run_fails_the_postfreq_2_row_at_the_choice_query(monkeypatch):
    """nccl_aggregation giving 8 instead of 16 for N in 20..30 (inside the
    run 18..65536; a correct PAT schedule, but not NCCL's): the row names
    NCCL's aggregation 16 there, so it fails at the choice query with such an N."""
    original = nccl_pat.nccl_aggregation
    monkeypatch.setattr(nccl_pat, "nccl_aggregation", lambda n, post: ix.where(ix.both(n >= 20, n <= 30), 8, original(n, post)))
    assert "aggregation 8," in proof.user_program(POSTFREQ_2).title(24)
    result = row(POSTFREQ_2)
    assert result.status == FAILED and 20 <= result.counterexample["N"] <= 30
    assert _failed_query(result) == ["choice: in each run the generator's own aggregation and postFreq are the run's"]


def test_a_default_branch_aggregation_bug_fails_the_aggregation_8_row_at_its_choice_query(monkeypatch):
    """The aggregation-8 row proves the program with aggregation 8 and
    postFreq 1 given; a user's call with chunk 1, count 1 takes the
    generator's default branch. Its aggregation wrong (4) for N in 20..30
    leaves the proved program unchanged (the per-N check of the given
    options passes) and fails the row at the query on the user's program's
    own choice functions (the induction left out, so the test is cheap)."""
    from collspec.proofs import induction

    original = nccl_pat.nccl_aggregation
    monkeypatch.setattr(nccl_pat, "nccl_aggregation", lambda n, post: ix.where(ix.both(n >= 20, n <= 30), 4, original(n, post)))
    assert "aggregation 4," in proof.user_program(RS).title(24)
    assert "aggregation 8," in proof.program(RS).title(24)
    monkeypatch.setattr(induction, "queries", lambda program, invariant: [])
    result = row(RS)
    assert result.status == FAILED and result.reason == "counterexample" and 20 <= result.counterexample["N"] <= 30
    assert _failed_query(result) == ["choice: a call with only chunk and count chooses aggregation 8 and postFreq 1 for every N of the scope"]
    monkeypatch.setattr(nccl_pat, "nccl_aggregation", original)
    assert row(RS).status == "proved"
