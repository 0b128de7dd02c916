"""What every rank puts in its buffers, built so a wrong result explains itself.

Inputs are a pure function of the case, the rank and the seed, so the
coordinator rebuilds every rank's input instead of shipping it. Each
*pattern* serves one kind of check:

========  ==================  ==================================================
pattern   used for            rank r's element i
========  ==================  ==================================================
tally     sum                 ``s_i * 3**j`` where j = (r - i) mod N if j < K,
                              else 0: every rank a distinct base-3 digit, so a
                              wrong sum decodes into which ranks are missing or
                              counted twice (:func:`tally_multiplicity`)
powers    prod                random ``±2**e`` (floats) or ±1, ±2 (integers)
spread    min, max, avg       random integers in the type's exact range (for
                              avg: sums that N does not divide, so integer
                              avg's rounding and wrapping are exercised)
origin    data movement       ``1 + r + N * ((g + offset) mod M)``, g the element's
                              place in the gathered whole: no two ranks' (and
                              few elements') values coincide
rounding  float sum, avg      uniform in [-1, 1): sums round, so the error bound
                              and bit-identical ranks are what is tested
maps      compose             a random affine map ``x -> a*x + b`` (a = 1 mod 4:
                              no map loses information, and no composition has
                              the all-ones bits of the unsigned sentinel); two
                              ranks' maps almost never commute, so operands out
                              of rank order show
========  ==================  ==================================================

Every pattern except ``rounding`` keeps every partial sum (or product)
exactly representable, in any order: integer mantissas, as nccl-tests does.
The spec's :func:`~collspec.spec.error_bound` is then exactly 0 and any
correct backend returns the spec's bits.

``s_i`` is shared by all ranks at element i (±2**e for floats, which keeps
sums exact; ±m for integers) so that elements, and hence blocks, differ. K
is the number of ranks whose digits fit the type (:func:`tally_width`): all
N of them for N <= 4 in every type, fewer for large N in narrow types, where
ranks outside an element's window contribute 0 there.

>>> import numpy as np
>>> rows = [tally_row("int32", ranks=4, rank=r, count=3, seed=1) for r in range(4)]
>>> dropped = rows[0] + rows[1] + rows[3]          # rank 2 missing everywhere
>>> tally_multiplicity(dropped, 0, "int32", 4, seed=1, count=3)[:, 2]
array([0, 0, 0])
>>> tally_multiplicity(dropped + rows[1], 0, "int32", 4, seed=1, count=3)[0]
array([1, 2, 0, 1])
"""

from __future__ import annotations

import zlib

import numpy as np

from ..spec import as_dtype, is_float
from ..spec.dtypes import precision_bits

BASE = 3
#: Bytes of sentinel around every buffer; they must still hold it afterwards.
#: A multiple of 64, so that the buffers a backend sees keep the allocator's
#: alignment (a misaligned view would slow vector loops and is no real buffer).
GUARD_BYTES = 64


def guard(dtype: str) -> int:
    """How many sentinel elements precede and follow every buffer."""
    return GUARD_BYTES // as_dtype(dtype).itemsize


def exact_limit(dtype: str) -> int:
    """The largest integer every value and partial result must stay within.

    Floats: 2**p, below which every integer is exact. Integers: the type's
    maximum (minus one for unsigned types, whose maximum is the sentinel).
    """
    dt = as_dtype(dtype)
    if is_float(dt):
        return 2 ** precision_bits(dt)
    info = np.iinfo(dt)
    return int(info.max) - (1 if info.min == 0 else 0)


def sentinel(dtype: str) -> np.ndarray:
    """A 0-d array no correct result contains: NaN, or an integer type's far end."""
    dt = as_dtype(dtype)
    if is_float(dt):
        return np.array(np.nan, dtype=dt)
    info = np.iinfo(dt)
    return np.array(info.max if info.min == 0 else info.min, dtype=dt)


def tally_width(dtype: str, ranks: int) -> int:
    """K: how many ranks get a digit at each element (all of them when they fit).

    The largest K <= N with 3**K - 1 <= the exact limit: a sum that holds
    every digit twice is then still exact and decodable.
    """
    limit, k = exact_limit(dtype), 0
    while k < ranks and BASE ** (k + 1) - 1 <= limit:
        k += 1
    return k


def _rng(seed: int, key: str, rank: int | None = None) -> np.random.Generator:
    words = [seed & 0xFFFFFFFF, zlib.crc32(key.encode())]
    return np.random.default_rng(words if rank is None else words + [rank + 1])


def _tally_scale(dtype: str, ranks: int, seed: int, count: int) -> np.ndarray:
    """``s_i``: the per-element multiplier every rank shares."""
    dt = as_dtype(dtype)
    rng = _rng(seed, f"tally-scale/{dtype}/{ranks}")
    unsigned = not is_float(dt) and np.iinfo(dt).min == 0
    signs = np.ones(count) if unsigned else np.array([-1.0, 1.0])[rng.integers(0, 2, size=count)]
    if is_float(dt):
        return signs * np.array([1.0, 2.0, 4.0, 8.0])[rng.integers(0, 4, size=count)]
    top = max(1, min(100, exact_limit(dtype) // (BASE ** tally_width(dtype, ranks) - 1)))
    return signs * rng.integers(1, top + 1, size=count)


def tally_row(dtype: str, ranks: int, rank: int, count: int, seed: int) -> np.ndarray:
    """Rank ``rank``'s input under the tally pattern (see the module text)."""
    k = tally_width(dtype, ranks)
    weights = np.array([float(BASE) ** j if j < k else 0.0 for j in range(ranks)])
    return (_tally_scale(dtype, ranks, seed, count) * weights[(rank - np.arange(count)) % ranks]).astype(as_dtype(dtype))


def tally_multiplicity(got: np.ndarray, start: int, dtype: str, ranks: int, seed: int, count: int) -> np.ndarray:
    """How many times each rank is inside each element of a sum.

    ``got`` holds elements ``start, start + 1, ...`` of a sum of tally rows of
    ``count`` elements. Returns an int array of shape ``(len(got), N)``:
    entry [e, r] is how often rank r's digit is inside element e; -1 where
    rank r has no digit at that element (N > K), and the whole row -2 where
    ``got`` is no sum of digits 0..2 (only the value can be reported there).
    """
    k = tally_width(dtype, ranks)
    index = np.arange(start, start + len(got))
    scale = _tally_scale(dtype, ranks, seed, count)[start : start + len(got)]
    with np.errstate(invalid="ignore", over="ignore"):
        q = np.asarray(got, dtype=np.float64) / scale
        valid = np.isfinite(q) & (q == np.round(q)) & (q >= 0) & (q < float(BASE) ** k)
    digits = np.where(valid, np.round(np.where(valid, q, 0)), 0).astype(np.int64)
    times = np.full((len(got), ranks), -1, dtype=np.int64)
    for j in range(k):
        times[np.arange(len(got)), (index + j) % ranks] = digits % BASE
        digits //= BASE
    times[~valid] = -2
    return times


def powers_row(dtype: str, ranks: int, rank: int, count: int, seed: int) -> np.ndarray:
    """Random ±2**e (floats) or small integers whose product over N ranks is exact."""
    dt = as_dtype(dtype)
    rng = _rng(seed, f"powers/{dtype}/{ranks}", rank)
    if is_float(dt):
        values = rng.choice([-1.0, 1.0], size=count) * 2.0 ** rng.integers(-1, 2, size=count)
    else:
        unsigned = np.iinfo(dt).min == 0
        twos = 2**ranks <= exact_limit(dtype)
        choices = ([1, 2] if twos else [1]) if unsigned else ([-2, -1, 1, 2] if twos else [-1, 1])
        values = rng.choice(choices, size=count)
    return values.astype(dt)


def spread_row(dtype: str, ranks: int, rank: int, count: int, seed: int) -> np.ndarray:
    """Random integers within the type's exact range (min and max never round)."""
    dt = as_dtype(dtype)
    rng = _rng(seed, f"spread/{dtype}/{ranks}", rank)
    top = min(exact_limit(dtype), 1000)
    low = 0 if not is_float(dt) and np.iinfo(dt).min == 0 else -top
    return rng.integers(low, top + 1, size=count).astype(dt)


def origin_values(dtype: str, ranks: int, rank: int, places: np.ndarray, seed: int) -> np.ndarray:
    """Values naming (rank, place): ``1 + r + N * ((place + offset) mod M)``."""
    m = max(1, exact_limit(dtype) // ranks)
    offset = int(_rng(seed, f"origin/{dtype}/{ranks}").integers(0, m))
    return (1 + rank + ranks * ((places + offset) % m)).astype(as_dtype(dtype))


def rounding_row(dtype: str, ranks: int, rank: int, count: int, seed: int) -> np.ndarray:
    """Uniform values in [-1, 1): their sums round, differently in every order."""
    rng = _rng(seed, f"rounding/{dtype}/{ranks}", rank)
    return rng.uniform(-1.0, 1.0, size=count).astype(as_dtype(dtype))


def maps_row(dtype: str, ranks: int, rank: int, count: int, seed: int) -> np.ndarray:
    """Random invertible affine maps in compose's element layout (:mod:`collspec.spec.ops`)."""
    dt = as_dtype(dtype)
    unsigned, half = np.dtype(f"u{dt.itemsize}"), 4 * dt.itemsize
    rng = _rng(seed, f"maps/{dtype}/{ranks}", rank)
    a = rng.integers(0, 1 << (half - 2), size=count, dtype=np.uint64) * np.uint64(4) + np.uint64(1)
    b = rng.integers(0, 1 << half, size=count, dtype=np.uint64)
    return ((a << np.uint64(half)) | b).astype(unsigned).view(dt)


#: Reducing patterns by name: (dtype, ranks, rank, count, seed) -> row.
ROWS = {"tally": tally_row, "powers": powers_row, "spread": spread_row, "rounding": rounding_row, "maps": maps_row}

#: The pattern each op is checked with (``rounding`` is an extra case for floats).
PATTERN_FOR_OP = {"sum": "tally", "avg": "spread", "prod": "powers", "min": "spread", "max": "spread", "compose": "maps"}
