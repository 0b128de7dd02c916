"""Every precondition of the spec rejects bad input with the exact error."""

from __future__ import annotations

import numpy as np
import pytest

from collspec import spec
from collspec.spec import SpecError

CASES = [
    # (call, exact message, rank, field)
    (
        lambda: spec.all_reduce([np.zeros(3), np.zeros(4)]),
        "all_reduce: rank 1: shape (4,) differs from rank 0's (3,); every rank must pass the same shape",
        1,
        "shape",
    ),
    (
        lambda: spec.all_reduce([np.zeros(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float16)]),
        "all_reduce: rank 2: dtype float16 differs from rank 0's float32; every rank must pass the same dtype",
        2,
        "dtype",
    ),
    (
        lambda: spec.all_reduce([np.zeros(2, np.complex64)]),
        "all_reduce: rank 0: dtype complex64 is not supported; use one of int8, uint8, int32, int64, float16, bfloat16, float32, float64",
        0,
        "dtype",
    ),
    (lambda: spec.all_reduce([]), "all_reduce: needs at least one rank, got 0 inputs", None, "inputs"),
    (lambda: spec.all_gather([]), "all_gather: needs at least one rank, got 0 inputs", None, "inputs"),
    (
        lambda: spec.reduce_scatter([np.zeros(5)] * 2),
        "reduce_scatter: count 5 is not divisible by 2 ranks; use reduce_scatter_v with per-rank counts",
        None,
        "count",
    ),
    (
        lambda: spec.all_to_all([np.zeros(4)] * 3),
        "all_to_all: count 4 is not divisible by 3 ranks; pad the buffer to a multiple of the rank count",
        None,
        "count",
    ),
    (
        lambda: spec.broadcast([np.zeros(2)] * 4, root=4),
        "broadcast: root 4 is out of range for 4 ranks (0..3)",
        None,
        "root",
    ),
    (lambda: spec.reduce([np.zeros(2)] * 2, root=-1), "reduce: root -1 is out of range for 2 ranks (0..1)", None, "root"),
    (
        lambda: spec.all_reduce([np.zeros(2)], op="mean"),
        "all_reduce: op 'mean' is not one of sum, prod, min, max, avg, compose",
        None,
        "op",
    ),
    (
        lambda: spec.all_reduce(spec.symbolic_inputs(2, 2), op="max"),
        "all_reduce: symbolic (object) inputs combine with '+' only; pass op='sum'",
        None,
        "op",
    ),
    (
        lambda: spec.reduce_scatter_v([np.zeros(3)] * 2, [1, 1]),
        "reduce_scatter_v: counts sum to 2 but every rank passes 3 rows",
        None,
        "counts",
    ),
    (
        lambda: spec.reduce_scatter_v([np.zeros(3)] * 2, [3]),
        "reduce_scatter_v: 1 counts for 2 ranks; pass one count per rank",
        None,
        "counts",
    ),
    (
        lambda: spec.reduce_scatter_v([np.zeros(3)] * 2, [4, -1]),
        "reduce_scatter_v: rank 1: count -1 is negative",
        1,
        "counts",
    ),
    (
        lambda: spec.all_gather([np.float32(1.0), np.float32(2.0)]),
        "all_gather: rank 0: a 0-d array has no first axis to split; pass a 1-d array",
        0,
        "shape",
    ),
    (
        lambda: spec.all_gather_v([np.zeros((2, 3)), np.zeros((1, 4))]),
        "all_gather_v: rank 1: row shape (4,) differs from rank 0's (3,)",
        1,
        "shape",
    ),
]


@pytest.mark.parametrize("call, message, rank, field", CASES, ids=[c[1].split(":")[0] + "-" + c[3] for c in CASES])
def test_precondition_violation_names_rank_and_field(call, message, rank, field):
    with pytest.raises(SpecError) as caught:
        call()
    assert str(caught.value) == message
    assert caught.value.rank == rank
    assert caught.value.field == field


def test_zero_ranks_is_rejected_for_every_collective():
    for name, fn in spec.BY_NAME.items():
        with pytest.raises(SpecError, match="needs at least one rank, got 0 inputs"):
            fn([])


def test_unknown_collective_name_lists_the_choices():
    with pytest.raises(SpecError, match="unknown collective 'allreduse'; use one of allreduce, reduce_scatter"):
        spec.collective_name("allreduse")
