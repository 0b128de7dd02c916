"""collspec.spec: what each collective must compute.

This package is the reference model of the collective operations that
distributed training runs on. A job runs as N processes, one per GPU, each
with a number from 0 to N-1 called its **rank**; a collective is a step
that every rank calls at the same time and that moves and combines their
data. In **data-parallel training** every rank holds a full copy of the
model, computes a gradient on its own share of the batch, and the ranks
average their gradients before each update; **ZeRO** (and FSDP) shard the
optimizer state, gradients or weights so that each rank keeps only its
1/N slice.

Each collective here is a pure function: it takes one numpy array per rank
(``inputs[r]`` is what rank r contributes) and returns what every rank must
hold afterwards. The examples on this page are executed by the test suite,
so they cannot drift from the code.

The three collectives of data-parallel training
===============================================

**All-reduce** combines a value from every rank and gives the combined
result to all of them. Averaging gradients is an all-reduce:

>>> import numpy as np
>>> from collspec.spec import all_reduce, reduce_scatter, all_gather
>>> all_reduce([np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])])
[array([11, 22, 33, 44]), array([11, 22, 33, 44])]

**Reduce-scatter** combines the same way but gives each rank one slice of
the answer: rank r gets slice r.

>>> reduce_scatter([np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])])
[array([11, 22]), array([33, 44])]

**All-gather** is the reverse: each rank starts with one slice and ends with
all of them, in rank order.

>>> all_gather([np.array([11, 22]), np.array([33, 44])])
[array([11, 22, 33, 44]), array([11, 22, 33, 44])]

=============== ======================= ================================
collective      each rank starts with   each rank ends with
=============== ======================= ================================
all-reduce      a full vector           the combined full vector
reduce-scatter  a full vector           its slice of the combined vector
all-gather      one slice               the full vector of all slices
=============== ======================= ================================

The identity everything rests on
--------------------------------

A reduce-scatter followed by an all-gather is an all-reduce. The ring
algorithm is exactly these two phases, and ZeRO-style sharding stops after
the first one (each rank updates only its slice of the weights).

>>> rng = np.random.default_rng(0)
>>> x = [rng.integers(-9, 9, size=8) for _ in range(4)]
>>> combined = all_gather(reduce_scatter(x))
>>> all(np.array_equal(a, b) for a, b in zip(combined, all_reduce(x)))
True

A worked example: four gradients
================================

Four GPUs, ranks 0 to 3, each computed a gradient for the same four
weights w0..w3:

=====  ====  ====  ====  ====
rank    w0    w1    w2    w3
=====  ====  ====  ====  ====
  0     +1    -1    -1    -1
  1      0     0    -2     0
  2     -1    +1    -3    +1
  3     -2    +2    -4    +2
=====  ====  ====  ====  ====

>>> grads = [np.array(row, dtype=np.float32) for row in
...          ([1, -1, -1, -1], [0, 0, -2, 0], [-1, 1, -3, 1], [-2, 2, -4, 2])]

The column totals are -2, +2, -10, +2, and averaging divides them by 4:

>>> all_reduce(grads, "sum")[0]
array([ -2.,   2., -10.,   2.], dtype=float32)
>>> all_reduce(grads, "avg")[3]
array([-0.5,  0.5, -2.5,  0.5], dtype=float32)

A reduce-scatter of the same gradients leaves GPU r with the total of
column r only; an all-gather of those totals rebuilds the whole row:

>>> [float(s[0]) for s in reduce_scatter(grads)]
[-2.0, 2.0, -10.0, 2.0]

Which inputs are inside a value
===============================

Run the same functions on symbolic inputs and every output cell says which
ranks' elements it contains, and how often
(:mod:`collspec.spec.contributions`). "Every rank holds every contribution
exactly once" is then a plain comparison:

>>> from collspec.spec import symbolic_inputs, complete
>>> out = all_reduce(symbolic_inputs(ranks=4, count=4))
>>> str(out[1][2])
'0·1·2·3'
>>> all(out[r][c] == complete(4, c) for r in range(4) for c in range(4))
True

The other collectives
=====================

>>> from collspec.spec import broadcast, reduce, all_to_all
>>> broadcast([np.array([1, 2]), np.array([0, 0])], root=0)[1]
array([1, 2])
>>> reduce([np.array([1, 2]), np.array([3, 4])], root=1, op="max")
[None, array([3, 4])]
>>> all_to_all([np.array([1, 2]), np.array([3, 4])])
[array([1, 3]), array([2, 4])]

Ops are ``sum``, ``prod``, ``min``, ``max`` and ``avg``
(:mod:`collspec.spec.ops` defines them on every type: integers wrap, and
integer avg rounds the exact mean toward zero). Floats round after each
operation, so the order of a reduction matters: :mod:`collspec.spec.accuracy`
gives the exact reference and the error bound every correct order meets, and
:mod:`collspec.spec.floating_point` works through inputs where a ring's result
differs from the rank-order sum (while every rank still holds the same bits).

Bad input is refused with the rank and the field named:

>>> from collspec.spec import SpecError
>>> try:
...     reduce_scatter([np.zeros(3), np.zeros(3)])
... except SpecError as error:
...     for part in str(error).split("; "):
...         print(part)
reduce_scatter: count 3 is not divisible by 2 ranks
use reduce_scatter_v with per-rank counts
"""

from .accuracy import Accuracy, check_reduction, error_bound, exact_reduce, gamma
from .bandwidth import bus_factor, traffic_lower_bound
from .collectives import (
    BY_NAME,
    all_gather,
    all_gather_v,
    all_reduce,
    all_to_all,
    broadcast,
    collective_name,
    reduce,
    reduce_scatter,
    reduce_scatter_v,
)
from .contributions import Contributions, complete, symbolic_inputs
from .dtypes import DTYPES, as_dtype, dtype_name, is_float, is_integer, unit_roundoff
from .errors import CollspecError, SpecError
from .ops import ALL_OPS, NONCOMMUTATIVE, OPS, affine_map, defined_for, split_map
from .violations import KINDS, Violation

__all__ = [
    "Accuracy",
    "BY_NAME",
    "CollspecError",
    "Contributions",
    "DTYPES",
    "KINDS",
    "OPS",
    "ALL_OPS",
    "NONCOMMUTATIVE",
    "affine_map",
    "defined_for",
    "split_map",
    "SpecError",
    "Violation",
    "all_gather",
    "all_gather_v",
    "all_reduce",
    "all_to_all",
    "as_dtype",
    "broadcast",
    "bus_factor",
    "check_reduction",
    "collective_name",
    "complete",
    "dtype_name",
    "error_bound",
    "exact_reduce",
    "gamma",
    "is_float",
    "is_integer",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_v",
    "symbolic_inputs",
    "traffic_lower_bound",
    "unit_roundoff",
]
