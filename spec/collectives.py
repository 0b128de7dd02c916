"""The collectives as pure functions over the ranks' inputs.

Each function takes one numpy array per rank (``inputs[r]`` is rank r's
buffer) and returns one result per rank. Nothing is modified in place and no
result shares memory with an input or with another rank's result.

Preconditions are checked first and a violation raises
:class:`~collspec.spec.errors.SpecError` naming the rank and the field.
Postconditions are checked before returning; one that fails is a bug in
collspec and raises ``AssertionError``.

Buffers are split along their first axis: "count" below means
``len(inputs[r])``, and a block is a run of consecutive rows.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import kernel
from .dtypes import DTYPES, dtype_name, is_supported, is_symbolic
from .errors import SpecError
from .ops import ALL_OPS, combiner, defined_for, finish, widen

Rows = list[np.ndarray]


# -- preconditions ------------------------------------------------------------


def _as_rows(inputs: Sequence, collective: str) -> Rows:
    if isinstance(inputs, np.ndarray) and inputs.ndim == 0:
        raise SpecError(f"{collective}: inputs must be one array per rank, got a scalar", field="inputs")
    rows = [np.asarray(x) for x in inputs]
    if not rows:
        raise SpecError(f"{collective}: needs at least one rank, got 0 inputs", field="inputs")
    for rank, row in enumerate(rows):
        if not is_supported(row.dtype):
            raise SpecError(
                f"{collective}: rank {rank}: dtype {row.dtype} is not supported; "
                f"use one of {', '.join(DTYPES)}",
                rank=rank,
                field="dtype",
            )
        if row.dtype != rows[0].dtype:
            raise SpecError(
                f"{collective}: rank {rank}: dtype {dtype_name(row.dtype)} differs from rank 0's "
                f"{dtype_name(rows[0].dtype)}; every rank must pass the same dtype",
                rank=rank,
                field="dtype",
            )
    return rows


def _require_same_shape(rows: Rows, collective: str) -> None:
    for rank, row in enumerate(rows):
        if row.shape != rows[0].shape:
            raise SpecError(
                f"{collective}: rank {rank}: shape {row.shape} differs from rank 0's {rows[0].shape}; "
                "every rank must pass the same shape",
                rank=rank,
                field="shape",
            )


def _require_splittable(rows: Rows, collective: str) -> None:
    for rank, row in enumerate(rows):
        if row.ndim == 0:
            raise SpecError(
                f"{collective}: rank {rank}: a 0-d array has no first axis to split; pass a 1-d array",
                rank=rank,
                field="shape",
            )


def _require_op(op: str, rows: Rows, collective: str) -> None:
    if op not in ALL_OPS:
        raise SpecError(f"{collective}: op {op!r} is not one of {', '.join(ALL_OPS)}", field="op")
    if not is_symbolic(rows[0].dtype) and not defined_for(op, rows[0].dtype):
        raise SpecError(f"{collective}: op {op!r} is defined on integer types only, not {rows[0].dtype}", field="op")
    if is_symbolic(rows[0].dtype) and op != "sum":
        raise SpecError(
            f"{collective}: symbolic (object) inputs combine with '+' only; pass op='sum'", field="op"
        )


def _require_root(root: int, rows: Rows, collective: str) -> None:
    n = len(rows)
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < n:
        raise SpecError(f"{collective}: root {root!r} is out of range for {n} ranks (0..{n - 1})", field="root")


def _require_divisible(rows: Rows, collective: str, hint: str) -> list[int]:
    n, count = len(rows), len(rows[0])
    if count % n:
        raise SpecError(
            f"{collective}: count {count} is not divisible by {n} ranks; {hint}", field="count"
        )
    return kernel.equal_counts(count, n)


# -- postconditions -----------------------------------------------------------


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object:
        return a.shape == b.shape and all(x == y for x, y in zip(a.ravel(), b.ravel()))
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _ensure(condition: bool, collective: str, what: str) -> None:
    if not condition:
        raise AssertionError(f"postcondition of {collective} failed: {what}")


def _owned(results: list) -> list:
    """Fresh arrays: no result aliases an input or another rank's result."""
    return [None if r is None else np.array(r, copy=True) for r in results]


def _reducing(op: str, rows: Rows, run: Callable[[Rows, Callable], list]) -> list:
    """Run a reducing kernel function in the op's working type, then finish."""
    work = widen(op, rows)
    results = run(work, combiner(op, work[0].dtype))
    return [None if r is None else finish(op, r, len(rows), rows[0].dtype) for r in results]


# -- the collectives ----------------------------------------------------------


def all_reduce(inputs: Sequence[np.ndarray], op: str = "sum") -> Rows:
    """Every rank receives the element-wise reduction of all ranks' inputs.

    Pre: at least one rank; every rank passes the same shape and dtype.
    Post: every rank's result has that shape and dtype, and all ranks' results
    are bit-for-bit identical.

    >>> all_reduce([np.array([1, 2]), np.array([10, 20])])
    [array([11, 22]), array([11, 22])]
    """
    rows = _as_rows(inputs, "all_reduce")
    _require_same_shape(rows, "all_reduce")
    _require_op(op, rows, "all_reduce")
    out = _owned(_reducing(op, rows, kernel.all_reduce))
    _ensure(all(o.shape == rows[0].shape and o.dtype == rows[0].dtype for o in out), "all_reduce", "shape and dtype kept")
    _ensure(all(_identical(o, out[0]) for o in out), "all_reduce", "every rank holds identical bits")
    return out


def reduce_scatter(inputs: Sequence[np.ndarray], op: str = "sum") -> Rows:
    """Rank r receives block r of the reduction, with equal blocks.

    Pre: as :func:`all_reduce`, and the count is divisible by the number of
    ranks (:func:`reduce_scatter_v` takes per-rank counts).
    Post: rank r's block has count/N rows.

    >>> reduce_scatter([np.array([1, 2]), np.array([10, 20])])
    [array([11]), array([22])]
    """
    rows = _as_rows(inputs, "reduce_scatter")
    _require_same_shape(rows, "reduce_scatter")
    _require_splittable(rows, "reduce_scatter")
    _require_op(op, rows, "reduce_scatter")
    counts = _require_divisible(rows, "reduce_scatter", "use reduce_scatter_v with per-rank counts")
    return _reduce_scatter(rows, counts, op, "reduce_scatter")


def reduce_scatter_v(inputs: Sequence[np.ndarray], counts: Sequence[int], op: str = "sum") -> Rows:
    """Rank r receives block r of the reduction, of ``counts[r]`` rows.

    Pre: as :func:`all_reduce`; one non-negative count per rank, summing to
    the count every rank passes.

    >>> reduce_scatter_v([np.array([1, 2, 3]), np.array([10, 20, 30])], [2, 1])
    [array([11, 22]), array([33])]
    """
    rows = _as_rows(inputs, "reduce_scatter_v")
    _require_same_shape(rows, "reduce_scatter_v")
    _require_splittable(rows, "reduce_scatter_v")
    _require_op(op, rows, "reduce_scatter_v")
    counts = [int(c) for c in counts]
    if len(counts) != len(rows):
        raise SpecError(
            f"reduce_scatter_v: {len(counts)} counts for {len(rows)} ranks; pass one count per rank", field="counts"
        )
    for rank, c in enumerate(counts):
        if c < 0:
            raise SpecError(f"reduce_scatter_v: rank {rank}: count {c} is negative", rank=rank, field="counts")
    if sum(counts) != len(rows[0]):
        raise SpecError(
            f"reduce_scatter_v: counts sum to {sum(counts)} but every rank passes {len(rows[0])} rows",
            field="counts",
        )
    return _reduce_scatter(rows, counts, op, "reduce_scatter_v")


def _reduce_scatter(rows: Rows, counts: list[int], op: str, name: str) -> Rows:
    out = _owned(_reducing(op, rows, lambda work, combine: kernel.reduce_scatter(work, counts, combine)))
    _ensure([len(o) for o in out] == counts, name, "rank r holds counts[r] rows")
    return out


def all_gather(inputs: Sequence[np.ndarray]) -> Rows:
    """Every rank receives all ranks' inputs concatenated in rank order.

    Pre: every rank passes the same shape and dtype (:func:`all_gather_v`
    allows different counts).
    Post: every result has N times the count, and block r is rank r's input.

    >>> all_gather([np.array([1]), np.array([2])])
    [array([1, 2]), array([1, 2])]
    """
    rows = _as_rows(inputs, "all_gather")
    _require_same_shape(rows, "all_gather")
    _require_splittable(rows, "all_gather")
    return _all_gather(rows, "all_gather")


def all_gather_v(inputs: Sequence[np.ndarray]) -> Rows:
    """Every rank receives all ranks' inputs concatenated; counts may differ.

    Pre: same dtype, and the same shape after the first axis, on every rank.

    >>> all_gather_v([np.array([1, 2]), np.array([], dtype=int), np.array([3])])[1]
    array([1, 2, 3])
    """
    rows = _as_rows(inputs, "all_gather_v")
    _require_splittable(rows, "all_gather_v")
    for rank, row in enumerate(rows):
        if row.shape[1:] != rows[0].shape[1:]:
            raise SpecError(
                f"all_gather_v: rank {rank}: row shape {row.shape[1:]} differs from rank 0's {rows[0].shape[1:]}",
                rank=rank,
                field="shape",
            )
    return _all_gather(rows, "all_gather_v")


def _all_gather(rows: Rows, name: str) -> Rows:
    out = _owned(kernel.all_gather(rows, np.concatenate))
    counts = [len(r) for r in rows]
    _ensure(
        all(_identical(o[slice(*kernel.block_bounds(counts, r))], rows[r]) for o in out for r in range(len(rows))),
        name,
        "block r of every result is rank r's input",
    )
    return out


def broadcast(inputs: Sequence[np.ndarray], root: int = 0) -> Rows:
    """Every rank receives the root's input.

    Pre: same shape and dtype on every rank; 0 <= root < N.

    >>> broadcast([np.array([1]), np.array([2])], root=1)
    [array([2]), array([2])]
    """
    rows = _as_rows(inputs, "broadcast")
    _require_same_shape(rows, "broadcast")
    _require_root(root, rows, "broadcast")
    out = _owned(kernel.broadcast(rows, int(root)))
    _ensure(all(_identical(o, rows[root]) for o in out), "broadcast", "every rank holds the root's input")
    return out


def reduce(inputs: Sequence[np.ndarray], root: int = 0, op: str = "sum") -> list[np.ndarray | None]:
    """The root receives the reduction; every other rank receives ``None``.

    Pre: as :func:`all_reduce`, and 0 <= root < N. (A real library leaves the
    non-root output buffers untouched; conformance checks that.)

    >>> reduce([np.array([1]), np.array([2])], root=1)
    [None, array([3])]
    """
    rows = _as_rows(inputs, "reduce")
    _require_same_shape(rows, "reduce")
    _require_root(root, rows, "reduce")
    _require_op(op, rows, "reduce")
    out = _owned(_reducing(op, rows, lambda work, combine: kernel.reduce(work, int(root), combine)))
    _ensure(all((o is None) == (r != root) for r, o in enumerate(out)), "reduce", "only the root receives")
    return out


def all_to_all(inputs: Sequence[np.ndarray]) -> Rows:
    """Block j of rank i's input becomes block i of rank j's result.

    Pre: same shape and dtype on every rank; the count is divisible by N.
    Post: applying it twice gives the inputs back.

    >>> all_to_all([np.array([1, 2]), np.array([3, 4])])
    [array([1, 3]), array([2, 4])]
    """
    rows = _as_rows(inputs, "all_to_all")
    _require_same_shape(rows, "all_to_all")
    _require_splittable(rows, "all_to_all")
    _require_divisible(rows, "all_to_all", "pad the buffer to a multiple of the rank count")
    out = _owned(kernel.all_to_all(rows, np.concatenate))
    _ensure(all(o.shape == rows[0].shape for o in out), "all_to_all", "shape kept")
    return out


#: The collectives by the names the command line and schedule files use.
BY_NAME: dict[str, Callable] = {
    "allreduce": all_reduce,
    "reduce_scatter": reduce_scatter,
    "allgather": all_gather,
    "broadcast": broadcast,
    "reduce": reduce,
    "alltoall": all_to_all,
}

_ALIASES = {
    "all_reduce": "allreduce",
    "reducescatter": "reduce_scatter",
    "reduce-scatter": "reduce_scatter",
    "all_gather": "allgather",
    "all-gather": "allgather",
    "all-reduce": "allreduce",
    "all_to_all": "alltoall",
    "all-to-all": "alltoall",
}


def collective_name(name: str) -> str:
    """The canonical name of a collective ('reducescatter' -> 'reduce_scatter').

    >>> collective_name("all-reduce")
    'allreduce'
    """
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in BY_NAME:
        raise SpecError(f"unknown collective {name!r}; use one of {', '.join(BY_NAME)}", field="collective")
    return key
