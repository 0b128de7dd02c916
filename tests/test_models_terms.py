"""The term evaluator (models/terms.py) against Z3's own evaluation: every
operator on values at and around the edges (wrap-around, zero divisors,
negative operands), and every built-in program's compiled transfer term at
every (step, rank, slot) of a small schedule. The schedules are built with
this evaluator, so this is what "numpy and Z3 agree by construction" rests on."""

from __future__ import annotations

import numpy as np
import pytest
import z3

from collspec.models.generators import PROGRAMS
from collspec.models.program import BITVEC, BITVEC_WIDTH, RefinementError, symbolic
from collspec.models.terms import UnsupportedTerm, compile_terms

W = BITVEC_WIDTH
EDGES = [0, 1, 2, 3, -1, -2, -3, 7, 19, 20, 21, (1 << (W - 1)) - 1, (1 << (W - 1)) - 2, -(1 << (W - 1)), 12345, -12345, 1 << 18]

x, y = z3.BitVecs("x y", W)
BV_TERMS = [
    x + y, x - y, x * y, -x, x / y, x % y, z3.SRem(x, y), z3.UDiv(x, y), z3.URem(x, y), x << y, z3.LShR(x, y), x >> y,
    x & y, x | y, x ^ y, ~x, z3.Extract(7, 2, x), z3.Concat(z3.Extract(3, 0, x), z3.Extract(3, 0, y)), z3.ZeroExt(4, z3.Extract(9, 0, x)),
    z3.SignExt(4, z3.Extract(9, 0, x)), x < y, x <= y, x > y, x >= y, z3.ULT(x, y), z3.ULE(x, y), z3.UGT(x, y), z3.UGE(x, y), x == y,
    z3.If(x < y, x, y), z3.Distinct(x, y), ~(x & y),
]
a, b = z3.Ints("a b")
INT_TERMS = [a + b, a - b, a * b, -a, a / b, a % b, z3.Abs(a), a < b, a <= b, a > b, a >= b, a == b, z3.If(a >= b, a, b),
             z3.And(a < b, b > 0), z3.Or(a < b, b > 0), z3.Not(a < b), z3.Xor(a < b, b > 0), z3.Implies(a < b, b > 0)]
INT_EDGES = [0, 1, 2, 3, -1, -2, -3, 7, -7, 4096, -4096, 1 << 22, -(1 << 22)]


def z3_value(term, bindings):
    value = z3.simplify(z3.substitute(term, *bindings))
    if z3.is_bool(value):
        assert z3.is_true(value) or z3.is_false(value), value
        return bool(z3.is_true(value))
    return value.as_signed_long() if z3.is_bv(value) else value.as_long()


def compare(terms, variables, grid, make):
    code = compile_terms(terms, variables)
    names = list(variables)
    mesh = np.meshgrid(*[np.asarray(grid, dtype=np.int64)] * len(names), indexing="ij")
    got, _ = code.evaluate(**{n: m.ravel() for n, m in zip(names, mesh)})
    for k, term in enumerate(terms):
        values = np.broadcast_to(got[k], mesh[0].ravel().shape)
        for i, point in enumerate(zip(*(m.ravel() for m in mesh))):
            bindings = [(variables[n], make(int(p))) for n, p in zip(names, point)]
            if z3.is_int(term) and any(z3.is_app_of(t, z3.Z3_OP_IDIV) or z3.is_app_of(t, z3.Z3_OP_MOD) for t in [term]) and point[1] == 0:
                continue  # Z3 leaves div and mod by 0 unspecified
            want = z3_value(term, bindings)
            assert (bool(values[i]) if isinstance(want, bool) else int(values[i])) == want, (term, point)


def test_every_bitvector_operator_is_z3s():
    compare(BV_TERMS, {"x": x, "y": y}, EDGES, lambda v: z3.BitVecVal(v, W))


def test_every_integer_operator_is_z3s():
    compare(INT_TERMS, {"a": a, "b": b}, INT_EDGES, z3.IntVal)


def test_a_wrapped_sum_is_marked_and_a_decided_and_hides_it():
    code = compile_terms([x + y, z3.And(x < 0, x + y > 0)], {"x": x, "y": y})
    (total, both), (over, hidden) = code.evaluate(x=np.array([(1 << (W - 1)) - 1, 5]), y=np.array([1, 1]))
    assert total.tolist() == [-(1 << (W - 1)), 6] and over.tolist() == [True, False]
    assert hidden is None or not hidden.any()  # x < 0 is false (and exact) on both points


def test_an_unknown_operator_is_an_internal_error():
    r = z3.Real("r")
    with pytest.raises(UnsupportedTerm, match="no numpy form"):
        compile_terms([z3.ToInt(r) + 1], {"r": r})


PAIRS = [(alg, c) for alg, table in PROGRAMS.items() for c in table]
OPTIONS = {("hierarchical-ring", "allreduce"): {"size": 3}}


@pytest.mark.parametrize("algorithm, collective", PAIRS, ids=[f"{a}-{c}" for a, c in PAIRS])
def test_every_point_of_a_built_schedule_is_z3s_value_of_the_term(algorithm, collective):
    """Every (step, rank, slot) at N = 3 (6 for hierarchical-ring): the
    evaluator's fields equal Z3's evaluation of the unsimplified terms."""
    program = PROGRAMS[algorithm][collective](**OPTIONS.get((algorithm, collective), {}))
    n = 6 if algorithm == "hierarchical-ring" else 3
    sym, v = symbolic(program)
    make = (lambda k: z3.BitVecVal(k, W)) if program.sort == BITVEC else z3.IntVal
    t = sym.transfer(v["N"], v["s"], v["r"], v["j"])
    fields = [f if z3.is_expr(f) else (z3.BoolVal(bool(f)) if isinstance(f, bool) else make(int(f))) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)]
    fixed = [(v["N"], make(n))] + [(v[k], make(val)) for k, val in program.params.items()]
    at = program.terms().at(n)
    s, r, j = np.meshgrid(np.arange(at.steps), np.arange(n), np.arange(at.width), indexing="ij")
    got, _ = at.evaluate(s=s, r=r, j=j)
    for point in zip(s.ravel(), r.ravel(), j.ravel()):
        bindings = fixed + [(v["s"], make(int(point[0]))), (v["r"], make(int(point[1]))), (v["j"], make(int(point[2])))]
        want = [z3_value(f, bindings) for f in fields]
        have = [np.broadcast_to(g, s.shape)[point] for g in got]
        assert bool(have[0]) == want[0], point
        if want[0]:
            assert [int(h) for h in have[1:]] == want[1:], point


def test_a_wrapped_width_is_refused_by_name():
    from collspec.models.program import BITVEC, Program, Transfer

    def transfer(n, s, r, j):
        return Transfer(True, (r + 1) % n, 0, 0, 0)

    # 5 x 2^18 slots is past the 20-bit vectors: the width the proofs would see is another number
    program = Program("t", "allgather", lambda n: n, lambda n: 1, lambda n: n * (1 << 18), transfer, lambda n, s: (None, None), lambda: program, sort=BITVEC)
    with pytest.raises(RefinementError, match=r"^t allgather, 5 ranks: width\(N\) depends on a value past the proofs' 20-bit vectors"):
        program.schedule(5)


def test_an_integer_product_past_int64_is_refused_not_wrapped():
    from collspec.models.program import Program, Transfer

    def transfer(n, s, r, j):
        return Transfer(True, (r + 1) % n, (r + 1) * (1 << 40) * (s + (1 << 30)) % n, 0, 0)

    program = Program("t", "allgather", lambda n: n, lambda n: 2, lambda n: 1, transfer, lambda n, s: (None, None), lambda: program)
    with pytest.raises(RefinementError, match=r"^t allgather, 4 ranks: the transfers of steps 0..1 \(a product reaches \d+ bits\) is past the 64-bit"):
        program.schedule(4)


def test_compiled_code_is_kept_by_the_terms_identity_and_never_served_for_other_terms(monkeypatch):
    """compile_terms keeps its results by the terms' ids (Z3 builds one AST
    per distinct term): the same terms built again get the same code; a term
    that differs in one constant gets its own; the oldest entry goes first."""
    from collspec.models import terms as compiled_terms

    x = z3.BitVec("x", W)
    first = compile_terms([x + 1, x * 3], {"x": x})
    again = compile_terms([z3.BitVec("x", W) + 1, z3.BitVec("x", W) * 3], {"x": z3.BitVec("x", W)})
    assert again is first
    other = compile_terms([x + 2, x * 3], {"x": x})
    assert other is not first
    assert [int(v) for v in other.evaluate(x=np.int64(5))[0]] == [7, 15]
    assert [int(v) for v in first.evaluate(x=np.int64(5))[0]] == [6, 15]
    monkeypatch.setattr(compiled_terms, "COMPILED_KEPT", 1)
    compile_terms([x - 7], {"x": x})
    assert compile_terms([x + 1, x * 3], {"x": x}) is not first  # dropped, compiled anew


def test_a_bitvector_program_compiled_once_gives_each_ns_values_of_the_substituted_terms():
    """Bit-vector programs compile once with N and the options as variables
    (given their 20-bit values): at each N every transfer field equals the
    code compiled from the terms with N and the options substituted."""
    program = PROGRAMS["nccl-pat"]["allgather"](aggregation=4, post=1, chunk=1, count=1)
    assert program.sort == BITVEC
    terms, v = program.terms(), program.terms().variables
    for n in (5, 9, 12):
        at = terms.at(n)
        values = [(v["N"], z3.BitVecVal(n, W))] + [(v[k], z3.BitVecVal(val, W)) for k, val in program.params.items()]
        substituted = compile_terms([z3.substitute(t, *values) for t in terms.transfer], {k: v[k] for k in ("s", "r", "j")})
        s, r, j = np.meshgrid(np.arange(at.steps), np.arange(n), np.arange(at.width), indexing="ij")
        mine, _ = at.evaluate(s=s, r=r, j=j)
        theirs, _ = substituted.evaluate(s=s, r=r, j=j)
        for a, b in zip(mine, theirs):
            assert (np.broadcast_to(a, s.shape) == np.broadcast_to(b, s.shape)).all(), n


@pytest.mark.parametrize("algorithm, collective", PAIRS, ids=[f"{a}-{c}" for a, c in PAIRS])
def test_a_proof_reads_the_terms_the_schedule_runs(algorithm, collective):
    """symbolic(program) is a view of program.terms(): at the variables
    themselves its transfer and shape are those very Z3 terms (not a second
    evaluation of the Python functions), and at other arguments they are the
    kept terms with the arguments substituted."""
    program = PROGRAMS[algorithm][collective](**OPTIONS.get((algorithm, collective), {}))
    sym, v = symbolic(program)
    terms = program.terms()
    t = sym.transfer(v["N"], v["s"], v["r"], v["j"])
    assert all(a.eq(b) for a, b in zip((t.active, t.dst, t.src_chunk, t.dst_chunk, t.op), terms.transfer))
    assert all(f(v["N"]).eq(b) for f, b in zip((sym.steps, sym.width, sym.chunks), terms.shape))
    r2 = v["r"] + 1
    moved = sym.transfer(v["N"], v["s"], r2, v["j"]).dst
    assert moved.eq(z3.substitute(terms.transfer[1], (v["r"], r2)))
