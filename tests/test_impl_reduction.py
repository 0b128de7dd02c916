"""The spec's ops on torch tensors: one hop at a time, then finish.

Folding the ranks' inputs in rank order with :class:`Reduction` must give
the spec's bits exactly (the spec folds in rank order too), for every op and
dtype; that includes float16/bfloat16 rounding after every hop and the
exact, truncated integer mean.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from collspec import spec
from collspec.impl.backends import Ring
from collspec.impl.reduction import DTYPE_NAMES, Reduction

from impl_cases import to_numpy, to_torch
from strategies import rank_inputs


def fold(op: str, xs: list[np.ndarray]) -> np.ndarray:
    tensors = [to_torch(x) for x in xs]
    reduction = Reduction(op, tensors[0].dtype, len(tensors))
    acc = reduction.working(tensors[0], copy=True)
    for t in tensors[1:]:
        reduction.combine_(acc, reduction.working(t, copy=False))
    out = torch.empty_like(tensors[0])
    reduction.finish(acc, out)
    return to_numpy(out)


def same(got: np.ndarray, want: np.ndarray, op: str) -> bool:
    """Identical bits, except where IEEE arithmetic leaves bits unspecified:
    a NaN's sign and payload, and which of two equal zeros min and max return.

    The spec takes min and max from numpy, whose choice between +0 and -0
    depends on the dtype and the machine (on x86 float32 keeps the second
    operand, float16 the first) while torch always keeps the first; the
    sign of such a result is therefore not compared.
    """
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if not spec.is_float(got.dtype):
        return got.tobytes() == want.tobytes()
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(g)
    if not np.array_equal(nan, np.isnan(w)):
        return False
    if op in ("min", "max"):
        return np.array_equal(g[~nan], w[~nan])
    return got[~nan].tobytes() == want[~nan].tobytes()


@pytest.mark.parametrize("op", spec.OPS)
@given(data=st.data())
def test_rank_order_fold_equals_the_spec(op, data):
    xs, _ = data.draw(rank_inputs(dtypes=list(DTYPE_NAMES.values()), max_ranks=5))
    got = fold(op, xs)
    want = spec.all_reduce(xs, op)[0]
    assert same(got, want, op), (op, xs, got, want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_integer_avg_is_the_exact_mean_rounded_toward_zero_even_at_the_extremes(dtype):
    info = np.iinfo(dtype)
    low = max(int(info.min), -7)  # -7 / 3 truncates to -2 where it can
    columns = [(info.max, info.max, info.max), (info.min,) * 3, (info.min, info.max, 0), (low, 0, 0), (info.max, info.max - 1, info.max)]
    xs = [np.array([c[r] for c in columns], dtype=dtype) for r in range(3)]
    got = fold("avg", xs)
    exact = [sum(int(x[k]) for x in xs) for k in range(5)]
    truncated = [abs(s) // 3 * (1 if s >= 0 else -1) for s in exact]
    assert got.tolist() == truncated
    assert got.tobytes() == spec.all_reduce(xs, "avg")[0].tobytes()


@pytest.mark.parametrize(
    "dtype, op, error",
    [(torch.bool, "sum", TypeError), (torch.complex64, "sum", TypeError), (torch.float32, "xor", NotImplementedError)],
)
def test_unsupported_combinations_raise_what_conformance_reports_as_unsupported(dtype, op, error):
    with pytest.raises(error):
        Ring(0, 1).all_reduce(torch.zeros(4, dtype=dtype), op)
