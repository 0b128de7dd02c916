"""Value algebras: what a cell holds while the interpreter runs a schedule.

An algebra says three things: the values of a rank's inputs
(:meth:`~Algebra.leaves`), the value of a cell nobody initialised
(:meth:`~Algebra.garbage`), and how a reduce combines two values
(:meth:`~Algebra.combine`, element-wise over arrays). The interpreter is the
same for all of them:

- :class:`Numbers`: concrete numbers in a dtype, rounded after every hop.
- :class:`Symbols`: any Python objects combined with ``+``; with
  :func:`contributions` they are the spec's contributor multisets (exact),
  and the proofs use Z3 terms the same way.
- :class:`Fingerprints`: five uint64 lanes per cell, for schedules too large
  for exact multisets. Lanes 0-1 are two independent random linear hashes of
  the multiset of contributions (so equal multisets always agree, and
  different ones collide with probability about 2**-64 per lane); lane 2
  counts the contributions exactly; lane 3 is the cell's column (the cell
  its contributions started in, or MIXED); lane 4 hashes the shape of the
  reduction tree up to commutativity, so two cells with equal lane 4 were
  computed by the same additions in the same grouping and hold the same
  bits in floating point.
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from ..spec.contributions import Contributions
from ..spec.ops import combiner


class Algebra(Protocol):
    def leaves(self, rank: int, cells: np.ndarray) -> np.ndarray:
        """Rank ``rank``'s input elements k = 0.., starting in ``cells[k]``."""

    def garbage(self, rank: int, cells: np.ndarray) -> np.ndarray:
        """What uninitialised ``cells`` of ``rank`` hold."""

    def combine(self, acc: np.ndarray, incoming: np.ndarray) -> np.ndarray:
        """The result of reducing ``incoming`` into ``acc``, element-wise."""


class Numbers:
    """Concrete values: ``values[r][k]`` is rank r's input element k (a chunk:
    a scalar or an array). Reductions run in ``dtype`` with ``op`` through the
    spec's own combiner, so floats round to the dtype after every hop.
    Uninitialised cells hold ``fill`` (NaN for floats, so garbage shows)."""

    def __init__(self, values: list[np.ndarray], op: str = "sum", fill=None):
        self.values = [np.asarray(v) for v in values]
        self.dtype = self.values[0].dtype
        self.op = op
        self._combine = combiner("sum" if op == "avg" else op, self.dtype)
        if fill is None:
            fill = np.nan if np.issubdtype(self.dtype, np.inexact) or self.dtype.kind == "V" else 0
        self.fill = fill

    def leaves(self, rank, cells):
        return self.values[rank][: len(cells)]

    def garbage(self, rank, cells):
        shape = (len(cells),) + self.values[0].shape[1:]
        return np.full(shape, self.fill, dtype=self.dtype)

    def combine(self, acc, incoming):
        return self._combine(acc, incoming)


class Symbols:
    """Python objects combined with ``combine`` (``+`` by default)."""

    def __init__(
        self,
        leaf: Callable[[int, int], object],
        garbage: Callable[[int, int], object],
        combine: Callable[[object, object], object] | None = None,
    ):
        self._leaf, self._garbage = leaf, garbage
        self._combine = np.frompyfunc(combine, 2, 1) if combine is not None else np.add

    def leaves(self, rank, cells):
        out = np.empty(len(cells), dtype=object)
        for k in range(len(cells)):
            out[k] = self._leaf(rank, k)
        return out

    def garbage(self, rank, cells):
        out = np.empty(len(cells), dtype=object)
        for k, cell in enumerate(cells):
            out[k] = self._garbage(rank, int(cell))
        return out

    def combine(self, acc, incoming):
        return np.asarray(self._combine(acc, incoming), dtype=object)


def contributions() -> Symbols:
    """Exact contributor multisets: input element k of rank r is the label
    (r, k); an uninitialised cell c of rank r is the label (r, -1 - c)."""
    return Symbols(Contributions.leaf, lambda rank, cell: Contributions.leaf(rank, -1 - cell))


def is_uninitialised(index: int) -> bool:
    """Whether a contribution label's index marks an uninitialised cell."""
    return index < 0


# -- fingerprints ---------------------------------------------------------------

H1, H2, COUNT, COLUMN, SHAPE = range(5)
LANES = 5
MIXED = np.uint64(2**64 - 1)  # column of a cell that combined different columns
GARBAGE = np.uint64(2**64 - 2)  # column of an uninitialised cell
_GARBAGE_HASH = (np.uint64(0xA5A5A5A5A5A5A5A5 | 1), np.uint64(0x5A5A5A5A5A5A5A5B), np.uint64(0x3C3C3C3C3C3C3C3D))
_K1, _K2, _K3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that scatters bits."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _label_hash(rank, index: np.ndarray, salt: int) -> np.ndarray:
    """A pseudo-random 64-bit value per (rank, index) label: distinct labels
    get distinct keys, and the mix is a bijection, so distinct labels never
    share a hash within one lane."""
    key = (np.asarray(rank).astype(np.uint64) << np.uint64(32)) ^ (index.astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF))
    with np.errstate(over="ignore"):
        return _mix(key * np.uint64(0x9E3779B97F4A7C15) + np.uint64(salt))


class Fingerprints:
    """Five uint64 lanes per cell (see the module text)."""

    def __init__(self, seed: int = 0x5EED):
        self.salts = (seed * 2 + 1, seed * 2 + 0x1234567)

    def _labels(self, rank, index: np.ndarray, columns: np.ndarray, count: int) -> np.ndarray:
        out = np.empty((len(index), LANES), dtype=np.uint64)
        out[:, H1] = _label_hash(rank, index, self.salts[0])
        out[:, H2] = _label_hash(rank, index, self.salts[1])
        out[:, COUNT] = count
        out[:, COLUMN] = columns
        out[:, SHAPE] = out[:, H1]
        return out

    def leaves(self, rank, cells):
        return self._labels(rank, np.arange(len(cells)), np.asarray(cells, dtype=np.uint64), 1)

    def garbage(self, rank, cells):
        """Uninitialised cells: count 0, column GARBAGE, and one odd constant
        in each hash lane, so any number (below 2**64) of them added to a
        value changes its hash; the exact re-check says which cells."""
        out = np.zeros((len(cells), LANES), dtype=np.uint64)
        out[:, H1], out[:, H2], out[:, SHAPE] = _GARBAGE_HASH
        out[:, COLUMN] = GARBAGE
        return out

    def initial_state(self, schedule) -> np.ndarray:
        """All ranks at once (the interpreter's fast path), built a block of
        ranks at a time so that no temporary is as large as the state."""
        layout = schedule.layout
        n, cells = schedule.ranks, layout.cells
        state = np.empty((n, cells, LANES), dtype=np.uint64)
        flat = state.reshape(n * cells, LANES)
        unset = np.ones(n * cells, dtype=bool)
        for rank, index, cell, _ in self._leaf_blocks(schedule):
            at = rank * cells + cell
            if at.size and at[-1] - at[0] == at.size - 1 and np.all(np.diff(at) == 1):
                at = slice(int(at[0]), int(at[-1]) + 1)  # every cell of these ranks, in order
            flat[at] = self._labels(rank, index, cell.astype(np.uint64), 1)
            unset[at] = False
        if unset.any():
            flat[unset] = self.garbage(0, [0])[0]
        return state

    def leaf_rows(self, schedule, lanes: int = LANES) -> list[np.ndarray]:
        """``leaves(r, layout.inputs[r])[:, :lanes]`` for every rank r, computed
        a block of ranks at a time (``lanes=COUNT + 1``: the additive lanes)."""
        rows: list[np.ndarray] = []
        for rank, index, cell, lengths in self._leaf_blocks(schedule):
            values = np.ascontiguousarray(self._labels(rank, index, cell.astype(np.uint64), 1)[:, :lanes])
            rows.extend(np.split(values, np.cumsum(lengths)[:-1]))
        return rows

    def _leaf_blocks(self, schedule, block: int = 1 << 20):
        """(rank, input index, cell, inputs per rank) of every input element,
        for consecutive blocks of ranks with about ``block`` elements each."""
        inputs = schedule.layout.inputs
        lengths = np.array([len(c) for c in inputs], dtype=np.int64)
        first = 0
        while first < schedule.ranks:
            last, size = first, 0
            while last < schedule.ranks and (size == 0 or size + lengths[last] <= block):
                size += int(lengths[last])
                last += 1
            part = lengths[first:last]
            rank = np.repeat(np.arange(first, last, dtype=np.int64), part)
            index = np.arange(rank.size, dtype=np.int64) - np.repeat(np.r_[0, np.cumsum(part)[:-1]], part)
            cell = np.concatenate(inputs[first:last]).astype(np.int64) if rank.size else np.zeros(0, np.int64)
            yield rank, index, cell, part
            first = last

    def combine(self, acc, incoming):
        out = np.empty_like(acc)
        with np.errstate(over="ignore"):
            out[:, :3] = acc[:, :3] + incoming[:, :3]
            a, b = acc[:, SHAPE], incoming[:, SHAPE]
            # symmetric (a+b == b+a in IEEE arithmetic) but not associative
            out[:, SHAPE] = _mix((a + b) * _K1 + (a * b) * _K2 + _K3)
        same = acc[:, COLUMN] == incoming[:, COLUMN]
        out[:, COLUMN] = np.where(same, acc[:, COLUMN], MIXED)
        return out

    def additive(self, values: np.ndarray) -> np.ndarray:
        """The lanes that add under reduction (hashes and count)."""
        return values[..., : COUNT + 1]
