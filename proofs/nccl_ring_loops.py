"""nccl-ring for every N, chunk, alignment and count: loops as lemmas.

With N, ``chunk``, ``align`` and ``count`` all solver variables, a cell of
nccl-ring's all-reduce is ``loop N chunk + k chunkCount + e``: products of
variables, which Z3 does not decide inside an induction. The proof splits
the schedule the generator builds (:func:`collspec.models.generators.nccl_ring.options_program`,
1 channel on the identity ring, the whole vector its part) into pieces,
each a decided Z3 query on the generator's own functions, and composes them
by an argument written here and in docs/proofs.md ("nccl-ring: loops as
lemmas").

Reduce-scatter and all-gather follow the same plan (``loops`` of chunk
elements of every block, ``blocks``: (b, o) -> b count + o, the loop
program :func:`block_loop_program` over (block, element)); broadcast and
reduce need no loops (:func:`chain_program` is the whole chain with its
cell (k, e) numbered k M + e, ``cells``: (k, e) -> k chunk + e).

Channels and rings (:func:`channel_lemmas`, the ``-channels-`` rows): the
generator's :class:`nccl_ring.Layout` with the channel count C in 1..64,
its parts and offsets (:class:`ChannelFunctions`) and every channel's ring
(:class:`RingFunctions`) solver terms, the channel index h a solver
variable. Z3 decides: slot j is element j mod width of channel j div
width; the offsets start at 0, follow one another and end the vector, and
the inductive steps of "channels do not overlap" and "offsets are >= 0";
the renaming sigma of channel h's ranks is a bijection; channel h's
element e is the 1-channel identity-ring program's element e on part(h) at
rank sigma^-1(r), sent to sigma of its receiver, its cells moved by off(h);
past the 1-channel program's steps and slots its elements are idle; the
generator's list of parts (:class:`nccl_ring.PartList`) meets the scope's
premises for every C in 1..64. Then the 1-channel proof.

**What is proved (Z3 queries), all-reduce.** For symbolic N >= 2, chunk in
1..2^22, align >= 1 dividing chunk, count >= 0, step s, rank r, slot j:

- ``loops`` (L): step s < steps(N) is ring step t = s mod 2(N-1) of loop
  l = s div 2(N-1), and loop l has elements left (rem = count - base(l) >= 1,
  base the generator's :func:`~collspec.models.generators.nccl_ring.loop_base`);
  ``base(0) = 0``; a loop followed by another is full (rem >= N chunk) and
  the next starts N chunk later; the last loop has rem <= N chunk and runs
  all its 2(N-1) steps; a non-empty vector has a loop.
- ``rounding`` (R): the loop's chunkCount cc (the generator's
  :func:`~collspec.models.generators.nccl_ring.chunk_count`) is in
  1..chunk, at most the program's width, and N cc covers the loop:
  min(rem, N cc) = min(rem, N chunk), the loop's length.
- ``cells`` (L): within a loop, (k, e) -> k cc + e maps the chunk elements
  the loop sends (k < N, e < cc, k cc + e < rem) one to one onto
  0 .. len - 1.
- ``composition``: the generator's transfer at (s, r, j) is the loop
  function :func:`~collspec.models.generators.nccl_ring.ring_loop` at
  (t, ring index of r, cc, rem, element j), its cell ``base + k cc + j``,
  and slots j >= cc are idle. (The transfer is written as this composition,
  so Z3 usually finds the claim true by simplification: ``trivial``.)
- the induction of :mod:`collspec.proofs.induction` on the *loop program*
  (:func:`loop_program`): ``ring_loop`` for every cc in 1..2^22 and every
  rem >= 1, its cell (k, e) numbered k M + e with the constant M = 2^22
  (linear), against the ring's invariant on chunk index k.

**The composition (argument, not a Z3 query).** By ``composition``, the
steps of loop l are the loop program at (cc(l), rem(l)) with cell k M + e
renamed to base(l) + k cc + e; by ``cells`` and ``rounding`` the renaming
is one to one from the loop program's cells onto base(l) .. base(l) +
len(l) - 1, and by ``loops`` these ranges, one per loop, follow one another
from 0 to count with nothing between them. So the steps of loop l touch only
its own cells, which hold their inputs until loop l starts (no earlier loop
writes them) and, by the loop program's induction (every cell ends holding
every rank's contribution of the same cell exactly once, reduces add into
the same index), hold their results when it ends; no later loop writes
them. Channels: by the offsets' induction (base and step decided above,
the induction principle the argument) channel ranges tile the vector, so
channels running side by side in the same steps never meet; channel h is
the 1-channel program with its ranks renamed by the bijection sigma (its
blocks and root with them) and its cells moved one to one into its range,
and renaming ranks so preserves each collective's postcondition; so each
range ends as its 1-channel program ends. The generator checks on its
own values that its largest part bounds every part, that it has one part
per channel and that its ring lookups, as the schedule evaluates them, are
inverse bijections. Premises: the interpreter's semantics (as for every
induction), that renaming cells one to one in a schedule renames its states, and that renaming ranks by a bijection, with
their blocks and the root, preserves the collective's postcondition.
"""

from __future__ import annotations

import z3

from ..models import indexing as ix
from ..models.generators import nccl_ring
from ..models.program import Program, Transfer, as_term, symbolic
from . import invariants
from .induction import Invariant, queries, spec_check
from .scope import Bound, Condition, Fixed, Scope
from .solver import Outcome, Query, Row, current_rlimit, current_row, replace_subterms, run_queries, within

#: M: a loop program's cell (k, e) is numbered k M + e; M >= chunk >= cc
STRIDE = nccl_ring.MAX_CELLS

#: the options every row here covers: the generator's chunk range, align dividing chunk, any count
OPTIONS = (
    Bound("chunk", ">=", 1), Bound("chunk", "<=", STRIDE), Bound("align", ">=", 1), Bound("count", ">=", 0),
    Condition("align divides chunk", ("chunk", "align"), lambda chunk, align: chunk % align == 0),
    Fixed("channels", lambda n: 1, "1 channel on the identity ring, any number of loops"),
)


def _index(c):
    """A loop program's chunk (or block) index of cell c = k M + e."""
    return ix.floordiv(c, STRIDE)


def _ring_prev_slot(n_, s, r, c, *rest):
    """The ring invariants' witness: the previous rank's slot e = c mod M."""
    return ix.ring_prev(r, n_), c % STRIDE


def scope(collective: str) -> Scope:
    """The scope of ``nccl-ring.<collective>-exactly-once``."""
    rooted = (Bound("root", ">=", 0), Bound("root", "<", "N")) if collective in ("broadcast", "reduce") else ()
    return Scope.all_n(*rooted, *OPTIONS)


# -- all-reduce ----------------------------------------------------------------------------------


def loop_program(cc, rem) -> Program:
    """One all-reduce loop with chunkCount ``cc`` and ``rem`` elements left:
    :func:`nccl_ring.ring_loop` at ring step t, rank r (its ring index on the
    identity ring, :class:`nccl_ring.Layout`'s), element j of its chunk; cell
    (k, j) numbered k M + j."""
    layout = nccl_ring.options_layout("allreduce", 1, 1, 1)

    def transfer(n, t, r, j):
        active, k, op = nccl_ring.ring_loop(n, t, layout.index(0, r, n), cc, rem, j)
        cell = k * STRIDE + j
        return Transfer(active, layout.next(0, r, n), cell, cell, op)

    return Program(
        "nccl-ring", "allreduce", lambda n: n * STRIDE, lambda n: 2 * (n - 1), lambda n: cc, transfer, lambda n, s: ("loop", f"step {s}"),
        lambda cc, rem: loop_program(cc, rem), params={"cc": cc, "rem": rem},
    )


def loop_invariant(n, cc, rem) -> Invariant:
    """The ring's all-reduce invariant on chunk index k = c div M, for the
    loop's cells (k < N, e < cc, k cc + e < rem); the witness slot of cell c
    is its element c mod M."""
    ring = invariants.ring_allreduce(0)


    return Invariant(
        lambda *a: True,
        lambda n_, s, r, c, x, k: ix.both(k == c, ring.holds(n_, s, r, _index(c), x, _index(c))),
        _ring_prev_slot, _ring_prev_slot,
        premises=(Bound("cc", ">=", 1), Bound("cc", "<=", STRIDE), Bound("rem", ">=", 1)),
        cells=lambda params, c: [0 <= c, _index(c) < n, c % STRIDE < cc, _index(c) * cc + c % STRIDE < rem],
    )


def _real(collective: str):
    made = nccl_ring.options_program(collective)
    sym, v = symbolic(made)
    layout = nccl_ring.options_layout(collective, v["chunk"], v["align"], v["count"], v.get("root", 0))
    return sym, v, layout


def _smaller(a, b):
    return z3.If(a < b, a, b)


def allreduce_lemmas() -> list:
    """``loops``, ``rounding``, ``cells``, ``composition`` (module text)."""
    sym, v, layout = _real("allreduce")
    n, s, r, j, chunk, count = v["N"], v["s"], v["r"], v["j"], v["chunk"], v["count"]
    l, k, e, k2, e2, o, rem = z3.Ints("l k e k2 e2 o rem")
    domain = scope("allreduce").assertions(v)
    steps, width = as_term(sym.steps(n), n), as_term(sym.width(n), n)
    per = 2 * (n - 1)
    loops = as_term(layout.loops(n, n * chunk), n)
    part = layout.part(0, n)

    def base(loop):
        return as_term(nccl_ring.loop_base(layout, n, loop), n)

    cc = as_term(nccl_ring.chunk_count(layout, n, rem), n)
    loop = domain + [0 <= l, l < loops]
    left = domain + [1 <= rem, rem <= part]
    step = domain + [0 <= s, s < steps]
    loop_of_s = s / per
    t = s - loop_of_s * per
    rem_s = part - base(loop_of_s)
    cc_s = as_term(nccl_ring.chunk_count(layout, n, rem_s), n)
    active, chunk_index, op = nccl_ring.ring_loop(n, t, layout.index(0, r, n), cc_s, rem_s, j)
    real = sym.transfer(n, s, r, j)
    real = Transfer(*(as_term(f, n) for f in (real.active, real.dst, real.src_chunk, real.dst_chunk, real.op)))
    cell = base(loop_of_s) + chunk_index * cc_s + j
    sends = [0 <= k, k < n, 0 <= e, e < cc, k * cc + e < rem]
    return [
        Query("loops: the steps are whole loops of 2(N-1), loop 0 starts at element 0, and a non-empty vector has a loop", domain,
              z3.And(steps == loops * per, base(0 * n) == 0, z3.Implies(part >= 1, loops >= 1))),
        Query("loops: step s is step s mod 2(N-1) of loop s div 2(N-1)", step, z3.And(0 <= loop_of_s, loop_of_s < loops, 0 <= t, t < per)),
        Query("loops: every loop has elements left", loop, z3.And(part - base(l) >= 1, part - base(l) <= part)),
        Query("loops: a loop followed by another is full, and the next starts N chunk later", loop + [l + 1 < loops],
              z3.And(part - base(l) >= n * chunk, base(l + 1) == base(l) + n * chunk)),
        Query("loops: the last loop ends the vector", loop + [l + 1 == loops], part - base(l) <= n * chunk),
        Query("rounding: chunkCount is in 1..chunk", left, z3.And(cc >= 1, cc <= chunk)),
        Query("rounding: chunkCount is at most the width", left, cc <= width),
        Query("rounding: N chunkCount covers the loop (min(rem, N chunkCount) = min(rem, N chunk))", left,
              _smaller(rem, n * cc) == _smaller(rem, n * chunk)),
        Query("rounding: a full loop's chunkCount is chunk", left + [rem >= n * chunk], cc == chunk),
        Query("cells: (k, e) -> k chunkCount + e is one to one on the elements a loop sends",
              left + sends + [0 <= k2, k2 < n, 0 <= e2, e2 < cc, k2 * cc + e2 < rem, k * cc + e == k2 * cc + e2], z3.And(k == k2, e == e2)),
        Query("cells: every element o < min(rem, N chunkCount) is one a loop sends, at (o div chunkCount, o mod chunkCount)",
              left + [0 <= o, o < _smaller(rem, n * cc)], z3.And(o / cc < n, (o / cc) * cc + o % cc == o, o % cc < cc, o % cc >= 0, o < rem)),
        Query("composition: the transfer is the loop function at (step t, ring index, chunkCount, rem, element j), cell base + k chunkCount + j",
              step + [0 <= r, r < n, 0 <= j, j < width],
              z3.And(real.active == active,
                     z3.Implies(active, z3.And(j < cc_s, real.dst == layout.next(0, r, n), real.src_chunk == cell, real.dst_chunk == cell, real.op == op)))),
    ]


def allreduce_proof() -> Outcome:
    made = loop_program(1, 1)
    v = symbolic(made)[1]
    return run_queries([spec_check("allreduce"), *allreduce_lemmas(),
                        *(opaque_products(q, v["cc"]) for q in queries(made, loop_invariant(v["N"], v["cc"], v["rem"])))])


def opaque_products(query: Query, factor) -> Query:
    """``query`` with every product ``a * factor`` replaced by ``times(a, factor)``,
    ``times`` an uninterpreted function: a claim proved for every function
    ``times`` holds for multiplication (the query only generalises). It
    keeps a loop program's products with its chunkCount out of nonlinear
    arithmetic, where no claim needs more than ``a = b -> a cc = b cc``."""
    times = z3.Function("times", z3.IntSort(), z3.IntSort(), z3.IntSort())

    def rule(t):
        if t.decl().kind() == z3.Z3_OP_MUL and any(c.eq(factor) for c in t.children()):
            rest = [c for c in t.children() if not c.eq(factor)]
            return times(rewrite(rest[0] if len(rest) == 1 else z3.Product(*rest)), factor)
        return None

    def rewrite(term):
        return replace_subterms(term, rule)

    return Query(query.name, [rewrite(p) for p in query.premises], rewrite(query.claim), [rewrite(w) for w in query.when], [rewrite(c) for c in query.case])


# -- reduce-scatter and all-gather -----------------------------------------------------------------


def block_loop_program(collective: str, length) -> Program:
    """One reduce-scatter or all-gather loop of ``length`` elements of every
    block: :func:`nccl_ring.block_loop` at ring step t, rank r, element j;
    cell (block b, j) numbered b M + j (N M cells, blocks of M)."""
    layout = nccl_ring.options_layout(collective, 1, 1, 1)
    reduce = collective == "reduce_scatter"

    def transfer(n, t, r, j):
        active, b = nccl_ring.block_loop(n, t, layout.position(0, r, n), length, j, reduce)
        cell = layout.rank_at(0, b, n) * STRIDE + j
        return Transfer(active, layout.next(0, r, n), cell, cell, nccl_ring.REDUCE if reduce else nccl_ring.COPY)

    return Program(
        "nccl-ring", collective, lambda n: n * STRIDE, lambda n: n - 1, lambda n: length, transfer, lambda n, s: ("loop", f"step {s}"),
        lambda length: block_loop_program(collective, length), params={"length": length},
    )


def block_loop_invariant(collective: str, n, length) -> Invariant:
    """The ring's reduce-scatter (all-gather) invariant on block b = c div M,
    for the loop's cells (b < N, e < length); the witness slot of cell c is
    its element c mod M."""
    from dataclasses import replace

    made = invariants.ring_allreduce(0, phases=1) if collective == "reduce_scatter" else invariants.ring_allgather()


    return replace(
        made,
        defined=lambda n_, s, r, c: made.defined(n_, s, r, _index(c)),
        holds=lambda n_, s, r, c, x, k: ix.both(k == c, made.holds(n_, s, r, _index(c), x, _index(c))),
        writer=_ring_prev_slot, source=_ring_prev_slot,
        premises=(Bound("length", ">=", 1), Bound("length", "<=", STRIDE)),
        cells=lambda params, c: [0 <= c, _index(c) < n, c % STRIDE < length],
    )


def block_lemmas(collective: str) -> list:
    """``loops``, ``blocks`` and ``composition`` for reduce-scatter or all-gather."""
    from .induction import EXPECTED

    sym, v, layout = _real(collective)
    n, s, r, j, chunk, count = v["N"], v["s"], v["r"], v["j"], v["chunk"], v["count"]
    l, b, b2, o, o2, c = z3.Ints("l b b2 o o2 c")
    domain = scope(collective).assertions(v)
    steps, width, chunks = (as_term(f(n), n) for f in (sym.steps, sym.width, sym.chunks))
    per = n - 1
    loops = as_term(layout.loops(n, chunk), n)
    part = layout.part(0, n)
    reduce = collective == "reduce_scatter"
    loop = domain + [0 <= l, l < loops]
    step = domain + [0 <= s, s < steps]
    loop_of_s = s / per
    t = s - loop_of_s * per
    base = loop_of_s * chunk
    length = _smaller(chunk, part - base)
    active, index = nccl_ring.block_loop(n, t, layout.position(0, r, n), length, j, reduce)
    real = sym.transfer(n, s, r, j)
    real = Transfer(*(as_term(f, n) for f in (real.active, real.dst, real.src_chunk, real.dst_chunk, real.op)))
    cell = layout.rank_at(0, index, n) * count + base + j
    owned = EXPECTED[collective][1 if reduce else 0]
    return [
        Query("loops: the steps are whole loops of N - 1, and a non-empty vector has a loop", domain,
              z3.And(steps == loops * per, z3.Implies(part >= 1, loops >= 1))),
        Query("loops: step s is step s mod (N - 1) of loop s div (N - 1)", step, z3.And(0 <= loop_of_s, loop_of_s < loops, 0 <= t, t < per)),
        Query("loops: every loop has elements left", loop, part - l * chunk >= 1),
        Query("loops: a loop followed by another is full", loop + [l + 1 < loops], part - l * chunk >= chunk),
        Query("loops: the last loop ends the block", loop + [l + 1 == loops], part - l * chunk <= chunk),
        Query("loops: a loop's length is in 1..chunk and the width", loop, z3.And(_smaller(chunk, part - l * chunk) >= 1, _smaller(chunk, part - l * chunk) <= width)),
        Query("blocks: (b, o) -> b count + o is one to one for o < count", domain + [0 <= b, b < n, 0 <= b2, b2 < n, 0 <= o, o < count, 0 <= o2, o2 < count, b * count + o == b2 * count + o2],
              z3.And(b == b2, o == o2)),
        Query("blocks: every cell c < N count is (c div count, c mod count), and its block is the collective's", domain + [0 <= c, c < chunks],
              z3.And(c / count < n, (c / count) * count + c % count == c, c % count >= 0, c % count < count,
                     _bool(owned(n, chunks, c / count, c, 0)), z3.Not(_bool(owned(n, chunks, c / count + 1, c, 0))),
                     z3.Not(_bool(owned(n, chunks, c / count - 1, c, 0))))),
        Query("composition: the transfer is the loop function at (step t, ring index, length, element j), cell block count + base + j",
              step + [0 <= r, r < n, 0 <= j, j < width],
              z3.And(real.active == active, z3.Implies(active, z3.And(real.dst == layout.next(0, r, n), real.src_chunk == cell, real.dst_chunk == cell)))),
    ]


def _bool(value):
    return as_term(value, None)


def block_proof(collective: str) -> Outcome:
    made = block_loop_program(collective, 1)
    v = symbolic(made)[1]
    return run_queries([spec_check(collective), *block_lemmas(collective), *queries(made, block_loop_invariant(collective, v["N"], v["length"]))])


# -- broadcast and reduce ----------------------------------------------------------------------------


def chain_program(collective: str, chunk=1, align=1, count=1, root=0) -> Program:
    """The pipelined chain of ``collective`` with its cells numbered by
    coordinates: :func:`nccl_ring.chain_step` and :func:`nccl_ring.chain_fits`
    on the generator's layout (``chunk``, ``count``, ``root`` symbolic in
    the proof), its steps and width the generator's; cell (chunk k,
    element j) numbered k M + j instead of k chunk + j."""
    layout = nccl_ring.options_layout(collective, chunk, align, count, root)
    reduce = collective == "reduce"
    steps = nccl_ring.BUILDERS[collective](layout)[0]

    def transfer(n, s, r, j):
        q = ix.wrap(layout.position(0, r, n) - layout.position(0, root, n), n)
        sends, k = nccl_ring.chain_step(n, s, q, reduce)
        cell = k * STRIDE + j
        return Transfer(ix.both(sends, k >= 0, nccl_ring.chain_fits(layout, 0, n, k, j)), layout.next(0, r, n), cell, cell,
                        nccl_ring.REDUCE if reduce else nccl_ring.COPY)

    return Program(
        "nccl-ring", collective, lambda n: STRIDE * count, steps, lambda n: layout.width(n), transfer, lambda n, s: ("chain", f"step {s}"),
        lambda chunk, align, count, root: chain_program(collective, chunk, align, count, root), params={"chunk": chunk, "align": align, "count": count, "root": root},
        root=root,
    )


def chain_invariant(collective: str, chunk, count, root) -> Invariant:
    """The ring's chain invariant (:func:`invariants.chain_broadcast`,
    :func:`invariants.chain_reduce`) on chunk index k = c div M, for the
    cells (k, e) with e < min(chunk, count - k chunk); witness slot e."""
    from dataclasses import replace

    made = (invariants.chain_broadcast() if collective == "broadcast" else invariants.chain_reduce())[1](root)


    return replace(
        made,
        holds=lambda n_, s, r, c, x, k: ix.both(k == c, made.holds(n_, s, r, _index(c), x, _index(c))),
        writer=_ring_prev_slot, source=_ring_prev_slot,
        premises=OPTIONS[:5],
        cells=lambda params, c: [0 <= c, c % STRIDE < chunk, _index(c) * chunk + c % STRIDE < count],
    )


def chain_lemmas(collective: str) -> list:
    """``cells`` and ``composition`` for broadcast or reduce."""
    sym, v, layout = _real(collective)
    n, s, r, j, chunk, count, root = v["N"], v["s"], v["r"], v["j"], v["chunk"], v["count"], v["root"]
    k, e, k2, e2, c = z3.Ints("k e k2 e2 c")
    domain = scope(collective).assertions(v)
    coordinates = chain_program(collective, chunk, v["align"], count, root)
    steps, width = as_term(sym.steps(n), n), as_term(sym.width(n), n)
    real = sym.transfer(n, s, r, j)
    real = Transfer(*(as_term(f, n) for f in (real.active, real.dst, real.src_chunk, real.dst_chunk, real.op)))
    q = ix.wrap(layout.position(0, r, n) - layout.position(0, root, n), n)
    sending, index = nccl_ring.chain_step(n, s, q, collective == "reduce")
    active = ix.both(sending, index >= 0, nccl_ring.chain_fits(layout, 0, n, index, j))
    cell = index * chunk + j
    sends = [0 <= k, 0 <= e, e < chunk, k * chunk + e < count]
    return [
        Query("cells: (k, e) -> k chunk + e is one to one on the chain's elements", domain + sends + [0 <= k2, 0 <= e2, e2 < chunk, k2 * chunk + e2 < count,
              k * chunk + e == k2 * chunk + e2], z3.And(k == k2, e == e2)),
        Query("cells: every element c < count is (c div chunk, c mod chunk)", domain + [0 <= c, c < count],
              z3.And((c / chunk) * chunk + c % chunk == c, c % chunk >= 0, c % chunk < chunk)),
        Query("composition: the transfer is the chain function at (step s, chain position, element j), cell k chunk + j; steps and width the coordinate program's",
              domain + [0 <= s, s < steps, 0 <= r, r < n, 0 <= j, j < width],
              z3.And(steps == as_term(coordinates.steps(n), n), width == as_term(coordinates.width(n), n), real.active == active,
                     z3.Implies(active, z3.And(real.dst == layout.next(0, r, n), real.src_chunk == cell, real.dst_chunk == cell)))),
    ]


def chain_proof(collective: str) -> Outcome:
    made = chain_program(collective)
    v = symbolic(made)[1]
    induction = queries(made, chain_invariant(collective, v["chunk"], v["count"], v["root"]))
    return run_queries([spec_check(collective), *chain_lemmas(collective),
                        *(opaque_products(q, v["chunk"]) if q.name.startswith("in-range") else q for q in induction)])


#: collective -> its row's proof
PROOFS = {
    "allreduce": allreduce_proof,
    "reduce_scatter": lambda: block_proof("reduce_scatter"),
    "allgather": lambda: block_proof("allgather"),
    "broadcast": lambda: chain_proof("broadcast"),
    "reduce": lambda: chain_proof("reduce"),
}


# -- channels: any channel count, every ring ------------------------------------------------------

#: collective -> the generator's transfer of one channel's element: at(layout, n, s, r, c, e)
CHANNEL_AT = {
    "allreduce": nccl_ring.allreduce_at,
    "reduce_scatter": lambda layout, n, s, r, c, e: nccl_ring.block_at(layout, True, n, s, r, c, e),
    "allgather": lambda layout, n, s, r, c, e: nccl_ring.block_at(layout, False, n, s, r, c, e),
    "broadcast": lambda layout, n, s, r, c, e: nccl_ring.chain_at(layout, False, n, s, r, c, e),
    "reduce": lambda layout, n, s, r, c, e: nccl_ring.chain_at(layout, True, n, s, r, c, e),
}
#: the most channels the channels rows cover: NCCL 2.30.7's MAXCHANNELS (src/include/device.h)
MAX_CHANNELS = nccl_ring.MAX_CHANNELS
_INT = z3.IntSort()


class ChannelFunctions:
    """The channels rows' channel parts: ``part(h)`` and ``off(h)``
    uninterpreted functions of the channel index, ``most`` a variable, tied
    only by the scope's premises (:func:`channels_scope`).
    :class:`nccl_ring.Layout` evaluates them where the generator evaluates
    its :class:`nccl_ring.PartList` (``lemma: the generator's parts``
    shows the list meets the same premises for every channel count)."""

    def __init__(self):
        self.part_of, self.off_of, self.top = z3.Function("part", _INT, _INT), z3.Function("off", _INT, _INT), z3.Int("most")

    def part(self, c):
        return self.part_of(c)

    def off(self, c):
        return self.off_of(c)

    def most(self):
        return self.top


class RingFunctions:
    """The channels rows' rings: ``position(h, r)`` (rank r's place in
    channel h's ring list) and ``rank_at(h, i)`` uninterpreted functions,
    inverse bijections of 0..N-1 by the scope's premise;
    :class:`nccl_ring.Layout` evaluates them where the generator evaluates
    its :class:`nccl_ring.RingTable` (which it builds only from a
    permutation of the ranks, and checks against this premise)."""

    def __init__(self):
        self.pos, self.rank = z3.Function("pos", _INT, _INT, _INT), z3.Function("rank", _INT, _INT, _INT)

    def position(self, c, r):
        return self.pos(c, r)

    def rank_at(self, c, i):
        return self.rank(c, i)


def _in(x, low, high):
    return z3.And(low <= x, x < high)


def _parts_premises():
    h = z3.Int("h")
    return (
        Condition("part(h)>=0 and most>=part(h) for every channel h", ("channels", "part", "most"),
                  lambda c, part, most: z3.ForAll([h], z3.Implies(_in(h, 0, c), z3.And(part(h) >= 0, most >= part(h))), patterns=[part(h)])),
        Condition("off(0)=0, off(h)=off(h-1)+part(h-1)", ("channels", "part", "off"),
                  lambda c, part, off: z3.And(off(0) == 0, z3.ForAll([h], z3.Implies(_in(h, 1, c), off(h) == off(h - 1) + part(h - 1)), patterns=[off(h)]))),
        Condition("off(channels-1)+part(channels-1)=count", ("channels", "part", "off", "count"),
                  lambda c, part, off, count: off(c - 1) + part(c - 1) == count),
    )


def _ring_premise():
    h, r = z3.Ints("h r")
    return Condition("every channel's ring a permutation of the ranks (pos(h, .), rank(h, .) inverse bijections of 0..N-1)", ("N", "channels", "pos", "rank"),
                     lambda n, c, pos, rank: z3.And(
                         z3.ForAll([h, r], z3.Implies(z3.And(_in(h, 0, c), _in(r, 0, n)), z3.And(_in(pos(h, r), 0, n), rank(h, pos(h, r)) == r)),
                                   patterns=[pos(h, r)]),
                         z3.ForAll([h, r], z3.Implies(z3.And(_in(h, 0, c), _in(r, 0, n)), z3.And(_in(rank(h, r), 0, n), pos(h, rank(h, r)) == r)),
                                   patterns=[rank(h, r)])))


def ground(query: Query, rounds: int = 2) -> Query:
    """``query`` with each quantified premise (the scope's "for every
    channel h", "every ring") replaced by its instances at the terms of the
    query that match its pattern, and then at the terms of those instances:
    ``rounds`` rounds of what Z3's own instantiation does. The instances
    follow from the premise, so a claim proved from them holds under it; the
    query stays quantifier-free, which Z3 decides (with the quantifiers in,
    it cannot even show the premises satisfiable)."""
    flat = []
    for premise in query.premises:
        flat += list(premise.children()) if z3.is_and(premise) else [premise]
    quantified = [p for p in flat if z3.is_quantifier(p)]
    plain = [p for p in flat if not z3.is_quantifier(p)]
    instances, seen, done = [], set(), set()
    frontier = [*plain, query.claim, *query.when, *query.case]
    for _ in range(rounds):
        ground_terms, stack = [], list(frontier)
        while stack:
            t = stack.pop()
            if t.get_id() in seen or not z3.is_app(t):
                continue
            seen.add(t.get_id())
            if t.num_args() and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                ground_terms.append(t)
            stack.extend(t.children())
        frontier = []
        for q in quantified:
            pattern = q.pattern(0).arg(0)
            for t in ground_terms:
                if t.decl().eq(pattern.decl()) and (q.get_id(), t.get_id()) not in done:
                    done.add((q.get_id(), t.get_id()))
                    values = [None] * q.num_vars()
                    for k in range(pattern.num_args()):
                        values[z3.get_var_index(pattern.arg(k))] = t.arg(k)
                    made = z3.simplify(z3.substitute_vars(q.body(), *values))
                    frontier.append(made)
        instances += frontier
    return Query(query.name, plain + instances, query.claim, query.when, query.case)


def channels_scope(collective: str) -> Scope:
    """The scope of ``nccl-ring.<collective>-channels-exactly-once``: every
    channel count 1..64, every split into parts >= 0 that add up to the
    count, every ring on every channel."""
    rooted = (Bound("root", ">=", 0), Bound("root", "<", "N")) if collective in ("broadcast", "reduce") else ()
    return Scope.all_n(*rooted, *OPTIONS[:3], Bound("count", ">=", 0), Bound("channels", ">=", 1), Bound("channels", "<=", MAX_CHANNELS), OPTIONS[4],
                       *_parts_premises(), _ring_premise())


def channels_layout(collective: str):
    """The layout the channels rows prove, and its variables by name: the
    generator's :class:`nccl_ring.Layout` with the channel count, chunk,
    align, count (and root) solver variables, the parts
    :class:`ChannelFunctions` and the rings :class:`RingFunctions`."""
    parts, rings = ChannelFunctions(), RingFunctions()
    v = {name: z3.Int(name) for name in ("N", "s", "r", "j", "channels", "chunk", "align", "count", "root")}
    v.update(part=parts.part_of, off=parts.off_of, most=parts.top, pos=rings.pos, rank=rings.rank)
    root = v["root"] if collective in ("broadcast", "reduce") else 0
    layout = nccl_ring.Layout(collective, v["count"], v["channels"], v["chunk"], v["align"], rings, root, parts_of=parts)
    return layout, v


def _terms(t: Transfer, n) -> Transfer:
    return Transfer(*(as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)))


def channel_lemmas(collective: str) -> list:
    """``slots``, ``offsets``, ``ring`` and ``channel h`` (module text), h a
    solver variable: each channel of the program :func:`nccl_ring.program_of`
    builds on :func:`channels_layout` is :func:`nccl_ring.options_program`
    on its part, on the identity ring, its ranks renamed along its ring and
    its cells moved by the channel's offset."""
    multi, v = channels_layout(collective)
    sym = nccl_ring.program_of(multi, None)
    n, s, r, j, channels, chunk, align, count = (v[k] for k in ("N", "s", "r", "j", "channels", "chunk", "align", "count"))
    e, h, h2, c, i = z3.Ints("e h h2 c i")
    root = v["root"] if collective in ("broadcast", "reduce") else 0
    domain = channels_scope(collective).assertions(v)
    at = CHANNEL_AT[collective]
    steps, width, cells = (as_term(f(n), n) for f in (sym.steps, sym.width, sym.chunks))
    w = as_term(multi.width(n), n)
    c_j, e_j = (as_term(x, n) for x in nccl_ring._slot(multi, j, n))
    c_h, e_h = (as_term(x, n) for x in nccl_ring._slot(multi, h * w + e, n))
    point = [0 <= s, s < steps, 0 <= r, r < n]
    channel = [0 <= h, h < channels]
    off, part = (lambda x: as_term(multi.off(x, n), n)), (lambda x: as_term(multi.part(x, n), n))
    total = cells / n if collective in ("reduce_scatter", "allgather") else cells
    made = [
        Query("slots: slot j is element j mod width of channel j div width, and its transfer is that channel's", domain + point + [0 <= j, j < width],
              z3.And(width == channels * w, 0 <= c_j, c_j < channels, 0 <= e_j, e_j < w, j == c_j * w + e_j,
                     _same(sym.transfer(n, s, r, j), at(multi, n, s, r, c_j, e_j), n))),
        Query("slots: element e < width of channel h < channels is slot h width + e", domain + channel + [0 <= e, e < w],
              z3.And(c_h == h, e_h == e, h * w + e < width)),
        Query("offsets: channel 0 starts at 0, channel h + 1 where channel h ends, and the last channel ends the vector (each block)", domain + channel,
              z3.And(off(0 * h) == 0, part(h) >= 0, z3.Implies(h + 1 < channels, off(h + 1) == off(h) + part(h)), off(channels - 1) + part(channels - 1) == total)),
        Query("offsets: a later channel starts after an earlier one ends (induction over h2 from h + 1: step)",
              domain + channel + [h < h2, h2 + 1 < channels, off(h) + part(h) <= off(h2)], off(h) + part(h) <= off(h2 + 1)),
        Query("offsets: every channel starts at 0 or later (induction over h: step)", domain + channel + [h + 1 < channels, off(h) >= 0], off(h + 1) >= 0),
        Query("offsets: cell c < count is in the last channel h that starts at c or before", domain + channel + [0 <= c, c < total, off(h) <= c,
              z3.Implies(h + 1 < channels, off(h + 1) > c)], c < off(h) + part(h)),
    ]
    for h_ in (h,):  # one symbolic channel: every h < channels
        ring = RING_RENAMING[collective]
        here = ring(multi, n, h_, r, root)  # (rank of the 1-channel program, its root, the renaming sigma)
        single = nccl_ring.options_program(collective, chunk, align, part(h_), here[1])
        layout = nccl_ring.options_layout(collective, chunk, align, part(h_), here[1])
        mine, theirs = _terms(at(multi, n, s, r, h_, e), n), _terms(at(layout, n, s, here[0], 0, e), n)
        sigma = here[2]
        o_ = off(h_)
        own_steps, own_width = as_term(single.steps(n), n), as_term(single.width(n), n)
        if collective in ("reduce_scatter", "allgather"):  # block b's cell b part + o is sigma(b) count + offset + o
            loop = s / (n - 1)
            b = nccl_ring.block_loop(n, s - loop * (n - 1), here[0], 1, 0, collective == "reduce_scatter")[1]
            o = theirs.src_chunk - b * part(h_)
            moved = z3.And(0 <= o, o < part(h_), theirs.src_chunk == theirs.dst_chunk, mine.src_chunk == sigma(b) * count + o_ + o, mine.dst_chunk == mine.src_chunk)
            words = "its block b's cell b part + o at sigma(b) count + offset + o"
        else:
            moved = z3.And(mine.src_chunk == o_ + theirs.src_chunk, mine.dst_chunk == o_ + theirs.dst_chunk)
            words = "its cells shifted by its offset"
        made += [
            Query("ring: sigma, channel h's renaming of the 1-channel program's ranks, is a bijection of 0..N-1 with inverse rank -> its ring place"
                  + (", and takes its root to the root" if collective in ("broadcast", "reduce") else ""),
                  domain + channel + [0 <= i, i < n, 0 <= r, r < n],
                  z3.And(0 <= sigma(i), sigma(i) < n, 0 <= here[0], here[0] < n, sigma(here[0]) == r, ring(multi, n, h_, sigma(i), root)[0] == i,
                         *([0 <= here[1], here[1] < n, sigma(here[1]) == root] if collective in ("broadcast", "reduce") else []))),
            Query(f"channel h: rank r's element e is the 1-channel program's element e on part h, at rank sigma^-1(r), to sigma of its receiver, {words}",
                  domain + channel + point + [0 <= e, e < w],
                  z3.And(mine.active == theirs.active, z3.Implies(theirs.active, z3.And(mine.dst == sigma(theirs.dst), moved, mine.op == theirs.op)))),
            Query("channel h: the 1-channel program's steps are among the program's", domain + channel, own_steps <= steps),
            Query("channel h: the 1-channel program's slots are among the channel's", domain + channel, own_width <= w),
            Query("channel h: the 1-channel program's transfer at slot e is its element e",
                  domain + channel + [0 <= s, s < own_steps, 0 <= i, i < n, 0 <= e, e < own_width], _same(single.transfer(n, s, i, e), at(layout, n, s, i, 0, e), n)),
            *([Query("channel h: past the 1-channel program's steps is past its loops", domain + channel + [0 <= s, s >= own_steps],
                     s / per(collective, n) >= own_loops(collective, layout, n)),
               Query("channel h: past the 1-channel program's loops its elements are idle",
                     domain + channel + point + [0 <= e, e < w, s / per(collective, n) >= own_loops(collective, layout, n)], z3.Not(theirs.active))]
              if collective in LOOPS else
              [Query("channel h: past the 1-channel program's steps its elements are idle", domain + channel + point + [0 <= e, e < w, s >= own_steps],
                     z3.Not(theirs.active))]),
            Query("channel h: past the 1-channel program's slots its elements are idle", domain + channel + point + [0 <= e, e < w, e >= own_width],
                  z3.Not(theirs.active)),
        ]
    if collective in ("reduce_scatter", "allgather"):
        from .induction import EXPECTED

        b, b2, o, o2 = z3.Ints("b b2 o o2")
        owned = EXPECTED[collective][1 if collective == "reduce_scatter" else 0]
        made += [
            Query("blocks: (b, o) -> b count + o is one to one for o < count", domain + [0 <= b, b < n, 0 <= b2, b2 < n, 0 <= o, o < total, 0 <= o2, o2 < total,
                  b * total + o == b2 * total + o2], z3.And(b == b2, o == o2)),
            Query("blocks: cell b count + o (o < count) is block b's, the collective's", domain + [0 <= b, b < n, 0 <= o, o < total, c == b * total + o],
                  z3.And(_bool(owned(n, cells, b, c, 0)), z3.Not(_bool(owned(n, cells, b + 1, c, 0))), z3.Not(_bool(owned(n, cells, b - 1, c, 0))), c < cells)),
        ]
    return [ground(q) for q in made]


def _allreduce_renaming(layout, n, h, r, root):
    """All-reduce: rank r plays the 1-channel program's rank index(h, r), its
    distance from rank 0 along the ring; sigma(i) = rank_at(h, pos(h, 0) + i)."""
    return (layout.index(h, r, n), 0, lambda i: layout.rank_at(h, ix.wrap(layout.position(h, 0 * i, n) + i, n), n))


def _place_renaming(layout, n, h, r, root):
    """Reduce-scatter, all-gather, broadcast, reduce: rank r plays the
    1-channel program's rank pos(h, r), the root pos(h, root);
    sigma(i) = rank_at(h, i)."""
    return (layout.position(h, r, n), layout.position(h, root, n), lambda i: layout.rank_at(h, i, n))


#: collective -> (layout, n, h, r, root) -> (the 1-channel program's rank for r, its root, sigma)
RING_RENAMING = {"allreduce": _allreduce_renaming, "reduce_scatter": _place_renaming, "allgather": _place_renaming,
                 "broadcast": _place_renaming, "reduce": _place_renaming}


def generator_parts_lemmas(collective: str) -> list:
    """``the generator's parts``: for every channel count C in 1..64 and
    parts p_0..p_{C-1} (solver variables), the generator's
    :class:`nccl_ring.Layout` on its :class:`nccl_ring.PartList` meets the
    premises the channels rows state of :class:`ChannelFunctions`:
    part(h) = p_h, off(0) = 0, off(h) = off(h-1) + part(h-1), the last part
    ending at their sum (Z3 reads each as the definition: ``trivial``). The
    channel index is a solver term, as in the generator (whose transfer is
    evaluated on Z3 terms and compiled to numpy), so the lookup evaluated
    here is the one the generator runs. The parts >= 0 that add up to the
    count, one per channel, with the largest part ``most`` at least every
    part, are what the generator accepts (:func:`nccl_ring.generate_ring`
    checks them on its own values and refuses any other)."""
    n, index = z3.Ints("N index")
    made = []
    for channels in range(1, MAX_CHANNELS + 1):
        parts = z3.Ints(" ".join(f"p{k}" for k in range(channels)))
        layout = nccl_ring.Layout(collective, sum(parts[1:], parts[0]), channels, 1, 1, None, 0, equal=tuple(parts))
        at_index = [as_term(layout.off(index, n), n), as_term(layout.part(index, n), n)]  # built once, read at each channel below
        off, part = ([z3.substitute(t, (index, z3.IntVal(x))) for x in range(channels)].__getitem__ for t in at_index)
        made.append(Query(f"the generator's parts: {channels} channel{'s' * (channels > 1)}", [],
                          z3.And(*(part(h) == parts[h] for h in range(channels)), off(0) == 0, *(off(h) == off(h - 1) + part(h - 1) for h in range(1, channels)),
                                 off(channels - 1) + part(channels - 1) == sum(parts[1:], parts[0]))))
    return made


#: collective -> (steps of a loop, elements of a loop) for the collectives that loop
LOOPS = {
    "allreduce": (lambda n: 2 * (n - 1), lambda layout, n: n * layout.chunk),
    "reduce_scatter": (lambda n: n - 1, lambda layout, n: layout.chunk),
    "allgather": (lambda n: n - 1, lambda layout, n: layout.chunk),
}


def per(collective: str, n):
    """Steps of one loop."""
    return LOOPS[collective][0](n)


def own_loops(collective: str, layout, n):
    """The generator's loop count of ``layout``'s part."""
    return as_term(layout.loops(n, LOOPS[collective][1](layout, n)), n)


def _same(a: Transfer, b: Transfer, n):
    a, b = (Transfer(*(as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op))) for t in (a, b))
    return z3.And(a.active == b.active, z3.Implies(a.active, z3.And(a.dst == b.dst, a.src_chunk == b.src_chunk, a.dst_chunk == b.dst_chunk, a.op == b.op)))


def channels_proof(collective: str) -> Outcome:
    """The channel lemmas, the generator's parts, then the 1-channel row's
    proof (every part is a count it covers), held to that row's own scope."""

    def one_channel() -> Outcome:
        outer = current_row()
        with within(Row(f"nccl-ring.{collective}-exactly-once", scope(collective), outer.rlimit if outer else current_rlimit())) as inner:
            outcome = PROOFS[collective]()
        if outer is not None:
            outer.most_used = max(outer.most_used, inner.most_used)
        return outcome

    return run_queries([*channel_lemmas(collective), *generator_parts_lemmas(collective), one_channel])
