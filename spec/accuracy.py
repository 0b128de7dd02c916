"""What a floating-point reduction may return: an exact reference and a bound.

A reduction of N values performs N - 1 roundings, and the order in which an
algorithm adds (a ring starts each chunk at a different rank) changes the
result. So a float result is judged against an exact reference with a bound
derived from the standard error analysis of summation: for any order,

    |computed - exact| <= gamma(N - 1) * sum_i |x_i|,   gamma(k) = k u / (1 - k u)

where u is the unit roundoff of the accumulation type (2**-11 for float16,
2**-8 for bfloat16, 2**-24 for float32, 2**-53 for float64). For a product
the same gamma bounds the relative error. For avg, N - 1 additions and one
division (or a multiplication of every input by a rounded 1/N, as some
libraries do) stay within gamma(N + 1) * sum_i |x_i| / N. min and max never
round. The reference itself is float64 (exactly rounded with ``math.fsum``
for float64 inputs) and its own rounding is added to the bound, so nothing
in the bound is a guess.

Below the normal range a rounding's error is not relative: a product or a
quotient that falls among the subnormals may be off by up to half the
smallest subnormal, eta (a sum that falls there is exact). So avg's bound
adds (N + 1) eta (one division, or N products by 1/N, and the reference's
own division), and prod's adds N eta times the product of max(1, |x_i|)
(an error made at one multiplication is scaled by the factors after it).
A product is exact only if, besides its odd parts fitting, no partial
product can fall below the smallest subnormal.

Where no rounding can happen the bound is exactly 0. If every input is a
multiple of 2**e (an integer when e = 0) and sum_i |x_i| <= 2**(p + e), p
the significand bits, then every partial sum in every order is a multiple of
2**e no larger than 2**(p + e), which the type represents: any correct
algorithm returns the exact value. nccl-tests builds its inputs this way; so
does collspec's conformance harness. Products are exact likewise when the
odd parts of the inputs multiply to at most 2**p.

>>> import numpy as np
>>> x = [np.array([0.1], np.float16), np.array([0.2], np.float16), np.array([0.3], np.float16)]
>>> float(error_bound(x, "sum")[0]) > 0
True
>>> ints = [np.array([3.0], np.float16), np.array([-5.0], np.float16)]
>>> float(exact_reduce(ints, "sum")[0]), float(error_bound(ints, "sum")[0])
(-2.0, 0.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import ml_dtypes
import numpy as np

from .collectives import _as_rows, _require_op, _require_same_shape, all_reduce
from .dtypes import bfloat16, is_float, precision_bits, unit_roundoff

_U64 = 2.0**-53


def gamma(k: int, u: float) -> float:
    """gamma(k) = k u / (1 - k u); infinite once k u >= 1 (no guarantee left)."""
    if k <= 0:
        return 0.0
    return k * u / (1 - k * u) if k * u < 1 else math.inf


def _rows(inputs: Sequence[np.ndarray], op: str, name: str) -> list[np.ndarray]:
    rows = _as_rows(inputs, name)
    _require_same_shape(rows, name)
    _require_op(op, rows, name)
    return rows


def exact_reduce(inputs: Sequence[np.ndarray], op: str = "sum") -> np.ndarray:
    """The reduction of all ranks' inputs, as exact as float64 allows.

    Integer types: the spec's own result (integer arithmetic is exact, with
    the wrap-around and avg rounding of :mod:`collspec.spec.ops`). Floating
    types: a float64 array; sums of float64 inputs are exactly rounded.
    """
    rows = _rows(inputs, op, "exact_reduce")
    if not is_float(rows[0].dtype):
        return all_reduce(rows, op)[0]
    wide = np.stack([r.astype(np.float64) for r in rows])
    n = len(rows)
    with np.errstate(over="ignore", invalid="ignore"):
        if op in ("sum", "avg"):
            if rows[0].dtype == np.float64:
                flat = wide.reshape(n, -1)
                total = np.array([math.fsum(flat[:, j]) for j in range(flat.shape[1])]).reshape(rows[0].shape)
            else:
                total = wide.sum(axis=0)
            return total / n if op == "avg" else total
        if op == "prod":
            return wide.prod(axis=0)
        return wide.min(axis=0) if op == "min" else wide.max(axis=0)


def error_bound(inputs: Sequence[np.ndarray], op: str = "sum") -> np.ndarray:
    """Per element, how far a correct result may lie from :func:`exact_reduce`.

    Zero for integer types, for min and max, and wherever no rounding can
    occur in any order (see the module text).
    """
    rows = _rows(inputs, op, "error_bound")
    shape = rows[0].shape
    if not is_float(rows[0].dtype) or op in ("min", "max"):
        return np.zeros(shape)
    n, dtype = len(rows), rows[0].dtype
    u, p = unit_roundoff(dtype), precision_bits(dtype)
    tiny = _smallest_subnormal(dtype)
    eta = tiny / 2
    wide = np.abs(np.stack([r.astype(np.float64) for r in rows]))
    finite = np.all(np.isfinite(wide), axis=0)
    low = _lowest_bit_exponent(wide)
    with np.errstate(over="ignore", invalid="ignore"):
        if op == "prod":
            magnitude = wide.prod(axis=0) * (1 + gamma(n, _U64))
            reference_error = gamma(n - 1, _U64) * magnitude
            bound = gamma(n - 1, u) * magnitude + reference_error
            bound = bound + n * eta * np.prod(np.maximum(wide, 1.0), axis=0) * (1 + gamma(n, u))  # underflow (module text)
            odd_parts = np.prod(np.where(wide > 0, np.ldexp(wide, -low.clip(-1100, 1100)), 1.0), axis=0)
            # every partial product's lowest set bit is at or above the sum of the negative exponents
            deepest = np.sum(np.where(wide > 0, np.minimum(low, 0), 0), axis=0)
            exact = finite & (((odd_parts <= 2.0**p) & (deepest >= math.frexp(tiny)[1] - 1)) | np.any(wide == 0, axis=0))
        else:
            magnitude = wide.sum(axis=0) * (1 + gamma(n, _U64))
            # float64 inputs are summed exactly rounded; narrower ones in
            # float64, whose own error is gamma_64(N - 1) * sum|x|.
            reference_error = _U64 * magnitude if dtype == np.float64 else gamma(n - 1, _U64) * magnitude
            if op == "avg":
                bound = (gamma(n + 1, u) * magnitude + reference_error) / n + _U64 * magnitude / n + (n + 1) * eta  # eta: module text
                exact = np.zeros(shape, dtype=bool)
            else:
                bound = gamma(n - 1, u) * magnitude + reference_error
                scale = np.min(np.where(wide > 0, low, np.iinfo(np.int64).max), axis=0)
                exact = finite & ((magnitude == 0) | (magnitude <= np.ldexp(1.0, (p + scale).clip(-1100, 1100))))
    return np.where(exact, 0.0, bound)


def _lowest_bit_exponent(values: np.ndarray) -> np.ndarray:
    """For finite x > 0, the e with x = m * 2**e and m an odd integer.

    Values that are 0 or not finite get a large sentinel; callers mask them.
    """
    finite = np.isfinite(values) & (values > 0)
    fraction, exponent = np.frexp(np.where(finite, values, 1.0))
    mantissa = (fraction * 2.0**53).astype(np.int64)  # exact: 53 bits
    lowest = mantissa & -mantissa
    trailing = np.log2(lowest.astype(np.float64)).astype(np.int64)
    return np.where(finite, exponent.astype(np.int64) - 53 + trailing, np.iinfo(np.int32).max)


def _smallest_subnormal(dtype) -> float:
    """The smallest positive subnormal of a floating dtype (2**-24 for float16)."""
    return float(ml_dtypes.finfo(dtype).smallest_subnormal if dtype == bfloat16 else np.finfo(dtype).smallest_subnormal)


def _largest_finite(dtype) -> float:
    return float(ml_dtypes.finfo(dtype).max if dtype == bfloat16 else np.finfo(dtype).max)


@dataclass(frozen=True)
class Accuracy:
    """Result of comparing a computed reduction with the exact one.

    ``index`` is the worst element (largest error relative to its bound),
    with ``expected`` (exact), ``got``, ``error`` and ``bound`` there.
    """

    ok: bool
    index: tuple[int, ...] | None
    expected: float
    got: float
    error: float
    bound: float


def check_reduction(
    got: np.ndarray, inputs: Sequence[np.ndarray], op: str = "sum", rows: slice | None = None
) -> Accuracy:
    """Is ``got`` a correct reduction of ``inputs`` (optionally only ``rows``)?

    Integers must match exactly. Floats must lie within :func:`error_bound`
    of :func:`exact_reduce`; where the exact value is NaN or overflows the
    type, ``got`` must be NaN or the same infinity.
    """
    exact = np.asarray(exact_reduce(inputs, op))
    bound = error_bound(inputs, op)
    if rows is not None:
        exact, bound = exact[rows], bound[rows]
    got = np.asarray(got)
    if got.shape != exact.shape:
        return Accuracy(False, None, math.nan, math.nan, math.inf, 0.0)
    if got.size == 0:
        return Accuracy(True, None, 0.0, 0.0, 0.0, 0.0)
    if not is_float(got.dtype):
        wrong = np.flatnonzero(got.ravel() != exact.ravel())
        if wrong.size == 0:
            return Accuracy(True, None, 0.0, 0.0, 0.0, 0.0)
        i = np.unravel_index(int(wrong[0]), got.shape)
        return Accuracy(False, tuple(int(k) for k in i), float(exact[i]), float(got[i]), abs(float(got[i]) - float(exact[i])), 0.0)
    g = got.astype(np.float64)
    limit = _largest_finite(got.dtype)
    special = ~np.isfinite(exact) | (np.abs(exact) > limit)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(g - exact)
        special_ok = (np.isnan(exact) & np.isnan(g)) | (np.isinf(g) & (np.sign(g) == np.sign(exact)))
        # Near the overflow threshold some orders overflow and others do not.
        overflow_ok = np.isinf(g) & (np.abs(exact) + bound > limit) & (np.sign(g) == np.sign(exact))
        fine = np.where(special, special_ok, (error <= bound) | overflow_ok)
        excess = np.where(np.isnan(error), np.inf, error - bound)
    if fine.all():  # report the element closest to its bound
        score = np.where(special, -np.inf, excess)
    else:  # report the worst failing element
        score = np.where(fine, -np.inf, np.maximum(excess, 0.0) + 1.0)
    worst = np.unravel_index(int(np.argmax(score)), got.shape)
    return Accuracy(
        bool(fine.all()),
        tuple(int(k) for k in worst),
        float(exact[worst]),
        float(g[worst]),
        float(error[worst]),
        float(bound[worst]),
    )
