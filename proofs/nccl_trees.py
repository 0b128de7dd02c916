"""NCCL's double binary tree is two spanning binary trees, for every N <= 65536.

The proofs evaluate the very functions ``nccl-tree``'s transfer function
uses (:mod:`collspec.models.generators.nccl_tree`: ``btree_parent``,
``btree_child``, ``btree_level``, ``to_label``, ``to_rank``) on Z3
bit-vectors, N symbolic in 2..65536 (the most ranks the generators accept),
rank r and child index symbolic too. Queries:

- labels: ``to_label`` maps the ranks onto 0..N-1 and ``to_rank`` undoes it
  (mirror for even N, shift for odd N), so tree 1 is a tree over the ranks
  exactly when tree 0 is one over the labels;
- parent: every label x in 1..N-1 has a parent in 0..N-1 at a strictly
  higher level. Levels are bounded, so following parents from any rank ends
  at label 0, the one root: no cycle, one tree;
- parent and children agree: a child listed by x has x as its parent and is
  a label in 1..N-1; x is one of its parent's (two) listed children; the two
  children of x differ. So children lists hold each non-root once: a binary
  tree, and the edges the reduce uses (parents) are those the broadcast uses
  (children);
- forwarding: a rank has a child in both trees exactly when N is odd and
  the rank is 0 (for even N every rank is a leaf in one of the trees).

>>> run_queries(queries()).status
'proved'
"""

from __future__ import annotations

import z3

from ..models.generators import nccl_tree as t
from ..models.program import BITVEC_WIDTH
from .solver import Query, run_queries

MAX_RANKS = 1 << 16


def _vars():
    n, r, w = (z3.BitVec(name, BITVEC_WIDTH) for name in ("N", "r", "w"))
    premises = [z3.UGE(n, 2), z3.ULE(n, MAX_RANKS), z3.ULT(r, n)]
    return n, r, w, premises


def _is_label(x, n):
    return z3.And(x >= 0, x < n)


def queries() -> list[Query]:
    n, x, w, base = _vars()
    nonroot = base + [x != 0]
    parent = t.btree_parent(x, n)
    child = t.btree_child(x, n, w)
    found = [Query(f"tree {tree}: to_rank undoes to_label on 0..N-1", base,
                   z3.And(_is_label(t.to_label(x, n, tree), n), t.to_rank(t.to_label(x, n, tree), n, tree) == x))
             for tree in (0, 1)]
    found += [
        Query("the parent of a label x >= 1 is another label", nonroot, z3.And(_is_label(parent, n), parent != x)),
        Query("the parent is at a higher level (no cycle)", nonroot, t.btree_level(parent, n) > t.btree_level(x, n)),
        Query("x is child 0 or child 1 of its parent", nonroot, z3.Or(t.btree_child(parent, n, 0) == x, t.btree_child(parent, n, 1) == x)),
        Query("a listed child is a label >= 1 whose parent is x", base + [z3.Or(w == 0, w == 1), child != -1],
              z3.And(_is_label(child, n), child != 0, t.btree_parent(child, n) == x)),
        Query("the two children of x differ", base + [t.btree_child(x, n, 0) != -1], t.btree_child(x, n, 0) != t.btree_child(x, n, 1)),
    ]

    def forwards(tree):
        label = t.to_label(x, n, tree)
        return z3.Or(t.btree_child(label, n, 0) != -1, t.btree_child(label, n, 1) != -1)

    found.append(Query("a rank forwards in both trees iff N is odd and the rank is 0", base,
                       z3.And(forwards(0), forwards(1)) == z3.And(n % 2 == 1, x == 0)))
    return found


def prove():
    return run_queries(queries())
