"""impl's executors and the shm kernel, run for real on gloo.

One group of 4 spawned processes runs every case (fewer ranks run on the
sub-group of ranks 0..n-1), so process start-up is paid once; see
``impl_cases`` for how results are checked against the spec, the models
interpreter and the checker.
"""

from __future__ import annotations

import os
import time

import pytest

from collspec.impl.trace import check_traces
from collspec.models.generators import ALGORITHMS

from impl_cases import SCHEDULE_BACKENDS, Case, interpreted, kill_mid_collective, run_cases, spec_problem
from impl_harness import run_ranks, values

SIZES = (0, 1, 7, 1000)
BIG = 1 << 20
DTYPES = ("int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64")
OPS = ("sum", "prod", "min", "max", "avg")


def _root(collective: str, n: int) -> int:
    return n - 1 if collective in ("broadcast", "reduce") else 0


# every algorithm x collective x world size x size, int and float, traced
MATRIX = [
    Case(algorithm, collective, n, count, dtype, record=dtype == "float32", root=_root(collective, n))
    for algorithm in SCHEDULE_BACKENDS
    for collective in ALGORITHMS[algorithm]
    for n in (1, 2, 3, 4)
    for count in SIZES
    for dtype in ("int32", "float32")
]
# every dtype x op, on the reducing schedules
OPS_DTYPES = [
    Case(algorithm, collective, n, count, dtype, op, root=_root(collective, n))
    for algorithm, collective, n, count in (("ring", "allreduce", 3, 7), ("ring", "reduce_scatter", 4, 250), ("halving-doubling", "allreduce", 3, 1000), ("direct", "reduce", 4, 7))
    for dtype in DTYPES
    for op in OPS
]
# 2**20 elements
LARGE = [Case("ring", "allreduce", n, BIG, dtype, record=True) for n in (1, 2, 3, 4) for dtype in ("int32", "float32")] + [
    Case("ring", "reduce_scatter", 4, BIG // 4, record=True),
    Case("ring", "allgather", 4, BIG // 4, record=True),
    Case("halving-doubling", "allreduce", 3, BIG, record=True),
]
# in place (nccl convention) and non-contiguous tensors
INPLACE = [Case(algorithm, collective, n, count, "float32", inplace=True) for algorithm, collective in (("ring", "reduce_scatter"), ("halving-doubling", "reduce_scatter"), ("ring", "allgather"), ("recursive-doubling", "allgather")) for n in (3, 4) for count in (7, 1000)]
STRIDED = [Case("ring", "allreduce", 3, 1000, strided=True), Case("binary-tree", "allreduce", 4, 7, "int64", "max", strided=True)]
SHM = (
    [Case(b, "allreduce", n, count, "float32") for b in ("shm-one-shot", "shm-two-shot") for n in (1, 2, 3, 4) for count in SIZES + (BIG,)]
    + [Case(b, "allreduce", 3, 1000, dtype, op) for b in ("shm-one-shot", "shm-two-shot") for dtype in DTYPES for op in OPS]
    + [Case("shm", collective, n, count, "bfloat16") for collective in ("reduce_scatter", "allgather") for n in (3, 4) for count in (0, 7, 1000, BIG // 4)]
    + [Case("shm", "allreduce", 4, count, "float16", "avg") for count in (1000, BIG)]
    + [Case(b, "allreduce", n, count, dtype, op) for b in ("shm-numpy", "shm-numpy-two-shot") for n in (3, 4) for count in (7, BIG) for dtype, op in (("float32", "sum"), ("int32", "max"))]
    + [Case("shm-dist-barrier", "allreduce", 3, 1000), Case("shm-small-slots", "allreduce", 4, 1000, "float64"), Case("shm-small-slots", "reduce_scatter", 3, 100, "int8", "avg"), Case("shm-small-slots", "allgather", 2, 100, "uint8")]
)
WRONG_HOP = Case("wrong-hop", "allreduce", 4, 1000, record=True)

CASES = MATRIX + OPS_DTYPES + LARGE + INPLACE + STRIDED + SHM + [WRONG_HOP]


@pytest.fixture(scope="module")
def outcome():
    """{case index: [per rank (output, input kept, traces)]} from one run of
    every case; rank 0 holds all ranks' traces (gathered with trace.gather)."""
    started = time.perf_counter()
    per_rank = values(run_ranks(4, run_cases, CASES, timeout=240))  # within pytest's 300 s
    print(f"{len(CASES)} cases on 4 ranks in {time.perf_counter() - started:.1f} s")
    out = {i: [per_rank[r][i] for r in range(case.ranks)] for i, case in enumerate(CASES)}
    out["shm segments"] = per_rank[0]["shm segments"]
    return out


def _failures(outcome, cases, problem) -> list[str]:
    """``problem(case, rank, result)`` for every rank of every case in ``cases``;
    ranks whose outputs are identical bits (and identical expectations, as in
    all-reduce) are judged once."""
    out = []
    for i, case in enumerate(CASES):
        if case not in cases:
            continue
        judged: dict[bytes, str | None] = {}
        for rank, result in enumerate(outcome[i]):
            same_for_all = case.collective in ("allreduce", "allgather", "broadcast")
            key = result[0].tobytes() + bytes([result[1]])
            why = judged[key] if same_for_all and key in judged else problem(case, rank, result)
            judged[key] = why
            if why:
                out.append(f"{case.label()} rank {rank}: {why}")
    return out


def test_results_equal_the_spec(outcome):
    cases = set(CASES) - {WRONG_HOP}
    failures = _failures(outcome, cases, lambda case, rank, result: spec_problem(case, rank, result[0]))
    assert not failures, "\n".join(failures[:20])


def test_results_equal_the_models_interpreter_bit_for_bit(outcome):
    """The executor performs the schedule's additions in the schedule's order:
    every rank's bits are the interpreter's (floats rounded per hop)."""
    cases = {c for c in CASES if c.backend in SCHEDULE_BACKENDS and not (c.op == "avg" and c.dtype.startswith(("int", "uint")))}
    expected = {c: interpreted(c) for c in cases}

    def problem(case, rank, result):
        want = expected[case][rank]
        if want is None:
            return None
        return None if result[0].tobytes() == want.tobytes() else "bits differ from the interpreter's"

    failures = _failures(outcome, cases, problem)
    assert not failures, "\n".join(failures[:20])


def test_traces_pass_the_checker(outcome):
    recorded = [(i, c) for i, c in enumerate(CASES) if c.record and c is not WRONG_HOP]
    assert len(recorded) > 150
    failures = []
    for i, case in recorded:
        traces = outcome[i][0][2]
        assert sorted(t.rank for t in traces) == list(range(case.ranks)), case.label()
        result = check_traces(traces)
        errors = [str(v) for v in result.violations if v.is_error]
        if errors:
            failures.append(f"{case.label()}: {errors[:3]}")
        elif case.count:
            assert result.traced.transfers == traces[0].schedule.transfers
    assert not failures, "\n".join(failures[:20])


def test_out_of_place_inputs_are_untouched(outcome):
    failures = _failures(outcome, set(CASES), lambda case, rank, result: None if result[1] else "the input changed")
    assert not failures, "\n".join(failures)


def test_shm_matches_the_spec_fold_bit_for_bit(outcome):
    """shm reduces in rank order, as the spec's fold does: every op and dtype,
    one-shot and two-shot, gives the spec's bits on every rank."""
    from impl_cases import spec_result

    cases = {c for c in CASES if c.backend.startswith("shm")}

    def problem(case, rank, result):
        return None if result[0].tobytes() == spec_result(case, rank).tobytes() else "bits differ from the spec's rank-order fold"

    failures = _failures(outcome, cases, problem)
    assert not failures, "\n".join(failures[:20])
    floats = [i for i, c in enumerate(CASES) if c in cases and c.collective == "allreduce" and c.dtype.startswith(("float", "bfloat")) and c.ranks > 1 and c.count]
    assert len(floats) > 40
    for i in floats:  # and so every rank holds identical bits
        assert len({r[0].tobytes() for r in outcome[i]}) == 1, CASES[i].label()


def test_shm_leaves_no_segment_behind(outcome):
    names = outcome["shm segments"]
    assert len(set(names)) == len(names) >= 5  # one per (shm configuration, world size) used
    assert not [n for n in names if os.path.exists(f"/dev/shm/{n}")]


def test_wrong_chunk_on_one_hop_is_caught_by_the_trace_check(outcome):
    """Rank 1 sends chunk 3 instead of chunk 2 in step 2 (the last
    reduce-scatter hop of a 4-rank ring); the trace check names that hop, the
    ranks and the chunks, and the checker sees the wrong column."""
    i = CASES.index(WRONG_HOP)
    result = check_traces(outcome[i][0][2])
    first = [v for v in result.violations if v.kind == "postcondition"]
    assert first and (first[0].step, first[0].src, first[0].dst) == (2, 1, 2), [str(v) for v in result.violations]
    assert "reduce-scatter hop 3 (step 2): rank 2's chunk 2 should get reduce of rank 1's chunk 2 but got reduce of rank 1's chunk 3" in first[0].message
    wrong = [v for v in result.violations if v.kind == "wrong-column"]
    assert wrong and (wrong[0].step, wrong[0].src, wrong[0].dst) == (2, 1, 2)
    assert any(spec_problem(WRONG_HOP, rank, r[0]) for rank, r in enumerate(outcome[i]))  # and the values are wrong


def test_a_rank_killed_mid_collective_makes_the_others_fail_and_nothing_is_left():
    """Rank 1 SIGKILLs itself while sending in hop 2 of a 3-rank ring all-reduce;
    the other two end with an error well within the gloo timeout, and every
    process is gone (run_ranks asserts that no process survives)."""
    group_timeout = 30.0
    started = time.monotonic()
    results = run_ranks(3, kill_mid_collective, 1, 2, BIG, timeout=120, group_timeout=group_timeout)
    elapsed = time.monotonic() - started
    assert results[1].exitcode == -9 and not results[1].ok
    for r in (results[0], results[2]):
        assert not r.ok and r.exitcode == 0, (r.rank, r.value, r.error)
        assert "impl/executor.py" in r.error and "Connection" in r.error, r.error  # gloo saw the dead peer
        assert r.seconds < group_timeout
    assert elapsed < 120
