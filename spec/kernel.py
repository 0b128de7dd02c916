"""The core of the reference: which block goes where, and the reduction order.

Every collective in :mod:`collspec.spec.collectives` is one of the generic
functions below applied to numpy arrays. The same functions applied to plain
lists of ints are the ``*_ints`` entry points at the bottom, whose contracts
(PEP 316 docstrings: ``pre:`` and ``post:``) CrossHair checks symbolically in
CI (``tests/test_crosshair.py``). So the contracts are about the code the spec
runs, not about a copy of it.

A "row" is one rank's buffer: anything that slices along its first axis
(``row[a:b]``). ``combine`` reduces two rows element-wise; ``concat`` joins a
list of rows.

>>> block_bounds([2, 0, 3], 2)
(2, 5)
>>> reduce_scatter([[1, 2], [10, 20]], [1, 1], add_lists)
[[11], [22]]
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

Row = TypeVar("Row")


def block_bounds(counts: list[int], index: int) -> tuple[int, int]:
    """The half-open range ``[start, stop)`` of block ``index`` when a buffer
    is cut into consecutive blocks of the given sizes.

    pre: all(c >= 0 for c in counts)
    pre: 0 <= index < len(counts)
    post: 0 <= __return__[0] <= __return__[1] <= sum(counts)
    post: __return__[1] - __return__[0] == counts[index]
    post: __return__[0] == sum(counts[:index])
    """
    start = sum(counts[:index])
    return start, start + counts[index]


def equal_counts(total: int, parts: int) -> list[int]:
    """Cut ``total`` elements into ``parts`` equal blocks.

    pre: parts >= 1
    pre: total >= 0 and total % parts == 0
    post: len(__return__) == parts
    post: sum(__return__) == total
    post: all(c == __return__[0] for c in __return__)
    """
    return [total // parts] * parts


def fold(rows: Sequence[Row], combine: Callable[[Row, Row], Row]) -> Row:
    """Reduce rows in rank order: ``combine(combine(rows[0], rows[1]), rows[2])``...

    This order is the spec's canonical one. In exact arithmetic every order
    gives the same result; in floating point other orders (a ring's) differ
    within :func:`collspec.spec.accuracy.error_bound`.
    """
    result = rows[0]
    for row in rows[1:]:
        result = combine(result, row)
    return result


def all_reduce(rows: Sequence[Row], combine: Callable[[Row, Row], Row]) -> list[Row]:
    """Every rank receives the reduction of all ranks' rows."""
    total = fold(rows, combine)
    return [total for _ in rows]


def reduce_scatter(rows: Sequence[Row], counts: list[int], combine: Callable[[Row, Row], Row]) -> list[Row]:
    """Rank r receives block r (of ``counts[r]`` elements) of the reduction."""
    out = []
    for rank in range(len(rows)):
        start, stop = block_bounds(counts, rank)
        out.append(fold([row[start:stop] for row in rows], combine))
    return out


def all_gather(parts: Sequence[Row], concat: Callable[[list[Row]], Row]) -> list[Row]:
    """Every rank receives all ranks' parts, concatenated in rank order."""
    whole = concat(list(parts))
    return [whole for _ in parts]


def all_to_all(rows: Sequence[Row], concat: Callable[[list[Row]], Row]) -> list[Row]:
    """Block j of rank i's row goes to rank j, where it becomes block i.

    Every row is cut into ``len(rows)`` equal blocks.
    """
    n = len(rows)
    counts = equal_counts(len(rows[0]), n)
    out = []
    for dst in range(n):
        start, stop = block_bounds(counts, dst)
        out.append(concat([rows[src][start:stop] for src in range(n)]))
    return out


def broadcast(rows: Sequence[Row], root: int) -> list[Row]:
    """Every rank receives the root's row."""
    return [rows[root] for _ in rows]


def reduce(rows: Sequence[Row], root: int, combine: Callable[[Row, Row], Row]) -> list[Row | None]:
    """The root receives the reduction; every other rank receives nothing (None)."""
    total = fold(rows, combine)
    return [total if rank == root else None for rank in range(len(rows))]


# -- The same functions on lists of ints, with the contracts CrossHair checks --


def add_lists(a: list[int], b: list[int]) -> list[int]:
    """Element-wise sum of two equally long lists.

    pre: len(a) == len(b)
    post: len(__return__) == len(a)
    """
    return [x + y for x, y in zip(a, b)]


def concat_lists(parts: list[list[int]]) -> list[int]:
    """Concatenate lists in order.

    post: len(__return__) == sum(len(p) for p in parts)
    """
    return [x for part in parts for x in part]


def all_reduce_ints(rows: list[list[int]]) -> list[list[int]]:
    """All-reduce (sum) of integer rows.

    pre: 1 <= len(rows) <= 4 and len(rows[0]) <= 4
    pre: all(len(row) == len(rows[0]) for row in rows)
    post: len(__return__) == len(rows)
    post: all(out == __return__[0] for out in __return__)
    post: __return__[0] == [sum(row[i] for row in rows) for i in range(len(rows[0]))]
    """
    return all_reduce(rows, add_lists)


def reduce_scatter_ints(rows: list[list[int]], counts: list[int]) -> list[list[int]]:
    """Reduce-scatter (sum) of integer rows; rank r gets block r.

    The postcondition is the identity the ring is built on: a reduce-scatter
    followed by an all-gather is an all-reduce.

    pre: 1 <= len(rows) <= 4 and len(rows[0]) <= 4
    pre: all(len(row) == len(rows[0]) for row in rows)
    pre: len(counts) == len(rows) and all(c >= 0 for c in counts)
    pre: sum(counts) == len(rows[0])
    post: [len(block) for block in __return__] == counts
    post: all_gather_ints(__return__)[0] == all_reduce_ints(rows)[0]
    """
    return reduce_scatter(rows, counts, add_lists)


def all_gather_ints(parts: list[list[int]]) -> list[list[int]]:
    """All-gather of integer parts of any lengths.

    Cutting any rank's result at the part boundaries gives the parts back.

    pre: 1 <= len(parts) <= 4
    post: all(out == __return__[0] for out in __return__)
    post: [__return__[0][slice(*block_bounds([len(p) for p in parts], r))] for r in range(len(parts))] == parts
    """
    return all_gather(parts, concat_lists)


def all_to_all_ints(rows: list[list[int]]) -> list[list[int]]:
    """All-to-all of integer rows; applied twice it is the identity.

    pre: 1 <= len(rows) <= 3 and len(rows[0]) <= 6
    pre: all(len(row) == len(rows[0]) for row in rows)
    pre: len(rows[0]) % len(rows) == 0
    post: all(len(out) == len(rows[0]) for out in __return__)
    post: all_to_all(__return__, concat_lists) == rows
    """
    return all_to_all(rows, concat_lists)
