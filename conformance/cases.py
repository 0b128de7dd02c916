"""The cases a conformance run executes: which collective, dtype, op, size, ...

A :class:`Case` is one call of one collective on every rank. Its ``count``
is the element count nccl-tests would print as the size: the whole vector
for all-reduce, broadcast and reduce, the whole input of reduce-scatter, the
whole output of all-gather, one rank's buffer for all-to-all.

Sizes. For every world size N: 0, 1, N-1, N+1, the prime 1009, 64N, 2**20,
and 2**24 with ``--full``. "Not divisible by N" means, per collective:

- all-reduce, broadcast, reduce: a count like any other; the backend's own
  chunking must handle the remainder (a ring cuts the vector into N chunks).
- reduce-scatter, all-gather: unequal blocks, the spec's ``reduce_scatter_v``
  and ``all_gather_v``: rank r's block has ``count // N + (r < count % N)``
  elements, the blocks in rank order. As in NCCL, torch and MPI, such a case
  goes to the backend's ``reduce_scatter_v`` / ``all_gather_v`` method (each
  rank sees its own block as its buffer's length), never to
  ``reduce_scatter`` / ``all_gather``, which get equal blocks only. A class
  without the ``_v`` method has these cases ``n/a``: not applicable to it,
  never a pass, never a failure.
- all-to-all: the spec defines only equal blocks, so the count is rounded down
  to a multiple of N.

Modes. ``quick`` sweeps one axis at a time from a base case (every dtype x
op, every size, every root, both in-place modes, float rounding): about 340
cases, well under a minute at 4 ranks on 2 cores. The default runs the whole grid without
2**24; ``full`` adds it.

>>> [c.count for c in grid(4, collectives=["alltoall"], dtypes=["int8"])]
[0, 4, 256, 1008, 1048576]
>>> len({c.root for c in grid(3, collectives=["broadcast"], dtypes=["int8"])})
3
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, replace

from ..spec import DTYPES, OPS, defined_for, is_float
from ..spec.errors import CollspecError
from .collectives import COLLECTIVES
from .data import PATTERN_FOR_OP

PRIME = 1009


@dataclass(frozen=True)
class Case:
    """One call of one collective on every rank."""

    collective: str
    dtype: str
    op: str | None
    count: int
    inplace: bool
    root: int | None
    pattern: str
    seed: int = 0
    #: The MPI library's algorithm the case forces (``default``: the library's
    #: own choice); None for backends that have no algorithms to choose.
    algorithm: str | None = None
    #: Call k > 0 of the same inputs (``--repeat``): its bits must equal call 0's.
    call: int = 0

    @property
    def id(self) -> str:
        """A readable identifier, unique within a run (``alg=NAME`` after the collective when forced)."""
        if self.algorithm is None:
            return self._plain_id
        collective, _, rest = self._plain_id.partition("/")
        return f"{collective}/alg={self.algorithm}/{rest}"

    @property
    def _plain_id(self) -> str:
        parts = [self.collective, self.dtype]
        if self.op:
            parts.append(self.op)
        parts += [f"n={self.count}", "inplace" if self.inplace else "outofplace"]
        if self.root is not None:
            parts.append(f"root={self.root}")
        parts += [self.pattern, f"seed={self.seed}"]
        return "/".join(parts + ([f"call={self.call}"] if self.call else []))

    @property
    def data_seed(self) -> int:
        """The seed the inputs are drawn with: the case and the run seed both matter
        (the algorithm does not: every algorithm gets the same inputs)."""
        return zlib.crc32(self._plain_id.partition("/call=")[0].encode())

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Case":
        return cls(**data)


def standard_sizes(world: int, full: bool = False) -> list[int]:
    """The sizes of the module text, without repeats, in increasing order."""
    sizes = {0, 1, max(world - 1, 0), world + 1, PRIME, 64 * world, 2**20}
    if full:
        sizes.add(2**24)
    return sorted(sizes)


def _fit(collective: str, count: int, world: int) -> int:
    """The count a collective runs with (all-to-all rounds down to a multiple of N)."""
    return count - count % world if collective == "alltoall" else count


def _patterns(op: str | None, dtype: str) -> list[str]:
    if op is None:
        return ["origin"]
    extra = ["rounding"] if op in ("sum", "avg") and is_float(dtype) else []
    return [PATTERN_FOR_OP[op], *extra]


def _expand(collective: str, dtype: str, op: str | None, count: int, world: int, root=None) -> list[Case]:
    """Every in-place mode and root (or only ``root``) of one (collective, dtype, op, count), every pattern."""
    spec = COLLECTIVES[collective]
    roots = (list(range(world)) if root is None else [root]) if spec.rooted else [None]
    count = _fit(collective, count, world)
    return [
        Case(collective, dtype, op, count, mode, r, pattern)
        for mode in spec.inplace_modes
        for r in roots
        for pattern in _patterns(op, dtype)
    ]


def _ops(collective: str, ops, dtype: str) -> list[str | None]:
    """The ops a (collective, dtype) runs: those defined on the dtype (compose: integers), or None."""
    return [op for op in ops if defined_for(op, dtype)] if COLLECTIVES[collective].reducing else [None]


def grid(world: int, full: bool = False, collectives=None, dtypes=None, ops=None, sizes=None) -> list[Case]:
    """Every combination: collectives x dtypes x ops x sizes x in-place modes x roots."""
    out: list[Case] = []
    for collective in collectives or COLLECTIVES:
        for dtype in dtypes or DTYPES:
            for op in _ops(collective, ops or OPS, dtype):
                for count in sizes if sizes is not None else standard_sizes(world, full):
                    out.extend(_expand(collective, dtype, op, count, world))
    return _unique(out)


def quick(world: int, collectives=None, dtypes=None, ops=None, sizes=None) -> list[Case]:
    """One axis at a time from a base case: a representative subset.

    - every dtype x op, both in-place modes, at N + 1 (a remainder for the
      backend's own chunking), or 64N for collectives cut into one block per
      rank (equal blocks: the size sweep has the unequal ones);
    - every size, and every root, for int32 and float32 (sum where it reduces);
    - float sums and averages of rounding inputs at 4099 elements, where
      different summation orders round apart; for collectives cut into
      blocks also at the next multiple of N, so that a backend without the
      ``_v`` methods is tested on them too.

    ``sizes``, if given, replaces every size above.
    """
    dtypes, ops = list(dtypes or DTYPES), list(ops or OPS)
    size_list = sizes if sizes is not None else standard_sizes(world)
    out: list[Case] = []
    for collective in collectives or COLLECTIVES:
        spec = COLLECTIVES[collective]
        bases = sizes if sizes is not None else [64 * world if spec.blocked else world + 1]
        last = world - 1 if spec.rooted else None

        def add(dtype, op, count, root=last, rounding=False):
            out.extend(
                c for c in _expand(collective, dtype, op, count, world, root=root) if (c.pattern == "rounding") == rounding
            )

        for dtype in dtypes:
            for op in _ops(collective, ops, dtype):
                for base in bases:
                    add(dtype, op, base)
        sweep_op = ("sum" if "sum" in ops else ops[0]) if spec.reducing else None
        for dtype in [d for d in ("int32", "float32") if d in dtypes and (sweep_op is None or defined_for(sweep_op, d))]:
            for count in size_list:
                add(dtype, sweep_op, count)
            if spec.rooted:
                add(dtype, sweep_op, bases[0], root=None)
        for dtype in [d for d in dtypes if is_float(d)]:
            for op in [o for o in ("sum", "avg") if o in ops and spec.reducing]:
                for count in sizes if sizes is not None else _rounding_sizes(spec, world):
                    add(dtype, op, count, rounding=True)
    return _unique(out)


def _rounding_sizes(collective, world: int) -> list[int]:
    """4099, and for a collective cut into blocks the next multiple of N (equal blocks)."""
    if not collective.blocked or 4099 % world == 0:
        return [4099]
    return [4099, 4099 + world - 4099 % world]


def _unique(cases: list[Case]) -> list[Case]:
    seen, out = set(), []
    for case in cases:
        if case not in seen:
            seen.add(case)
            out.append(case)
    return out


def repeated(cases: list[Case], repeat: int, seed: int) -> list[Case]:
    """Each case ``repeat`` times, with seeds ``seed, seed + 1, ...``; then, for
    bit-reproducibility, calls 1 .. repeat-1 of the first seed's inputs again
    (``call=k``: the same inputs, so the same bits are due)."""
    if repeat < 1:
        raise CollspecError(f"--repeat {repeat}: must be at least 1")
    fresh = [replace(case, seed=seed + k) for k in range(repeat) for case in cases]
    return fresh + [replace(case, seed=seed, call=k) for k in range(1, repeat) for case in cases]


def parse_counts(text: str | None) -> list[int] | None:
    """``--sizes 0,7,1K,1M``: element counts (K = 1024, M = 1024**2)."""
    if not text:
        return None
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        out.append(parse_size(item, "--sizes"))
    return out


def parse_size(text: str, option: str) -> int:
    """``4K`` -> 4096. Suffixes K, M, G are powers of 1024; a plain number is itself."""
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}
    body, unit = (text[:-1], scale[text[-1].upper()]) if text and text[-1].upper() in scale else (text, 1)
    try:
        value = int(body) * unit
    except ValueError:
        raise CollspecError(f"{option}: {text!r} is not a size (use e.g. 0, 97, 4K, 16M)") from None
    if value < 0:
        raise CollspecError(f"{option}: {text!r} is negative")
    return value
