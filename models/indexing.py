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
    return (p - 1) // 2


def hypercube_partner(r, bit):
    """The partner of rank r across dimension ``bit`` of a hypercube (ints only)."""
    return r ^ (1 << bit)
