"""Floating point: what a correct all-reduce promises, and what it does not.

In exact arithmetic every algorithm's all-reduce returns the same numbers.
In floating point each addition rounds, and algorithms add in different
orders, so two correct algorithms can return different bits. Two facts
hold for a correct ring all-reduce, and ``collspec prove`` checks both
with Z3's bit-precise floating-point theory:

1. its result is *not* always the spec's rank-order sum (the canonical
   order of :func:`collspec.spec.kernel.fold`): "bit-for-bit the same as
   direct exchange" is true only in exact arithmetic;
2. every rank ends with *identical bits*, because each chunk's final value
   is computed once, by one rank, and only copied after that.

What the spec demands of a float result is therefore a bound, not bits:
:mod:`collspec.spec.accuracy`.

Worked example 1: float16, three ranks
======================================

Z3 found these inputs (``collspec prove --only float16.ring-differs``); only
chunk 0 is non-zero, and it holds 482, 333 and 2226 on ranks 0, 1, 2:

>>> import numpy as np
>>> from collspec.spec import all_reduce, check_reduction
>>> x = [np.array([v, 0, 0], np.float16) for v in (482, 333, 2226)]
>>> float(all_reduce(x)[0][0])
3040.0

The spec adds in rank order: 482 + 333 = 815, then 815 + 2226 = 3041,
which float16 cannot hold (between 2048 and 4096 it has only even
numbers); the tie rounds to the even significand, 3040. The ring adds
chunk 0 in another order: rank 1 sends it to rank 2 (2226 + 333 = 2559,
a tie rounded to 2560), and rank 2 sends that to rank 0 (2560 + 482 =
3042, exact). Running the real ring schedule shows it:

>>> from collspec.models.algebras import Numbers
>>> from collspec.models.generators import generate
>>> from collspec.models.interpreter import run
>>> ring = run(generate("ring", "allreduce", 3), Numbers(x)).state
>>> [float(v) for v in ring[:, 0]]
[3042.0, 3042.0, 3042.0]

Both are correct: the exact sum is 3041, and each is within the error
bound gamma(N - 1) * sum |x_i| of :mod:`collspec.spec.accuracy`:

>>> [check_reduction(result, x).ok for result in (ring[0], all_reduce(x)[0])]
[True, True]

And every rank of the ring holds the same bits, chunk by chunk:

>>> all(ring[r].tobytes() == ring[0].tobytes() for r in range(3))
True

Worked example 2: bfloat16, three ranks
=======================================

bfloat16 keeps 8 significand bits, so between 512 and 1024 it holds only
multiples of 4. Chunk 0 holds 512, 114, 117 (``--only bfloat16.ring-differs``):

>>> from collspec.spec.dtypes import bfloat16
>>> y = [np.array([v, 0, 0], bfloat16) for v in (512, 114, 117)]
>>> float(all_reduce(y)[0][0])
740.0
>>> ring = run(generate("ring", "allreduce", 3), Numbers(y)).state
>>> [float(v) for v in ring[:, 0]]
[744.0, 744.0, 744.0]

Rank order: 512 + 114 = 626, a tie rounded to 624; 624 + 117 = 741, rounded
to 740. Ring order: 117 + 114 = 231 (exact), 231 + 512 = 743, rounded to
744. The exact sum is 743.

With two ranks there is nothing to reorder: each chunk is one addition,
and IEEE addition commutes, so a ring of two always matches the rank-order
sum (``--only two-ranks-agree`` proves it for every float16 and bfloat16
input that is not NaN).

When ranks disagree
===================

Identical bits are not automatic. In direct exchange every rank adds the
other ranks' vectors into its own, each in its own order, so ranks can end
with different bits; ``collspec check`` warns ``ranks-disagree`` for such
schedules. With float16 inputs 2684, 1411, 1690 (found by Z3 the same way):

>>> z = [np.array([v], np.float16) for v in (2684, 1411, 1690)]
>>> direct = run(generate("direct", "allreduce", 3), Numbers(z)).state
>>> [float(v) for v in direct[:, 0]]
[5784.0, 5784.0, 5788.0]

Rank 2 computes (1690 + 2684) + 1411 while ranks 0 and 1 compute
(2684 + 1411) + 1690, up to commutativity.
"""
