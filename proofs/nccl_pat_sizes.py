"""nccl-pat at every count and chunk: several elements and several loops as lanes of the count-1 program.

Rows ``nccl-pat.reduce_scatter-sizes-exactly-once`` and
``nccl-pat.allgather-sizes-exactly-once``: for every N in 2..65536 and
every count and chunk (solver variables) with count >= 1, chunk in
1..MAX_CELLS, N count <= MAX_CELLS and chunk // count < 8 (so NCCL 2.30's
postFreq is 1, 2 or 4), the program a call with that chunk and count builds
(:func:`collspec.models.generators.nccl_pat.pat_program`, chunk and count
Z3 terms) leaves every cell with every contribution exactly once. The
proof splits that program into *lanes*, each a renamed copy of the count-1
program that the count-1 rows prove, and composes them by an argument
written here and in docs/proofs.md ("nccl-pat: sizes as lanes").

Notation: the generator's own terms at symbolic N, chunk, count. A, F: its
aggregation and postFreq (``Program.choices``); per: its
``steps_per_loop(N, A, F)``; cw = ``chunk_width(chunk, count)`` (min(chunk,
count)); loops = ``loop_count(chunk, count)`` (ceil(count / chunk)). At
step s and slot j the transfer takes loop L = s div per, step t = s - L
per, place e = j div cw, element x = j mod cw, the element ``L cw + x``
of every block, cell ``block count + L cw + x``. The *lane* (L, x) is
the transfers with that loop and x; the count-1 program O_k is
``pat_program(collective, chunk=k, count=1)``, k = 1 where chunk // count
< 2, k = 2 where 2 <= chunk // count < 4 and k = 4 where 4 <= chunk //
count < 8 (the three ``cases``).

**What is decided (Z3 queries).** On 20-bit bit-vectors, the generator's
own terms (the ones the schedule is compiled from), in each case k:

- ``choice``: A and F of the call are O_k's (the same terms' values at
  every N of the scope), and F is in 1..k and below N;
- ``shape``: the call's steps are loops x per, its width F x cw, its cells
  N count; O_k's steps (its A and F replaced by the call's, which
  ``choice`` decides equal) are per, its width F, its cells N; per is in
  1..2N - 3;
- ``lane``: the call's transfer at (s, r, j) is O_k's at (t, r, e), its
  A and F replaced by the call's and its own loop index t div per by 0
  (``steps`` decides t < per), with the cell renamed b -> b count + L cw
  + x and active exactly when O_k's is and L cw + x < count (after those
  replacements Z3 reads it as the definition: ``trivial``).

Over the integers, with per, F and the other products opaque variables
bounded as ``shape`` decides, and cw and loops the generator's
``chunk_width`` and ``loop_count`` evaluated on integer terms:

- ``steps``: step s < loops per is step t = s - L per < per of loop L =
  s div per < loops, t div per = 0, and step t of loop L < loops is step L
  per + t < loops per (one to one);
- ``slots``: slot j < F cw is place j div cw < F, element j mod cw < cw,
  and back (one to one);
- ``elements``: element o < count is (L, x) = (o div cw, o mod cw) with L
  < loops, and L cw + x < count only for that (L, x);
- ``cells``: (b, o) -> b count + o is one to one from b < N, o < count
  onto 0..N count - 1, and cell b count + o is block b's in the
  collective's ends (:data:`collspec.proofs.induction.EXPECTED`, N count
  cells);
- ``range``: every value above (steps, slots, elements, cells) is below
  2^19: the bit-vector operations are the integer ones on them.

**What is argued (not a Z3 query).** (1) Replacing a subterm by a term of
the same value keeps a term's value (``choice`` and ``steps`` decide the
values; the replacement is the one meta-step of the nccl-pat rows'
``same``). (2) SMT-LIB's bit-vector operations are the integer ones where
no value leaves the signed 20-bit range (``range``; the schedule builder
also refuses any schedule whose active transfers depend on a wrapped
value, :mod:`collspec.models.terms`). (3) The composition: by ``lane``,
``steps``, ``slots`` and ``elements``, the transfers of lane (L, x) with
L cw + x < count are exactly O_k's, step t at step L per + t, place e at
slot e cw + x, each cell b renamed to b count + L cw + x; by ``cells`` the
renaming is one to one and different lanes touch different cells, and
lanes with L cw + x >= count send nothing. So a lane's cells change only
in its own loop's steps, as O_k's cells change in O_k's run (the same
sends and adds, in the same order, on the renamed cells), and each lane
ends as O_k ends: every cell holds every contribution of its block exactly
once, as the count-1 rows prove of O_k for every N of the scope
(premises: ``nccl-pat.<collective>-exactly-once`` and ``-below-10-`` for
O_1, ``-postfreq-2-`` for O_2, ``-postfreq-4-`` for O_4, each run under ``--full``). Every cell b
count + o of the call is in exactly one lane, and its block is b
(``cells``), so the call's run ends as the collective's spec says.

The program proved is the one a call runs: a call with chunk and count
given (NCCL's own aggregation and postFreq) builds its schedule from the
term of :func:`call_program` (``sized_program``'s factory), chunk and
count given their values, not from the generator run again on numbers.
The rows hold only with the count-1 rows, so they run with them, under
``--full``, where a count-1 row not proved fails them
(:func:`collspec.proofs.suite.premises_held`).

Not covered: chunk // count >= 8 (postFreq 8 and above, aggregation above
32), count 0 (no cells), NCCL's default chunk (a chunk must be given).
"""

from __future__ import annotations

import z3

from ..models import indexing as ix
from ..models.generators import nccl_pat
from ..models.program import BITVEC_WIDTH, as_term
from .induction import EXPECTED, MAX_RANKS
from .scope import Bound, Condition, Proved, Scope
from .solver import Outcome, Query, run_queries

#: the rows and the collective each proves
ROWS = {f"nccl-pat.{c}-sizes-exactly-once": c for c in ("reduce_scatter", "allgather")}

#: the count-1 rows whose program O_k is each case's (k: chunk of O_k)
COUNT_1_ROWS = {
    "reduce_scatter": {1: ("nccl-pat.reduce_scatter-exactly-once", "nccl-pat.reduce_scatter-below-10-exactly-once"),
                       2: ("nccl-pat.reduce_scatter-postfreq-2-exactly-once",),
                       4: ("nccl-pat.reduce_scatter-postfreq-4-exactly-once",)},
    "allgather": {1: ("nccl-pat.allgather-exactly-once", "nccl-pat.allgather-below-10-exactly-once"),
                  2: ("nccl-pat.allgather-postfreq-2-exactly-once",),
                  4: ("nccl-pat.allgather-postfreq-4-exactly-once",)},
}

#: signed 20-bit values: every value of the decomposition is below this
LIMIT = 1 << (BITVEC_WIDTH - 1)


def _fits_quotient(chunk, count):
    return ix.floordiv(chunk, count)


def scope(name: str) -> Scope:
    """N in 2..65536, count >= 1, chunk in 1..MAX_CELLS, N count <=
    MAX_CELLS, chunk // count < 8, and the count-1 rows as a premise."""
    collective = ROWS[name]
    rows = tuple(r for k in CASES for r in COUNT_1_ROWS[collective][k])
    return Scope.all_n(
        Bound("N", "<=", MAX_RANKS), Bound("count", ">=", 1), Bound("chunk", ">=", 1), Bound("chunk", "<=", nccl_pat.MAX_CELLS),
        Condition(f"N count <= {nccl_pat.MAX_CELLS}", ("N", "count"), lambda n, count: count <= ix.floordiv(nccl_pat.MAX_CELLS, n)),
        Condition("chunk // count < 8 (postFreq 1, 2 or 4)", ("chunk", "count"), lambda chunk, count: _fits_quotient(chunk, count) < 8),
        Proved(rows, f"the count-1 rows {', '.join(rows)} (premises, proved under --full)"),
    )


#: case k -> its condition on q = chunk // count, and its words (the cases cover q < 8)
CASES = {1: lambda q: q < 2, 2: lambda q: z3.And(q >= 2, q < 4), 4: lambda q: q >= 4}
CASE_WORDS = {1: "< 2", 2: "in 2..3", 4: "in 4..7"}


def call_program(collective: str, chunk, count):
    """The program a call with ``chunk`` and ``count`` builds, chunk and count
    Z3 terms: the factory of :func:`~collspec.models.generators.nccl_pat.sized_program`,
    whose term (chunk and count given their values) the schedule of such a
    call enumerates."""
    return nccl_pat.sized_program(collective, 1, 1).factory(chunk=chunk, count=count)


def _terms(collective: str, k: int, make=call_program):
    """The call's program (``make(collective, chunk, count)``) and O_k's on
    20-bit bit-vectors, and the terms the lemmas read (module text)."""
    v = {name: z3.BitVec(name, BITVEC_WIDTH) for name in ("N", "s", "r", "j", "chunk", "count")}
    n, s, j, chunk, count = (v[x] for x in ("N", "s", "j", "chunk", "count"))
    call = make(collective, chunk, count)
    one = nccl_pat.pat_program(collective, chunk=k, count=1)
    agg, post = (as_term(call.choices[x](n), n) for x in ("aggregation", "post"))
    agg1, post1 = (as_term(one.choices[x](n), n) for x in ("aggregation", "post"))
    spl = as_term(nccl_pat.steps_per_loop(n, agg, post), n)
    per = as_term(nccl_pat._nonzero(spl), n)
    cw, loops = (as_term(f(chunk, count), n) for f in (nccl_pat.chunk_width, nccl_pat.loop_count))
    loop = ix.floordiv(v["s"], per)
    t = s - loop * per
    e, x = ix.floordiv(j, cw), j % cw
    return dict(v=v, call=call, one=one, agg=agg, post=post, agg1=agg1, post1=post1, spl=spl, per=per, cw=cw, loops=loops,
                loop=loop, t=t, e=e, x=x, element=loop * cw + x)


def _fields(made, n, *at):
    t = made.transfer(n, *at)
    return [as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)]


def _domain(name: str, v: dict) -> list:
    return scope(name).assertions(v)


def _case(k: int, v: dict):
    return CASES[k](_fits_quotient(v["chunk"], v["count"]))


def case_queries(name: str, k: int, make=call_program) -> list:
    """``choice``, ``shape`` and ``lane`` (module text) in case k, on the
    program ``make(collective, chunk, count)`` (a test plants a bug there)."""
    collective = ROWS[name]
    g = _terms(collective, k, make)
    v, call, one = g["v"], g["call"], g["one"]
    n, s, r, j, count = (v[x] for x in ("N", "s", "r", "j", "count"))
    domain, case = _domain(name, v), [_case(k, v)]
    chosen = [(g["agg1"], g["agg"]), (g["post1"], g["post"])]

    def replaced(term):
        return z3.substitute(term, *chosen)

    words = f"[chunk // count {CASE_WORDS[k]}: O_{k} = pat_program(chunk={k}, count=1)]"
    steps, width, cells = (as_term(f(n), n) for f in (call.steps, call.width, call.chunks))
    steps1, width1, cells1 = (replaced(as_term(f(n), n)) for f in (one.steps, one.width, one.chunks))
    mine = _fields(call, n, s, r, j)
    theirs = [replaced(f) for f in _fields(one, n, g["t"], r, g["e"])]
    loop1 = ix.floordiv(g["t"], g["per"])  # O_k's own loop index at step t, after the replacement
    theirs = [z3.simplify(z3.substitute(f, (loop1, z3.BitVecVal(0, BITVEC_WIDTH)))) for f in theirs]
    mine = [z3.simplify(f) for f in mine]
    element = z3.simplify(g["element"])
    post_ok = z3.And(g["post"] >= 1, g["post"] <= k, g["post"] < n)
    return [
        Query(f"choice: the call's aggregation and postFreq are O_{k}'s {words}", domain, z3.And(g["agg"] == g["agg1"], g["post"] == g["post1"], post_ok), case=case),
        Query(f"shape: steps loops x per, width postFreq x cw, N count cells; O_{k}: per steps, postFreq slots, N cells; per in 1..2N-3 {words}", domain,
              z3.And(steps == g["loops"] * g["spl"], width == g["post"] * g["cw"], cells == n * count, z3.simplify(steps1) == z3.simplify(g["spl"]),
                     z3.simplify(width1) == g["post"], cells1 == n, g["spl"] >= 1, g["spl"] <= 2 * n - 3, g["per"] == g["spl"]), case=case),
        Query(f"lane: the transfer at (s, r, j) is O_{k}'s at (t, r, e), cell b renamed b count + L cw + x, active iff also L cw + x < count {words}",
              domain + [0 <= s, s < steps, 0 <= r, r < n, 0 <= j, j < width],
              z3.And(mine[0] == z3.And(theirs[0], element < count),
                     z3.Implies(mine[0], z3.And(mine[1] == theirs[1], mine[2] == theirs[2] * count + element, mine[3] == theirs[3] * count + element,
                                                mine[4] == theirs[4]))), case=case),
    ]


def arithmetic_queries(name: str) -> list:
    """``steps``, ``slots``, ``elements``, ``cells`` and ``range`` (module
    text), over the integers: per and postFreq opaque variables bounded as
    ``shape`` decides, cw and loops the generator's functions on integers."""
    collective = ROWS[name]
    n, s, j, chunk, count, per, post, loop, t, e, x, o, o2, b, b2, c = z3.Ints("N s j chunk count per post L t e x o o2 b b2 c")
    v = {"N": n, "chunk": chunk, "count": count}
    domain = _domain(name, v)
    cw, loops = nccl_pat.chunk_width(chunk, count), nccl_pat.loop_count(chunk, count)
    opaque = domain + [per >= 1, per <= 2 * n - 3, post >= 1, post <= max(CASES), post < n]
    cells = n * count
    _, out_cell, expected = EXPECTED[collective]
    return [
        Query("steps: step s < loops per is step t = s - L per < per of loop L = s div per < loops, and t div per = 0", opaque + [0 <= s, s < loops * per],
              z3.And(0 <= s / per, s / per < loops, 0 <= s - (s / per) * per, s - (s / per) * per < per, (s - (s / per) * per) / per == 0)),
        Query("steps: step t < per of loop L < loops is step L per + t < loops per, whose loop is L and step t", opaque + [0 <= loop, loop < loops, 0 <= t, t < per],
              z3.And(0 <= loop * per + t, loop * per + t < loops * per, (loop * per + t) / per == loop)),
        Query("slots: slot j < postFreq cw is place j div cw < postFreq and element j mod cw < cw", opaque + [0 <= j, j < post * cw],
              z3.And(0 <= j / cw, j / cw < post, 0 <= j % cw, j % cw < cw, (j / cw) * cw + j % cw == j)),
        Query("slots: place e < postFreq, element x < cw is slot e cw + x < postFreq cw", opaque + [0 <= e, e < post, 0 <= x, x < cw],
              z3.And(0 <= e * cw + x, e * cw + x < post * cw, (e * cw + x) / cw == e, (e * cw + x) % cw == x)),
        Query("elements: element o < count is lane (o div cw, o mod cw), its loop below loops", domain + [0 <= o, o < count],
              z3.And(o / cw < loops, 0 <= o % cw, o % cw < cw, (o / cw) * cw + o % cw == o)),
        Query("elements: a lane (L, x), x < cw, is element L cw + x of no other lane", domain + [0 <= loop, 0 <= x, x < cw, 0 <= e, 0 <= o, o < cw, loop * cw + x == e * cw + o],
              z3.And(loop == e, x == o)),
        Query("cells: (b, o) -> b count + o is one to one for b < N, o < count", domain + [0 <= b, b < n, 0 <= b2, b2 < n, 0 <= o, o < count, 0 <= o2, o2 < count,
              b * count + o == b2 * count + o2], z3.And(b == b2, o == o2)),
        Query("cells: every cell c < N count is b count + o with b = c div count < N, o = c mod count", domain + [0 <= c, c < cells],
              z3.And(c / count < n, 0 <= c % count, c % count < count, (c / count) * count + c % count == c)),
        Query("cells: cell b count + o (o < count) is block b's in the collective's ends (N count cells)", domain + [0 <= b, b < n, 0 <= o, o < count, c == b * count + o],
              z3.And(0 <= c, c < cells, *( [out_cell(n, cells, b, c, 0), z3.Not(out_cell(n, cells, b + 1, c, 0)), z3.Not(out_cell(n, cells, b - 1, c, 0))]
                                              if collective == "reduce_scatter" else [expected(n, cells, b, c, b, c, 0), z3.Not(expected(n, cells, b, c, b + 1, c, 0))]))),
        Query(f"range: steps, slots, elements and cells stay below 2^{BITVEC_WIDTH - 1}", opaque + [0 <= loop, loop < loops, 0 <= x, x < cw, 0 <= e, e < post],
              z3.And(count + chunk - 1 < LIMIT, loops * per < LIMIT, post * cw < LIMIT, loop * cw + x < LIMIT, cells <= nccl_pat.MAX_CELLS, loop * per + per <= loops * per)),
    ]


def prove(name: str) -> Outcome:
    """The row: that the two cases cover the scope, each case's
    ``choice``, ``shape`` and ``lane``, then the integer lemmas."""
    collective = ROWS[name]
    chunk, count = (z3.BitVec(x, BITVEC_WIDTH) for x in ("chunk", "count"))
    q = _fits_quotient(chunk, count)
    cover = Query(f"cases: chunk // count {' or '.join(CASE_WORDS.values())} covers the scope", _domain(name, {"chunk": chunk, "count": count}),
                  z3.Or(*(CASES[k](q) for k in CASES)))
    return run_queries([cover, *(query for k in CASES for query in case_queries(name, k)), *arithmetic_queries(name)])
