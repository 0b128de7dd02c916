"""The bug zoo: each buggy user-style backend is caught with the right kind.

Each test runs real rank processes (4 ranks, gloo underneath) on a few
chosen cases and asserts the exact violation: kind, ranks and element. After
each, no process of the run may be left (hangs and crashes included).
"""

from __future__ import annotations

import pytest

from collspec.conformance import runner
from collspec.conformance.conform import conform
from conformance_support import ZOO, by_kind, helper_alive, leftover_processes

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    assert leftover_processes() == []


def run(target: str, collective="allreduce", dtype="int32", ops=("sum",), sizes=(5,), **options):
    return conform(str(ZOO / target), 4, "default", collectives=[collective], dtypes=[dtype], ops=list(ops),
                   sizes=list(sizes), **options)


def test_a_dropped_rank_is_a_missing_contribution():
    result = run("drops_rank.py:DropsRank")
    (violation,) = result.violations
    assert violation.kind == "missing-contribution"
    assert violation.details["contributors"] == [3] and violation.details["element"] == 0
    assert violation.details["ranks"] == [0, 1, 2, 3]
    assert result.report().exit_code == 1


def test_a_rank_counted_twice_is_a_duplicate_contribution():
    result = run("counts_twice.py:CountsTwice", dtype="float16")
    kinds = by_kind(result)
    (violation,) = kinds.pop("duplicate-contribution")
    assert violation.details["contributors"] == [0] and violation.details["element"] == 0
    assert violation.details["case"].endswith("/tally/seed=0")
    # the rounding inputs of the same case do not decode: their sum is simply wrong
    assert [v.details["case"].split("/")[-2] for v in kinds.pop("wrong-value")] == ["rounding"]
    assert not kinds


def test_reduce_scatter_slices_on_the_wrong_ranks_are_misplaced_blocks():
    result = run("wrong_slices.py:WrongSlices", collective="reduce_scatter", sizes=(8,))
    violations = result.violations
    assert {v.kind for v in violations} == {"postcondition"}
    # out of place and in place, every rank: rank r holds rank r+1's block
    assert sorted((v.details["inplace"], v.details["ranks"][0], v.details["holds_block"]) for v in violations) == sorted(
        (inplace, r, (r + 1) % 4) for inplace in (False, True) for r in range(4))


def test_ranks_adding_in_different_orders_disagree_in_their_bits_only():
    result = run("order_differs.py:OrderDiffers", dtype="float32", sizes=(4099,))
    (violation,) = result.violations
    assert violation.kind == "ranks-disagree"
    assert violation.details["case"].endswith("/rounding/seed=0")
    assert sorted(r for group in violation.details["groups"] for r in group) == [0, 1, 2, 3]
    assert result.counts()["pass"] == 1  # the exact tally inputs agree in every order


def test_avg_over_the_wrong_n_is_a_wrong_value_with_its_bound():
    result = run("avg_wrong_n.py:AvgWrongN", dtype="float32", ops=("avg",))
    assert [v.kind for v in result.violations] == ["wrong-value", "wrong-value"]  # integer and rounding inputs
    for violation in result.violations:
        details = violation.details
        assert details["got"] == pytest.approx(details["expected"] * 4 / 3, rel=1e-5)
        assert 0 < details["bound"] < abs(details["got"] - details["expected"])


def test_a_forgotten_remainder_fails_only_when_n_does_not_divide_the_count():
    result = run("forgets_remainder.py:ForgetsRemainder", sizes=(8, 7))
    assert [o.status for o in result.outcomes] == ["pass", "fail"]
    kinds = by_kind(result)
    assert sorted(kinds) == ["missing-contribution", "ranks-disagree"]
    # each rank kept its own tail: it misses the three others, from element 4 (7 - 7 % 4) on
    assert sorted((v.details["ranks"][0], tuple(v.details["contributors"]), v.details["element"]) for v in kinds["missing-contribution"]) == [
        (r, tuple(x for x in range(4) if x != r), 4) for r in range(4)]
    assert kinds["ranks-disagree"][0].details["element"] == 4


def test_a_hang_on_size_zero_names_the_waiting_ranks_and_the_run_goes_on():
    result = run("hangs_on_zero.py:HangsOnZero", sizes=(0, 5), timeout=3)
    assert [o.status for o in result.outcomes] == ["hang", "pass"]
    (violation,) = result.violations
    assert violation.kind == "hang" and violation.details["ranks"] == [1, 2, 3]
    assert violation.details["size"] == 0
    assert result.result.restarts == 1


def test_a_dead_rank_is_a_crash_naming_it_and_its_signal():
    result = run("crashes_rank.py:CrashesRank", sizes=(5, 1009, 8))
    assert [o.status for o in result.outcomes] == ["pass", "crash", "pass"]
    (violation,) = result.violations
    assert violation.kind == "crash" and violation.details["ranks"] == [2]
    assert violation.details["how"] == "signal SIGSEGV" and violation.details["size"] == 1009


def test_an_ignored_op_is_a_wrong_value_for_every_op_but_sum():
    result = run("ignores_op.py:IgnoresOp", ops=("sum", "max", "prod", "min"))
    assert {o.case.op: o.status for o in result.outcomes} == {"sum": "pass", "max": "fail", "prod": "fail", "min": "fail"}
    assert {v.kind for v in result.violations} == {"wrong-value"}


def test_after_too_many_hangs_the_remaining_cases_are_not_run_with_that_reason(monkeypatch):
    monkeypatch.setattr(runner, "MAX_RESTARTS", 1)
    result = run("hangs_on_zero.py:HangsOnZero", sizes=(0,), ops=("sum", "max", "min", "prod"), timeout=3)
    assert [o.status for o in result.outcomes] == ["hang", "hang", "not-run", "not-run"]
    assert result.result.restarts == 1 and result.report().stats["not_run"] == 2
    assert {o.note for o in result.outcomes[2:]} == {
        "not run: the ranks hung 2 times, the limit of restarts after a hang (1)"}
    assert [c["reason"] for c in result.report().extra["cases"][2:]] == [result.outcomes[2].note] * 2


def test_crashes_cost_no_restart_budget_every_case_gets_a_verdict(monkeypatch):
    monkeypatch.setattr(runner, "MAX_RESTARTS", 0)
    result = run("crashes_rank.py:CrashesRank", sizes=(1009, 2000, 5, 3000))
    assert [o.status for o in result.outcomes] == ["crash", "crash", "pass", "crash"]
    assert result.result.restarts == 3 and result.report().stats["not_run"] == 0


def test_an_exception_fails_its_case_only_and_names_the_ranks_that_raised():
    result = run("raises_on_large.py:RaisesOnLarge", sizes=(5, 1009, 8, 2000, 3))
    assert [o.status for o in result.outcomes] == ["pass", "crash", "pass", "crash", "pass"]
    assert result.result.restarts == 0  # every rank returned: nothing to restart
    for violation, size in zip(result.violations, (1009, 2000)):
        assert violation.kind == "crash" and violation.details["ranks"] == [1, 3] and violation.details["size"] == size
        assert violation.details["reason"].startswith("RuntimeError: The size of tensor a (1000) must match the size of tensor b")
        assert violation.message.startswith(f"allreduce/int32/sum/n={size}/inplace/tally/seed=0: rank(s) 1, 3 raised RuntimeError: ")
    assert result.report().exit_code == 1


def write_backend(tmp_path, condition: str) -> str:
    """A backend whose all-reduce raises, before communicating, where ``condition`` holds."""
    path = tmp_path / "raising.py"
    path.write_text(
        "import torch.distributed as dist\n\n"
        "class Raising:\n"
        "    def __init__(self, rank, world_size):\n        self.rank = rank\n\n"
        "    def all_reduce(self, tensor, op='sum'):\n"
        f"        if {condition}:\n            raise RuntimeError('ring buffer exhausted')\n"
        "        dist.all_reduce(tensor)\n"
    )
    return f"{path}:Raising"


def test_every_rank_raising_before_communicating_restarts_nothing(tmp_path):
    result = conform(write_backend(tmp_path, "tensor.numel() == 5"), 4, "default", collectives=["allreduce"],
                     dtypes=["int32"], ops=["sum"], sizes=[5, 8])
    assert [o.status for o in result.outcomes] == ["crash", "pass"]
    (violation,) = result.violations
    assert violation.details["ranks"] == [0, 1, 2, 3] and result.result.restarts == 0
    assert violation.message == "allreduce/int32/sum/n=5/inplace/tally/seed=0: rank(s) 0, 1, 2, 3 raised RuntimeError: ring buffer exhausted"


def test_a_rank_that_raises_while_its_peers_wait_is_a_crash_and_they_restart(tmp_path):
    result = conform(write_backend(tmp_path, "self.rank == 1 and tensor.numel() == 5"), 4, "default",
                     collectives=["allreduce"], dtypes=["int32"], ops=["sum"], sizes=[5, 8], timeout=3)
    assert [o.status for o in result.outcomes] == ["crash", "pass"]
    (violation,) = result.violations
    assert violation.kind == "crash" and violation.details["ranks"] == [1] and violation.details["waiting"] == [0, 2, 3]
    assert violation.message == ("allreduce/int32/sum/n=5/inplace/tally/seed=0: rank(s) 1 raised RuntimeError: ring buffer exhausted; "
                                 "rank(s) 0, 2, 3 did not finish within 3 s (waiting in the collective for them)")
    assert result.result.restarts == 1  # the waiting ranks hang: only they need the restart


def run2(target: str, sizes=(5,), **options):
    """Two ranks, float32 sum all-reduce: enough for the faults below."""
    return conform(str(ZOO / target), 2, "default", collectives=["allreduce"], dtypes=["float32"], ops=["sum"],
                   sizes=list(sizes), **options)


def test_a_rank_that_exits_with_status_0_in_the_middle_of_a_call_is_named():
    result = run2("exits_quietly.py:ExitsQuietly", timeout=30)
    assert [o.status for o in result.outcomes] == ["crash", "crash"]  # restarted, and it does it again
    for violation in result.violations:
        assert violation.kind == "crash" and violation.details["ranks"] == [1]
        assert violation.details["how"] == "exit code 0 before its cases were done"
        assert violation.message.startswith("rank 1 died (exit code 0 before its cases were done) during allreduce/float32/sum/n=5/")


def test_each_rank_that_raised_is_reported_with_its_own_error():
    result = run2("raises_differently.py:RaisesDifferently")
    assert [o.status for o in result.outcomes] == ["crash", "crash"]
    violation = result.violations[0]
    assert violation.details["ranks"] == [0, 1]
    assert violation.details["errors"] == {0: "ValueError: buffer of 5 elements is not 16-byte aligned",
                                           1: "ConnectionError: rank 1: link to rank 0 is down"}
    assert violation.message == ("allreduce/float32/sum/n=5/inplace/tally/seed=0: rank(s) 0 raised ValueError: buffer of 5 "
                                 "elements is not 16-byte aligned; rank(s) 1 raised ConnectionError: rank 1: link to rank 0 is down")


def test_a_helper_that_scrubbed_its_environment_and_left_the_session_does_not_outlive_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLSPEC_ZOO_PIDS", str(tmp_path))
    result = run2("escapes_session.py:EscapesSession")
    assert [o.status for o in result.outcomes] == ["pass", "pass"]
    helpers = [int((tmp_path / f"helper.{rank}").read_text()) for rank in (0, 1)]
    assert [pid for pid in helpers if helper_alive(pid)] == []
