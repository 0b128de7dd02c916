"""Binary trees: reduce up a heap-ordered binary tree, broadcast down it.

Tree position p has children 2p+1 and 2p+2; position p is rank
(p + root) mod N, at depth floor(log2(p + 1)); the deepest is D =
floor(log2 N). Reduce runs level by level from the deepest: at step t the
positions at depth D - t reduce into their parents, so a parent reduces both
children's chunks in the same step. Broadcast runs the other way: at step t
the parents at depth t copy into their (up to two) children. All-reduce is
the two in sequence, 2D steps. The vector is one chunk; a parent sends to
two children, so the tree is not bandwidth-optimal (the checker warns) but
its depth is only log2 N.
"""

from __future__ import annotations

from .. import indexing as ix
from ..indexing import tree_parent
from ..program import BITVEC, Program, Transfer
from ..schedule import COPY, REDUCE, Schedule


def depth(p):
    """Depth of heap position p (the root, p = 0, is at depth 0)."""
    return ix.floor_log2(p + 1)


def levels(n):
    """D: the depth of the deepest position, n - 1."""
    return ix.floor_log2(n)


def _position(r, root, n):
    """Rank r's position in the tree rooted at ``root`` (r itself for root 0):
    (r - root) mod n for ranks r, root < n, written as one conditional
    subtraction (no division: a symbolic modulus is what made the rooted
    bit-vector proofs time out)."""
    return r if _is_zero(root) else ix.where(r >= root, r - root, r + n - root)


def _rank(p, root, n):
    """The rank at position p: (p + root) mod n for positions p < n."""
    return p if _is_zero(root) else ix.where(p + root < n, p + root, p + root - n)


def _is_zero(root) -> bool:
    return isinstance(root, int) and root == 0


def _up(n, t, r, j, root) -> Transfer:
    """Step t of the reduce: depth D - t into the parents (slot 0)."""
    p = _position(r, root, n)
    return Transfer(ix.both(p >= 1, depth(p) == levels(n) - t, j == 0), _rank(tree_parent(p), root, n), 0, 0, REDUCE)


def _down(n, t, r, j, root) -> Transfer:
    """Step t of the broadcast: depth t copies into child 2p + 1 + j."""
    p = _position(r, root, n)
    child = 2 * p + 1 + j
    return Transfer(ix.both(depth(p) == t, child < n), _rank(child, root, n), 0, 0, COPY)


def _up_label(n, t):
    return "reduce", f"reduce level {int(levels(n)) - t}"


def _down_label(n, t):
    return "broadcast", f"broadcast level {t + 1}"


def allreduce_program() -> Program:
    """Rooted at rank 0, so positions are ranks."""
    root = 0

    def transfer(n, s, r, j):
        up, down = _up(n, s, r, j, root), _down(n, s - levels(n), r, j, root)
        first = s < levels(n)
        return Transfer(*(ix.where(first, a, b) for a, b in zip((up.active, up.dst, up.src_chunk, up.dst_chunk, up.op), (down.active, down.dst, down.src_chunk, down.dst_chunk, down.op))))

    def label(n, s):
        return _up_label(n, s) if s < int(levels(n)) else _down_label(n, s - int(levels(n)))

    return Program("binary-tree", "allreduce", lambda n: 1, lambda n: 2 * levels(n), lambda n: 2, transfer, label,
                   allreduce_program, sort=BITVEC, title=lambda n: f"binary-tree allreduce, {n} ranks")


def reduce_program(root=0) -> Program:
    return Program("binary-tree", "reduce", lambda n: 1, levels, lambda n: 1, lambda n, s, r, j: _up(n, s, r, j, root), _up_label,
                   lambda root: reduce_program(root), params={"root": root}, root=root, sort=BITVEC, title=lambda n: f"binary-tree reduce, {n} ranks")


def broadcast_program(root=0) -> Program:
    return Program("binary-tree", "broadcast", lambda n: 1, levels, lambda n: 2, lambda n, s, r, j: _down(n, s, r, j, root), _down_label,
                   lambda root: broadcast_program(root), params={"root": root}, root=root, sort=BITVEC, title=lambda n: f"binary-tree broadcast, {n} ranks")


def allreduce(n: int) -> Schedule:
    return allreduce_program().schedule(n)


def reduce(n: int, root: int = 0) -> Schedule:
    return reduce_program(root).schedule(n)


def broadcast(n: int, root: int = 0) -> Schedule:
    return broadcast_program(root).schedule(n)
