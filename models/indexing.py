"""Index formulas: which chunk a rank sends, to whom, at which step.

Written once, as plain arithmetic, so the same function runs on Python ints,
on numpy arrays (the generators build whole steps at once) and on Z3 integers
(the proofs in :mod:`collspec.proofs` prove properties of these very
functions for every N). ``%`` is the mathematical modulus in all three: for a
positive modulus it never returns a negative number.

Ring conventions. Ranks form the ring 0 -> 1 -> ... -> N-1 -> 0. The
reduce-scatter takes N - 1 hops (s = 0 .. N-2) and the all-gather another
N - 1. Each variant is fixed by its *owner*: the chunk a rank holds complete
at the end of the reduce-scatter. Everything else follows from it:

- at reduce-scatter hop s, rank r sends chunk ``owner(r) - 1 - s`` (mod N),
  so the chunk a rank finishes last is the one it owns;
- at all-gather hop s, rank r sends chunk ``owner(r) - s`` (mod N): first the
  chunk it owns, then each chunk it received on the hop before.

``ring`` owns ``r`` (the reduce-scatter postcondition); ``ring-seed`` owns
``r + 1``, so that on the first hop each rank sends the chunk with its own
index, as in the worked example.

>>> [ring_rs_send(r, 0, 4) for r in range(4)], [ring_seed_rs_send(r, 0, 4) for r in range(4)]
([3, 0, 1, 2], [0, 1, 2, 3])
"""

from __future__ import annotations

import numpy as np


def wrap(a, n):
    """``a mod n`` for -n <= a < 2n, as one comparison and an addition or
    subtraction: the same value as ``a % n`` there, and linear arithmetic for
    Z3 when n is a variable (``%`` by a variable is nonlinear)."""
    return where(a >= n, a - n, where(a < 0, a + n, a))


def ring_next(r, n):
    """The rank after ``r`` on the ring."""
    return (r + 1) % n


def ring_prev(r, n):
    """The rank before ``r`` on the ring."""
    return (r + n - 1) % n


def ring_owner(r, n):
    """``ring``: rank r ends the reduce-scatter with chunk r."""
    return r % n


def ring_seed_owner(r, n):
    """``ring-seed``: rank r ends the reduce-scatter with chunk r + 1."""
    return (r + 1) % n


def rs_send(owner, r, s, n):
    """Chunk rank r sends at reduce-scatter hop s, for a ring with ``owner``."""
    return (owner(r, n) + n - 1 - s) % n


def ag_send(owner, r, s, n):
    """Chunk rank r sends at all-gather hop s, for a ring with ``owner``."""
    return (owner(r, n) + n - s) % n


def rs_transfer(owner, r, s, n):
    """Rank r's one transfer at reduce-scatter hop s: ``(dst, src_chunk, dst_chunk)``.

    It goes to the next rank, which adds it into the same chunk index."""
    chunk = rs_send(owner, r, s, n)
    return ring_next(r, n), chunk, chunk


def ag_transfer(owner, r, s, n):
    """Rank r's one transfer at all-gather hop s: ``(dst, src_chunk, dst_chunk)``.

    It goes to the next rank, which copies it into the same chunk index."""
    chunk = ag_send(owner, r, s, n)
    return ring_next(r, n), chunk, chunk


def ring_hops(n):
    """Hops in each phase of a ring (reduce-scatter, all-gather): N - 1."""
    return n - 1


def ring_rs_send(r, s, n):
    return rs_send(ring_owner, r, s, n)


def ring_seed_rs_send(r, s, n):
    return rs_send(ring_seed_owner, r, s, n)


def chain_position(r, root, n):
    """Position of rank r on the chain that starts at ``root`` and follows the ring."""
    return (r - root + n) % n


def chain_chunk(position, t):
    """Chunk that the rank at ``position`` forwards at step t of a pipelined chain."""
    return t - position


def tree_parent(p):
    """Parent of heap position p >= 1 in a binary tree rooted at position 0."""
    return floordiv(p - 1, 2)


def hypercube_partner(r, bit):
    """The partner of rank r across dimension ``bit`` of a hypercube."""
    return bit_xor(r, shift_left(1, bit, like=r))


# -- the arithmetic vocabulary -----------------------------------------------------------
#
# A transfer function (see :mod:`collspec.models.program`) is evaluated on
# Z3 terms, and the schedules are built from those terms; on Python ints and
# numpy arrays these helpers still mean the same (tests and readers call the
# functions on numbers). Python's ``if``/``and``/``^`` cannot take a Z3 term
# (a truth value of one is an error while a program is evaluated), so
# conditions and bit operations go through these helpers.

#: Ranks are below 2**RANK_BITS (the generators accept at most 2**16 ranks).
RANK_BITS = 17


def _symbolic(*values) -> bool:
    return any(type(v).__module__.startswith("z3") for v in values)


def _z3():
    import z3

    return z3


def constant(value, like):
    """The int ``value`` in the sort of ``like`` (a Z3 integer or bit-vector
    term), or unchanged when ``like`` is a number or array."""
    if not _symbolic(like) or _symbolic(value) or isinstance(value, (bool, np.bool_)):
        return value
    z3 = _z3()
    if z3.is_bv(like):
        return z3.BitVecVal(value, like.size())
    return z3.IntVal(value)


def _number_in(term):
    """Some integer or bit-vector subterm of a Z3 term (None if it has none):
    the sort a condition's plain-number branches take."""
    z3 = _z3()
    stack = [term]
    while stack:
        t = stack.pop()
        if z3.is_bv(t) or z3.is_int(t):
            return t
        if z3.is_app(t):
            stack.extend(t.children())
    return None


def where(condition, if_true, if_false):
    """``if_true`` where ``condition`` holds, else ``if_false``."""
    if _symbolic(condition, if_true, if_false):
        z3 = _z3()
        like = if_true if _symbolic(if_true) else if_false if _symbolic(if_false) else _number_in(condition)
        if like is None or z3.is_bool(like) or isinstance(if_true, (bool, np.bool_)) or isinstance(if_false, (bool, np.bool_)):
            return z3.If(condition, if_true, if_false)
        return z3.If(condition, constant(if_true, like), constant(if_false, like))
    return np.where(condition, if_true, if_false)


def both(*conditions):
    """All conditions hold (elementwise)."""
    if _symbolic(*conditions):
        return _z3().And(*conditions)
    result = np.asarray(True)
    for condition in conditions:
        result = result & np.asarray(condition)
    return result


def either(*conditions):
    """Some condition holds (elementwise)."""
    if _symbolic(*conditions):
        return _z3().Or(*conditions)
    result = np.asarray(False)
    for condition in conditions:
        result = result | np.asarray(condition)
    return result


def negate(condition):
    """The condition does not hold (elementwise)."""
    if _symbolic(condition):
        return _z3().Not(condition)
    return ~np.asarray(condition, dtype=bool)


def floordiv(a, b):
    """``a // b`` for a >= 0 and b >= 1 (Z3: integer or unsigned division)."""
    if _symbolic(a, b):
        z3 = _z3()
        term = a if _symbolic(a) else b
        a, b = constant(a, term), constant(b, term)
        return z3.UDiv(a, b) if z3.is_bv(term) else a / b
    return np.floor_divide(a, b)


def floor_log2(v):
    """floor(log2 v) for 1 <= v < 2**RANK_BITS: the highest power of two
    2**b <= v, found by comparisons (a priority encoder) so that numpy and
    Z3 (integers or bit-vectors) evaluate the same expression."""
    result = constant(0, v)
    for bit in range(1, RANK_BITS):
        result = where(v >= (1 << bit), constant(bit, v), result)
    return result


def largest_power_of_two(n):
    """The largest power of two P <= n (n >= 1)."""
    return shift_left(1, floor_log2(n), like=n)


def shift_left(value, bits, like=None):
    """``value << bits``; on Z3 bit-vectors the operands take ``like``'s sort."""
    if _symbolic(value, bits, like):
        z3 = _z3()
        sort = next(v for v in (like, bits, value) if _symbolic(v)).sort()
        return z3.BitVecVal(value, sort) << bits if not _symbolic(value) else value << bits
    return np.left_shift(value, bits)


def shift_right(value, bits):
    """``value >> bits`` for non-negative values."""
    if _symbolic(value, bits):
        return _z3().LShR(value, bits) if _symbolic(value) else value >> bits
    return np.right_shift(value, bits)


def lowest_set_bit(v):
    """``v & -v``: the lowest set bit of v >= 1, as a power of two (on Z3,
    bit-vectors only)."""
    return v & -v


def bit_xor(a, b):
    """``a ^ b`` (ranks across a hypercube dimension)."""
    return a ^ b
