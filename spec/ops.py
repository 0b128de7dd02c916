"""Reduction operators and their exact meaning on every element type.

=====  ===================================================================
op     result, element-wise over the ranks' values x_0 .. x_{N-1}
=====  ===================================================================
sum    x_0 + x_1 + ... + x_{N-1}
prod   x_0 * x_1 * ... * x_{N-1}
min    the smallest x_i (NaN if any x_i is NaN)
max    the largest x_i (NaN if any x_i is NaN)
avg    the sum divided by N (see below)
=====  ===================================================================

min and max compare values: where +0 and -0 tie, the spec accepts either
sign (numpy keeps a different operand per dtype, torch always the first),
and a NaN result may be any NaN. Conformance compares them by value
(:func:`collspec.spec.accuracy.check_reduction`), not by bits.

Integers wrap around modulo 2**bits, as every collective library does: an
int8 sum of 100 and 100 is -56. Floats round to the element type after every
operation, in rank order (:func:`collspec.spec.kernel.fold`); other orders
are allowed within :mod:`collspec.spec.accuracy`'s bound.

**avg.** Floats: the sum, then one correctly rounded division by N.
Integers: libraries disagree (some truncate a wrapped sum, some refuse), so
the spec fixes one meaning: the exact mathematical sum divided by N, rounded
toward zero. It never overflows, since a mean lies between the smallest and
the largest input. A backend that differs is reported by conformance.

>>> import numpy as np
>>> from collspec.spec import all_reduce
>>> x = [np.array([100, -7], np.int8), np.array([100, 0], np.int8)]
>>> all_reduce(x, "sum")[0], all_reduce(x, "avg")[0]
(array([-56,  -7], dtype=int8), array([100,  -3], dtype=int8))
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .dtypes import as_dtype, is_float, is_integer

OPS = ("sum", "prod", "min", "max", "avg")

_UFUNCS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


def combiner(op: str, dtype) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The element-wise function that reduces two rows under ``op``.

    Overflow follows the element type (integers wrap, floats go to inf)
    without warnings: that is the defined behaviour, not an accident.
    """
    ufunc = _UFUNCS[op]
    dt = as_dtype(dtype)

    def combine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            out = ufunc(a, b)
        # 0-d inputs come back as numpy scalars; keep arrays and the dtype.
        return np.asarray(out, dtype=dt) if dt != np.dtype(object) else np.asarray(out, dtype=object)

    return combine


def widen(op: str, rows: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Rows in the type the reduction is carried out in.

    Only integer avg differs from the element type: it needs the exact sum,
    so it is computed in int64 (or in Python integers for 64-bit inputs).
    """
    if op != "avg" or not is_integer(rows[0].dtype):
        return list(rows)
    wide = np.dtype(object) if rows[0].dtype.itemsize >= 8 else np.dtype(np.int64)
    return [row.astype(wide) for row in rows]


def finish(op: str, total: np.ndarray, n: int, dtype) -> np.ndarray:
    """Turn the reduced value into the result: only avg does anything here."""
    dt = as_dtype(dtype)
    if op != "avg":
        return total
    if is_float(dt):
        # One correctly rounded division. For types narrower than float64 the
        # quotient is formed in float64 first; with 53 >= 2p + 2 bits that
        # double rounding equals a single rounding to the narrow type.
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(total.astype(np.float64) / n).astype(dt)
    # Integers: exact sum, divided by N, rounded toward zero.
    exact = np.asarray(total, dtype=object)
    quotient = np.vectorize(lambda s: -((-s) // n) if s < 0 else s // n, otypes=[object])(exact) if exact.size else exact
    return np.asarray(quotient).astype(dt)
