"""Reduction operators and their exact meaning on every element type.

=======  =====================================================================
op       result, element-wise over the ranks' values x_0 .. x_{N-1}
=======  =====================================================================
sum      x_0 + x_1 + ... + x_{N-1}
prod     x_0 * x_1 * ... * x_{N-1}
min      the smallest x_i (NaN if any x_i is NaN)
max      the largest x_i (NaN if any x_i is NaN)
avg      the sum divided by N (see below)
compose  x_0 ⋆ x_1 ⋆ ... ⋆ x_{N-1}: affine maps composed in rank order (below)
=======  =====================================================================

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

**compose** is the one op that is not commutative (MPI's user operations
created with ``commute=False``; the libraries must keep rank order). It is
defined on the integer types only. An element of w bits holds one affine map
``x -> a*x + b`` modulo ``2**(w/2)``: ``a`` is the high half of its bits and
``b`` the low half (unsigned; a signed type's bits are read the same way).
``f ⋆ g`` is "f, then g": ``(a_f, b_f) ⋆ (a_g, b_g) = (a_g*a_f, a_g*b_f + b_g)``,
each half modulo ``2**(w/2)``. Composition of maps is associative, so any
bracketing in rank order is exact and gives the same bits; swapping two
ranks' operands in general does not (``g ⋆ f != f ⋆ g``). The result is the
map that applies rank 0's map first and rank N-1's last.

>>> import numpy as np
>>> from collspec.spec import all_reduce
>>> x = [np.array([100, -7], np.int8), np.array([100, 0], np.int8)]
>>> all_reduce(x, "sum")[0], all_reduce(x, "avg")[0]
(array([-56,  -7], dtype=int8), array([100,  -3], dtype=int8))
>>> f, g = affine_map(3, 1, "int32"), affine_map(5, 4, "int32")   # x -> 3x+1, x -> 5x+4
>>> split_map(all_reduce([np.array([f]), np.array([g])], "compose")[0][0], "int32")   # 5(3x+1)+4
(15, 9)
>>> split_map(all_reduce([np.array([g]), np.array([f])], "compose")[0][0], "int32")   # 3(5x+4)+1
(15, 13)
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .dtypes import as_dtype, is_float, is_integer

#: The commutative ops every collective library has.
OPS = ("sum", "prod", "min", "max", "avg")
#: Ops whose operands must stay in rank order.
NONCOMMUTATIVE = ("compose",)
#: Every op the spec defines.
ALL_OPS = OPS + NONCOMMUTATIVE

_UFUNCS = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


def defined_for(op: str, dtype) -> bool:
    """Whether ``op`` is defined on ``dtype`` (compose: integer types only)."""
    return op not in NONCOMMUTATIVE or is_integer(as_dtype(dtype))


def _halves(dtype) -> tuple[np.dtype, int]:
    """The unsigned type of a map's bits, and the width of one half."""
    dt = as_dtype(dtype)
    return np.dtype(f"u{dt.itemsize}"), 4 * dt.itemsize


def affine_map(a: int, b: int, dtype) -> np.generic:
    """The element of ``dtype`` that holds ``x -> a*x + b`` (see compose above)."""
    unsigned, half = _halves(dtype)
    mask = (1 << half) - 1
    return np.array(((a & mask) << half) | (b & mask), dtype=unsigned).view(as_dtype(dtype))[()]


def split_map(element, dtype) -> tuple[int, int]:
    """``(a, b)`` of the map an element of ``dtype`` holds."""
    unsigned, half = _halves(dtype)
    bits = int(np.array(element, dtype=as_dtype(dtype)).view(unsigned))
    return bits >> half, bits & ((1 << half) - 1)


def _compose(first: np.ndarray, then: np.ndarray, dtype) -> np.ndarray:
    """Element-wise ``first ⋆ then``: apply ``first``'s map, then ``then``'s."""
    dt = as_dtype(dtype)
    unsigned, half = _halves(dt)
    wide = np.dtype(np.uint64)
    low = wide.type((1 << half) - 1)
    f = np.asarray(first, dtype=dt).view(unsigned).astype(wide)
    g = np.asarray(then, dtype=dt).view(unsigned).astype(wide)
    af, bf, ag, bg = f >> wide.type(half), f & low, g >> wide.type(half), g & low
    with np.errstate(over="ignore"):  # uint64 wraps: the low ``half`` bits are exact
        a = (ag * af) & low
        b = (ag * bf + bg) & low
    return np.asarray((a << wide.type(half)) | b).astype(unsigned).view(dt)


def combiner(op: str, dtype) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The element-wise function that reduces two rows under ``op``.

    Overflow follows the element type (integers wrap, floats go to inf)
    without warnings: that is the defined behaviour, not an accident.
    """
    dt = as_dtype(dtype)
    if op == "compose":
        return lambda a, b: _compose(a, b, dt)
    ufunc = _UFUNCS[op]

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
