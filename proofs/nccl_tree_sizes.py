"""nccl-tree's all-reduce for every N <= 65536, chunk and count (1 channel): chunks as lemmas.

With N, ``chunk`` K and ``count`` all solver variables (20-bit vectors, as
every nccl-tree row), a cell of nccl-tree's 1-channel all-reduce is
``k K + e`` (chunk k of the pipeline, element e < K of the chunk): a
product of variables, which Z3 does not decide inside an induction. The
row (``nccl-tree.allreduce-sizes-exactly-once``) splits the schedule the
generator builds (:func:`collspec.models.generators.nccl_tree.sizes_program`,
built by the same :func:`~collspec.models.generators.nccl_tree.program_of`
as the generator's :func:`~collspec.models.generators.nccl_tree.tree_program`,
a test comparing their schedules) into copies of one run, each piece a
decided Z3 query on the generator's own functions, and composes them by
the argument below.

The *one-cell program* B is the generator's program at chunk 1, count 1
(``sizes_program(1, 1)``: one chunk of one element, 2R steps, 3 slots, cell
0). G is the program at symbolic K and count; its ``rounds`` is the
generator's own chunk count (:meth:`~collspec.models.generators.nccl_tree.TreeLayout.rounds`).

**What is proved (Z3 queries),** for every N in 2..65536, K in 1..2^17,
count in 0..2^17 (the generator's ``MAX_CELLS``):

- ``shape``: G has ``count`` cells and at least 3 min(K, count) slots;
  G's steps are B's plus rounds - 1 (count >= 1); B has 1 cell and 3 slots.
- ``copy (k, e)``: for every chunk k < rounds and element e < K with
  k K + e < count, every step t < steps(B), rank r and role (slot) i < 3:
  when B's slot i of rank r is active at step t, G's slot 3 e + i of rank r
  is active at step t + k (a step and slot of G), with B's destination and
  op, and reads and writes cell k K + e (same index).
- ``only copies``: every active transfer of G (step s, rank r, slot
  j = 3 e + i) is one of these: with k = s - L (i = 0, the send up) or
  k = s - 2R + L (i = 1, 2, the sends down), L the level of r and R the
  root's (restated from NCCL's ``ncclGetBtree`` in
  :mod:`collspec.proofs.nccl_tree_allreduce`, not read from the
  generator), k < rounds, e < K, k K + e < count, 0 <= s - k < steps(B),
  and B's slot i of rank r is active at step s - k.
- ``rounds`` and ``range`` (over the integers, the generator's ``rounds``
  evaluated on integer terms): rounds = ceil(count / K), i.e. 0 for count 0
  and (rounds - 1) K < count <= rounds K otherwise, and 0 <= rounds <= count;
  for k < rounds, e < K: 0 <= k K < count and count + K - 1 < 2^19.
- ``cells`` (over the integers): (k, e) -> k K + e is one to one on
  k < rounds, e < K, and every cell c < count is (c div K, c mod K) with
  c div K < rounds.
- the induction of :mod:`collspec.proofs.induction` on B, against the
  invariant of :mod:`collspec.proofs.nccl_tree_allreduce` (restated from
  NCCL's trees and timing) at 1 channel, chunk 1, count 1: its one cell
  ends holding every rank's contribution exactly once, by reduces into the
  same index only. (The count-2 row contains this run as its chunk 0 but
  is not used here: B is proved on its own.)

**The composition (argument, not a Z3 query).** By ``copy`` and ``only
copies``, G's active transfers are exactly B's, copied once for each (k, e)
of ``cells``: copy (k, e) runs B's step t at step t + k on the same ranks
and slot role, with B's cell 0 renamed to k K + e (the transfer at a step
and slot is one, so ``copy`` fixes its cell, and by ``cells`` the cell
fixes (k, e)). So every transfer that reads or writes cell k K + e is copy
(k, e)'s, and copy (k, e) touches no other cell; steps of G outside
k .. k + steps(B) - 1 leave that cell alone. Under the interpreter's
semantics (all reads see the start of a step, a copy replaces its cell, a
reduce adds multisets), cell k K + e of every rank therefore evolves as B's
cell 0 does, k steps later, with contribution (x, 0) renamed (x, k K + e);
its inputs are B's renamed (every cell starts with its own rank's
contribution). By B's induction, after step k + steps(B) - 1 <= steps(G) - 1
(``shape``) it holds every rank's contribution of cell k K + e exactly
once, and nothing writes it after. By ``cells`` every cell c < count is one
such copy: every output cell ends holding every contribution exactly once,
and reduces add only into the same index. For count 0, ``only copies``
leaves no transfer at all (no k < rounds = 0). Premises: the interpreter's
semantics (as every induction), and that renaming a cell one to one and
shifting its steps renames its states.

In ``shape``, ``copy`` and ``only copies`` the products ``k K`` and the
quotient ``(count + K - 1) div K`` are uninterpreted functions
(:func:`opaque`: a claim proved for every function holds for the
bit-vector operations), given the bounds ``rounds`` and ``range`` prove
over the integers (0 <= rounds <= count; 0 <= k K < count for
0 <= k < rounds). Argued, not a query: 20-bit vector arithmetic is integer
arithmetic modulo 2^20, and by ``range`` every operand and result of these
products and quotients lies in 0..2^18, so the bit-vector values are the
integers of ``rounds``, ``range`` and ``cells``. (Bit-blasted, "one to one",
"onto" and "rounds" each ran past 120 s.)

What stays bounded: two or more channels at any chunk or count are the
``builtin.nccl-tree`` row's (N <= 6, or 16 under ``--full``) and the
two-channel row's single option set. A 1-channel call of the generator,
with a ``chunk`` or NCCL's chunkCount at N (in 1..count) when none is
given, is enumerated from G's own terms at those values
(:func:`collspec.models.generators.nccl_tree.call_program`), so what a user
checks at 1 channel is the program proved, not a separate integer path.
"""

from __future__ import annotations

import z3

from ..models.generators import nccl_tree
from ..models.program import BITVEC_WIDTH, as_term, symbolic
from . import nccl_tree_allreduce as tree
from .induction import queries, scope_of, spec_check, with_options
from .scope import Bound, Fixed, Scope
from .solver import Outcome, Query, replace_subterms, run_queries, subterms

ROW = "nccl-tree.allreduce-sizes-exactly-once"
ROLES = nccl_tree.ROLES
#: the one-cell program: one chunk of one element
BASE = {"channels": 1, "chunk": 1, "count": 1}

#: the options the row covers: every chunk and count the generator accepts, 1 channel
OPTIONS = (
    Bound("chunk", ">=", 1), Bound("chunk", "<=", nccl_tree.MAX_CELLS), Bound("count", ">=", 0), Bound("count", "<=", nccl_tree.MAX_CELLS),
    Fixed("channels", lambda n: 1, "1 channel (tree 0)"),
)


def scope() -> Scope:
    """The row's scope: all N in 2..65536 and :data:`OPTIONS`."""
    return scope_of(nccl_tree.sizes_program(), OPTIONS)


def program():
    """G: the generator's 1-channel program, chunk and count its parameters."""
    return nccl_tree.sizes_program()


def base_program():
    """B: the generator's program at chunk 1, count 1."""
    return with_options(program(), chunk=1, count=1)


_OPAQUE = {z3.Z3_OP_BMUL: "times", z3.Z3_OP_BUDIV: "over", z3.Z3_OP_BUDIV_I: "over", z3.Z3_OP_BUREM: "modulo", z3.Z3_OP_BUREM_I: "modulo"}


def opaque(query: Query, chunk, count, rounds) -> Query:
    """``query`` with every product ``a chunk``, quotient ``a div chunk`` and
    remainder ``a mod chunk`` replaced by an uninterpreted function of
    ``(a, chunk)`` (``times``, ``over``, ``modulo``): a claim proved for
    every such function holds for the bit-vector operations (the query only
    generalises). It keeps the chunk's products out of bit-blasting, where
    the generator-facing lemmas need no more than ``a = b -> f(a) = f(b)``.
    Each product ``x chunk`` keeps the bounds ``rounds`` and ``range`` prove
    (0 <= x chunk < count for 0 <= x < rounds; 0 <= rounds <= count) and the
    identities 0 chunk = 0, 1 chunk = chunk, so a counterexample's first two
    chunks are the real cells 0 .. 2 chunk - 1; past them a counterexample's
    k and products are the free functions' values, not always a real cell."""
    sort = z3.BitVecSort(BITVEC_WIDTH)
    made = {name: z3.Function(name, sort, sort, sort) for name in set(_OPAQUE.values())}

    def rule(t):
        kind = t.decl().kind()
        if kind in _OPAQUE and t.num_args() == 2 and t.arg(1).eq(chunk) or kind == z3.Z3_OP_BMUL and t.num_args() == 2 and t.arg(0).eq(chunk):
            other = t.arg(0) if t.arg(1).eq(chunk) else t.arg(1)
            return made[_OPAQUE[kind]](rewrite(other), chunk)
        return None

    def rewrite(term):
        return replace_subterms(term, rule)

    premises, claim = [rewrite(p) for p in query.premises], rewrite(query.claim)
    rounds = rewrite(rounds)
    products = subterms([*premises, claim], lambda t: t.decl().eq(made["times"]))
    bounds = [0 <= rounds, rounds <= count]
    for p in products:  # the integer bounds below rounds, and 0 chunk = 0, 1 chunk = chunk (identities of the bit-vector product)
        bounds += [z3.Implies(z3.And(0 <= p.arg(0), p.arg(0) < rounds), z3.And(0 <= p, p < count)), z3.Implies(p.arg(0) == 0, p == 0),
                   z3.Implies(p.arg(0) == 1, p == chunk)]
    return Query(query.name, premises + bounds, claim, [rewrite(w) for w in query.when], [rewrite(c) for c in query.case])


def _transfer(made, n, s, r, j):
    t = made.transfer(n, s, r, j)
    return [as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)]


def lemmas() -> list:
    """``shape``, ``copy (k, e)``, ``only copies``, ``cells`` (module text)."""
    made, base = program(), base_program()
    sym, v = symbolic(made)
    n, s, r, j, K, count = (v[name] for name in ("N", "s", "r", "j", "chunk", "count"))
    k, e, t, i, k2, e2, c = (z3.BitVec(name, BITVEC_WIDTH) for name in ("k", "e", "t", "i", "k2", "e2", "c"))
    domain = scope().assertions(v)
    layout = nccl_tree.sizes_layout(K, count)
    rounds = as_term(layout.rounds(n), n)
    steps, slots, cells = (as_term(f(n), n) for f in (sym.steps, sym.width, sym.chunks))
    b_steps, b_slots, b_cells = (as_term(f(n), n) for f in (base.steps, base.width, base.chunks))
    least = z3.If(K < count, K, count)
    chunk_cell = [0 <= k, k < rounds, 0 <= e, e < K, k * K + e < count]
    shape = Query(
        "shape: count cells, at least 3 min(chunk, count) slots, steps = the one-cell program's + rounds - 1 (count >= 1); "
        "the one-cell program has 1 cell and 3 slots", domain,
        z3.And(cells == count, slots >= ROLES * least, b_cells == 1, b_slots == ROLES, z3.Implies(count >= 1, steps == b_steps + rounds - 1)))

    b_active, b_dst, b_src, b_cell, b_op = _transfer(base, n, t, r, i)
    g_active, g_dst, g_src, g_cell, g_op = _transfer(sym, n, t + k, r, ROLES * e + i)
    copy = Query(
        "copy (k, e): the one-cell program's step t, slot i is the program's step t + k, slot 3 e + i, its cell 0 renamed k chunk + e",
        domain + chunk_cell + [0 <= t, t < b_steps, 0 <= r, r < n, 0 <= i, i < ROLES, b_active],
        z3.And(t + k < steps, ROLES * e + i < slots, b_src == 0, b_cell == 0,
               g_active, g_dst == b_dst, g_src == k * K + e, g_cell == k * K + e, g_op == b_op))

    level, root = tree._level(r, n), tree._root_level(n)
    i_j, e_j = z3.URem(j, ROLES), z3.UDiv(j, ROLES)
    k_j = z3.If(i_j == 0, s - level, s - 2 * root + level)
    a_active = _transfer(sym, n, s, r, j)[0]
    only = Query(
        "only copies: an active transfer at step s, slot 3 e + i is copy (k, e)'s, k = s - level (i = 0) or s - 2R + level (i = 1, 2)",
        domain + [0 <= s, s < steps, 0 <= r, r < n, 0 <= j, j < slots, a_active],
        z3.And(0 <= k_j, k_j < rounds, e_j < K, k_j * K + e_j < count, 0 <= s - k_j, s - k_j < b_steps, _transfer(base, n, s - k_j, r, i_j)[0]))

    return [opaque(q, K, count, rounds) for q in (shape, copy, only)] + arithmetic()


def arithmetic() -> list:
    """``rounds``, ``range`` and ``cells`` (module text), over the integers:
    the generator's own ``rounds`` (:meth:`~collspec.models.generators.nccl_tree.TreeLayout.rounds`)
    evaluated on integer terms, k chunk + e the generator's cell."""
    n, K, count, k, e, k2, e2, c = z3.Ints("N chunk count k e k2 e2 c")
    domain = scope().assertions({"N": n, "chunk": K, "count": count})
    rounds = nccl_tree.sizes_layout(K, count).rounds(n)
    chunk_cell = [0 <= k, k < rounds, 0 <= e, e < K]
    return [
        Query("rounds: rounds = ceil(count / chunk): 0 for count 0, else (rounds - 1) chunk < count <= rounds chunk; 0 <= rounds <= count", domain,
              z3.And(z3.Implies(count == 0, rounds == 0), z3.Implies(count >= 1, z3.And(rounds >= 1, (rounds - 1) * K < count, count <= rounds * K)),
                     0 <= rounds, rounds <= count)),
        Query(f"range: for k < rounds, e < chunk: 0 <= k chunk < count, k chunk + e < count + chunk - 1 < 2^{BITVEC_WIDTH - 1} (the bit-vector values are these integers)",
              domain + chunk_cell,
              z3.And(0 <= k * K, k * K < count, k * K + e <= count + K - 1, count + K - 1 < 1 << (BITVEC_WIDTH - 1))),
        Query("cells: (k, e) -> k chunk + e is one to one on k < rounds, e < chunk",
              domain + chunk_cell + [0 <= k2, k2 < rounds, 0 <= e2, e2 < K, k * K + e == k2 * K + e2], z3.And(k == k2, e == e2)),
        Query("cells: every cell c < count is (c div chunk, c mod chunk), c div chunk < rounds",
              domain + [0 <= c, c < count], z3.And(c / K < rounds, 0 <= c % K, c % K < K, (c / K) * K + c % K == c)),
    ]


def base_queries() -> list:
    """The induction on B, against the invariant of
    :mod:`collspec.proofs.nccl_tree_allreduce` at :data:`BASE`."""
    return queries(base_program(), tree.invariant(BASE))


def prove() -> Outcome:
    """The row: the spec's postcondition check, the lemmas, then B's induction."""
    return run_queries([spec_check("allreduce"), *lemmas(), *base_queries()])
