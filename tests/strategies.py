"""Hypothesis strategies for per-rank inputs of every specified dtype."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from collspec.spec.dtypes import DTYPES, bfloat16, is_float

INT_DTYPES = [name for name in DTYPES if not is_float(DTYPES[name])]
FLOAT_DTYPES = [name for name in DTYPES if is_float(DTYPES[name])]

# Largest magnitude used per float type, small enough that no sum of 32
# values overflows.
_FLOAT_LIMIT = {"float16": 1000.0, "bfloat16": 1e30, "float32": 1e30, "float64": 1e300}


def _element_array(draw, dtype_name: str, shape: tuple[int, ...], integral: bool) -> np.ndarray:
    dtype = DTYPES[dtype_name]
    size = int(np.prod(shape, dtype=np.int64))
    if not is_float(dtype):
        info = np.iinfo(dtype)
        values = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=size, max_size=size))
        return np.array(values, dtype=dtype).reshape(shape)
    if integral:
        values = draw(st.lists(st.integers(-8, 8), min_size=size, max_size=size))
    else:
        limit = _FLOAT_LIMIT[dtype_name]
        values = draw(st.lists(st.floats(-limit, limit, allow_nan=False, allow_infinity=False, width=64), min_size=size, max_size=size))
    wide = np.array(values, dtype=np.float64).reshape(shape)
    return wide.astype(np.float32).astype(bfloat16) if dtype == bfloat16 else wide.astype(dtype)


@st.composite
def rank_inputs(draw, *, dtypes=tuple(DTYPES), max_ranks=32, min_ranks=1, ndim=(1, 2), divisible=False, integral=False):
    """(inputs, dtype name): one array per rank, same shape and dtype.

    ``divisible`` makes the first axis a multiple of the rank count.
    ``integral`` draws floats that are small integers, so every sum is exact.
    """
    n = draw(st.integers(min_ranks, max_ranks))
    dtype_name = draw(st.sampled_from(list(dtypes)))
    dims = draw(st.integers(*ndim))
    first = draw(st.integers(0, 3)) * n if divisible else draw(st.integers(0, 6))
    shape = (first,) + tuple(draw(st.integers(1, 3)) for _ in range(dims - 1))
    return [_element_array(draw, dtype_name, shape, integral) for _ in range(n)], dtype_name
