"""Symbolic contributions: which ranks' inputs are inside a value.

A :class:`Contributions` value is a multiset of input labels ``(rank,
index)``: "rank 0's element 3 is in here once, rank 2's twice". Adding two
values adds the multisets, so running a collective on symbolic inputs tells
exactly what every output cell is made of. A set would not do: it cannot tell
a value that counts rank 1 twice from a correct one.

The text form is the worked example's notation: the ranks inside, joined by
a middle dot, when every label shares one index.

>>> import numpy as np
>>> from collspec.spec import all_reduce
>>> x = symbolic_inputs(ranks=4, count=4)
>>> str(x[3][0]), str(x[0][3] + x[3][3])
('3', '0·3')
>>> out = all_reduce(x)
>>> str(out[2][1])
'0·1·2·3'
>>> out[2][1] == complete(ranks=4, index=1)
True
>>> twice = x[0][1] + x[1][1] + x[1][1]
>>> str(twice), twice.compare(complete(ranks=3, index=1))
('0·1·1', ([(2, 1, 1)], [(1, 1, 1)]))
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

Label = tuple[int, int]  # (rank, index)


class Contributions:
    """An immutable multiset of ``(rank, index)`` input labels.

    Combines with ``+`` (multiset sum). ``*`` means the same: every reduction
    operator gathers contributions alike, so a schedule's correctness does
    not depend on which op it later runs with.

    A sum is stored as a node pointing at its two operands and flattened into
    label counts only when asked (``==``, :meth:`labels`, ``str``), counting
    shared operands once per path. So adding costs O(1) however large the
    operands, and a schedule of millions of additions stays cheap to run.
    """

    __slots__ = ("_flat", "_parts", "_hash")

    def __init__(self, counts: Mapping[Label, int] | None = None):
        clean = {(int(r), int(i)): int(n) for (r, i), n in (counts or {}).items() if n}
        if any(n < 0 for n in clean.values()):
            raise ValueError("a contribution count cannot be negative")
        self._flat: dict[Label, int] | None = clean
        self._parts: tuple[Contributions, Contributions] | None = None
        self._hash: int | None = None

    @classmethod
    def leaf(cls, rank: int, index: int) -> "Contributions":
        """The input element ``index`` of ``rank``, once."""
        return cls({(rank, index): 1})

    @classmethod
    def of(cls, labels: Iterable[Label]) -> "Contributions":
        """A multiset from labels, repeated labels counted repeatedly."""
        counts: dict[Label, int] = {}
        for rank, index in labels:
            counts[(int(rank), int(index))] = counts.get((int(rank), int(index)), 0) + 1
        return cls(counts)

    def __add__(self, other: "Contributions") -> "Contributions":
        if not isinstance(other, Contributions):
            return NotImplemented
        if other._flat is not None and not other._flat:
            return self
        if self._flat is not None and not self._flat:
            return other
        node = Contributions.__new__(Contributions)
        node._flat, node._parts, node._hash = None, (self, other), None
        return node

    __mul__ = __add__

    def __radd__(self, other):
        if other == 0:  # so that sum() works
            return self
        return NotImplemented

    @property
    def _counts(self) -> dict[Label, int]:
        if self._flat is None:
            self._flat = _flatten(self)
            self._parts = None
        return self._flat

    def __eq__(self, other) -> bool:
        return isinstance(other, Contributions) and (self is other or self._counts == other._counts)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._counts.items()))
        return self._hash

    def __len__(self) -> int:
        """Total number of labels, repetitions included."""
        return sum(self._counts.values())

    def __bool__(self) -> bool:
        return self._flat is None or bool(self._flat)

    def count(self, rank: int, index: int) -> int:
        """How many times ``(rank, index)`` is inside."""
        return self._counts.get((rank, index), 0)

    def labels(self) -> list[tuple[int, int, int]]:
        """``(rank, index, times)`` for every distinct label, sorted."""
        return [(r, i, n) for (r, i), n in sorted(self._counts.items())]

    def ranks(self) -> list[int]:
        """The distinct ranks inside, sorted."""
        return sorted({r for r, _ in self._counts})

    def indices(self) -> list[int]:
        """The distinct element indices inside, sorted."""
        return sorted({i for _, i in self._counts})

    def compare(self, expected: "Contributions") -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        """What is missing and what is extra relative to ``expected``.

        Returns ``(missing, extra)``, each a sorted list of ``(rank, index,
        times)``; both empty exactly when the two are equal.
        """
        mine, theirs = self._counts, expected._counts
        missing, extra = [], []
        for label in sorted(set(mine) | set(theirs)):
            have, want = mine.get(label, 0), theirs.get(label, 0)
            if have < want:
                missing.append((*label, want - have))
            elif have > want:
                extra.append((*label, have - want))
        return missing, extra

    def __str__(self) -> str:
        return self.format()

    def format(self, indices: bool | None = None) -> str:
        """Ranks joined by '·' (``0·1·1``); with ``indices`` each label is
        ``rank[index]``. By default indices show only when they differ."""
        counts = self._counts
        if not counts:
            return "∅"
        items = sorted(counts.items())
        if indices is None:
            indices = len({i for (_, i), _ in items}) > 1
        if not indices:
            return "·".join(str(r) for (r, _), n in items for _ in range(n))
        return "·".join(f"{r}[{i}]" for (r, i), n in items for _ in range(n))

    def __repr__(self) -> str:
        return f"Contributions({str(self)!r})"


def _flatten(root: Contributions) -> dict[Label, int]:
    """Label counts of a sum node: each label counted once per path to it."""
    order: list[Contributions] = []  # post-order: operands before sums
    seen: set[int] = set()
    stack: list[tuple[Contributions, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if node._flat is None:
            stack.extend((part, False) for part in node._parts)
    paths: dict[int, int] = {id(root): 1}
    counts: dict[Label, int] = {}
    for node in reversed(order):  # every sum before its operands
        times = paths.get(id(node), 0)
        if node._flat is None:
            for part in node._parts:
                paths[id(part)] = paths.get(id(part), 0) + times
        else:
            for label, n in node._flat.items():
                counts[label] = counts.get(label, 0) + n * times
    return counts


def symbolic_inputs(ranks: int, count: int) -> list[np.ndarray]:
    """Per-rank object arrays where rank r's element i is the label (r, i)."""
    rows = []
    for rank in range(ranks):
        row = np.empty(count, dtype=object)
        for index in range(count):
            row[index] = Contributions.leaf(rank, index)
        rows.append(row)
    return rows


def complete(ranks: int, index: int) -> Contributions:
    """Element ``index`` of every one of ``ranks`` ranks, each exactly once."""
    return Contributions({(rank, index): 1 for rank in range(ranks)})
