"""The element types collectives are defined over.

Eight types are specified, the ones collective libraries ship: int8, uint8,
int32, int64, float16, bfloat16, float32, float64. bfloat16 comes from
``ml_dtypes``, so the spec needs no torch. Any other fixed-width numpy integer
or float type is accepted with the same rules (integers wrap, floats round),
and ``object`` arrays hold symbolic values (contributor sets, Z3 terms).

>>> dtype_name(as_dtype("bfloat16")), unit_roundoff("float16")
('bfloat16', 0.00048828125)
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

bfloat16 = np.dtype(ml_dtypes.bfloat16)

#: The specified element types, by the names every other part of collspec uses.
DTYPES: dict[str, np.dtype] = {
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "float16": np.dtype(np.float16),
    "bfloat16": bfloat16,
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}

SYMBOLIC = np.dtype(object)


def as_dtype(dtype) -> np.dtype:
    """Turn a name ('bfloat16'), a numpy type or a dtype into a numpy dtype."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    return np.dtype(dtype)


def dtype_name(dtype) -> str:
    """The collspec name of a dtype: 'bfloat16', 'int8', ..."""
    return "bfloat16" if as_dtype(dtype) == bfloat16 else as_dtype(dtype).name


def is_float(dtype) -> bool:
    """True for IEEE-style binary floating types, bfloat16 included."""
    dt = as_dtype(dtype)
    return dt == bfloat16 or np.issubdtype(dt, np.floating)


def is_integer(dtype) -> bool:
    """True for fixed-width integer types (which wrap around on overflow)."""
    return np.issubdtype(as_dtype(dtype), np.integer)


def is_symbolic(dtype) -> bool:
    """True for object arrays: contributor sets, Z3 terms and other symbols."""
    return as_dtype(dtype) == SYMBOLIC


def is_supported(dtype) -> bool:
    """True for every dtype a collective accepts."""
    return is_float(dtype) or is_integer(dtype) or is_symbolic(dtype)


def precision_bits(dtype) -> int:
    """Significand bits including the implicit one: 11 for float16, 8 for bfloat16."""
    dt = as_dtype(dtype)
    if not is_float(dt):
        raise ValueError(f"{dtype_name(dt)} is not a floating type")
    info = ml_dtypes.finfo(dt) if dt == bfloat16 else np.finfo(dt)
    return int(info.nmant) + 1


def unit_roundoff(dtype) -> float:
    """u = 2**-p: the largest relative error of one rounding to nearest."""
    return 2.0 ** -precision_bits(dtype)
