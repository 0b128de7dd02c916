"""Every option of every built-in algorithm at the ends of its accepted range,
through ``collspec check``: it exits 0 (the schedule was built from the proved
terms and checks), or 2 with one line naming the option. Never a traceback,
never 1: a schedule whose bit-vector terms wrap around (the proofs use 20-bit
vectors) is refused by name, not built wrong. The audit's case was nccl-tree
with ``chunk=131072``, where k x chunk wrapped and the check failed with
"the proved function sends here, the schedule does not" (it now checks)."""

from __future__ import annotations

import pytest

from collspec.cli import main

N = 5
#: (algorithm, collective, option, lowest, highest, other options, ranks): the
#: highest value the generator accepts (ring's ``chunks`` has no limit of its
#: own: a large one), with companions that keep the schedule small
CASES = [
    *[("ring", c, "root", 0, N - 1, {}, N) for c in ("broadcast", "reduce")],
    *[("ring", c, "chunks", 1, 1 << 12, {}, N) for c in ("broadcast", "reduce")],
    *[(a, c, "root", 0, N - 1, {}, N) for a, cs in (("direct", ("broadcast", "reduce")), ("hub", ("allreduce", "broadcast", "reduce")),
                                                    ("binary-tree", ("reduce", "broadcast"))) for c in cs],
    ("hierarchical-ring", "allreduce", "group_size", 1, 6, {}, 6),
    *[("nccl-ring", c, "channels", 1, 64, {}, N) for c in ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")],
    *[("nccl-ring", c, "align", 1, 1 << 10, {"chunk": 1 << 10}, N) for c in ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")],
    *[("nccl-ring", c, "root", 0, N - 1, {}, N) for c in ("broadcast", "reduce")],
    ("nccl-tree", "allreduce", "channels", 1, 64, {}, N),
    ("nccl-tree", "allreduce", "count", 0, 1 << 17, {"channels": 1, "chunk": 1 << 12}, N),
    *[("nccl-pat", c, "aggregation", 1, 2, {}, N) for c in ("reduce_scatter", "allgather")],
    *[("nccl-pat", c, "chunk", 1, 1 << 18, {"count": 1}, N) for c in ("reduce_scatter", "allgather")],
    *[("nccl-pat", c, "count", 0, 1 << 16, {"chunk": 1 << 12}, N) for c in ("reduce_scatter", "allgather")],
]
#: nccl-tree's largest chunk (one element: one slot per channel and role), nccl-ring's largest
#: chunk (about 2 GB: 8 M slots a step) and count (4 M cells to check)
HEAVY = [
    ("nccl-tree", "allreduce", "chunk", 1, 1 << 17, {"channels": 1, "count": 1}, N),
    *[("nccl-ring", c, "chunk", 1, 1 << 22, {}, 2) for c in ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")],
    *[("nccl-ring", c, "count", 0, 1 << 22, {"chunk": 1 << 16}, 2) for c in ("allreduce", "broadcast", "reduce")],
    *[("nccl-ring", c, "count", 0, 1 << 21, {"chunk": 1 << 16}, 2) for c in ("reduce_scatter", "allgather")],
]


def run_check(capsys, algorithm, collective, options, n):
    argv = ["check", "-a", algorithm, "-c", collective, "-n", str(n)]
    for name, value in options.items():
        argv += ["--option", f"{name}={value}"]
    code = main(argv)
    return code, capsys.readouterr().err


def assert_extremes(capsys, algorithm, collective, option, low, high, others, n):
    for value in (low, high):
        code, err = run_check(capsys, algorithm, collective, {**others, option: value}, n)
        where = f"{algorithm} {collective} {option}={value}"
        assert code in (0, 2), (where, code, err)
        if code == 2:
            named = f"{option}={value}" in err or f"option {option}" in err
            assert err.count("\n") == 1 and err.startswith("collspec check: error: ") and named and "Traceback" not in err, (where, err)


@pytest.mark.parametrize("algorithm, collective, option, low, high, others, n", CASES, ids=[f"{a}-{c}-{o}" for a, c, o, *_ in CASES])
def test_each_option_at_its_extremes_checks_or_is_refused_by_name(capsys, algorithm, collective, option, low, high, others, n):
    assert_extremes(capsys, algorithm, collective, option, low, high, others, n)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, collective, option, low, high, others, n", HEAVY, ids=[f"{a}-{c}-{o}" for a, c, o, *_ in HEAVY])
def test_the_largest_chunks_and_counts_check_or_are_refused_by_name(capsys, algorithm, collective, option, low, high, others, n):
    assert_extremes(capsys, algorithm, collective, option, low, high, others, n)


def test_the_audited_nccl_tree_case_checks_and_too_many_slots_are_refused_by_name(capsys):
    """chunk 131072 with one element: k x chunk passed 2^19 at step 4 (past
    the data, but the slot's activity was computed from the product); the
    transfer now uses k only where it names a chunk, so the schedule is
    built and checks. What still cannot fit the bit-vectors, the slots of a
    step, is refused naming the options."""
    code, err = run_check(capsys, "nccl-tree", "allreduce", {"channels": 1, "chunk": 131072, "count": 1}, 5)
    assert (code, err) == (0, "")
    code, err = run_check(capsys, "nccl-tree", "allreduce", {"channels": 2, "chunk": 131072, "parts": "131071,1"}, 5)
    assert (code, err) == (2, "collspec check: error: nccl-tree: options count=131072, chunk=131072, parts=131071,1 give 786426 slots a step "
                              "(channels used x longest message x 3), past the proofs' 20-bit vectors (at most 524287); use a smaller chunk or count\n")
