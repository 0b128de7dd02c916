"""proofs.solver's term walkers: replace_subterms and subterms."""

from __future__ import annotations

import z3

from collspec.proofs.solver import replace_subterms, subterms


def test_replace_subterms_replaces_each_match_once_and_leaves_the_rest():
    a, b, k = z3.Ints("a b k")
    f = z3.Function("f", z3.IntSort(), z3.IntSort(), z3.IntSort())
    shared = a * k
    term = shared + shared * 2 + b

    def rule(t):
        return f(t.arg(0), k) if t.decl().kind() == z3.Z3_OP_MUL and t.num_args() == 2 and t.arg(1).eq(k) else None

    got = replace_subterms(term, rule)
    assert got.eq(f(a, k) + f(a, k) * 2 + b)
    assert replace_subterms(b + 1, rule).eq(b + 1)


def test_a_rule_that_rewrites_inside_its_match_sees_nested_matches():
    a, k = z3.Ints("a k")
    f = z3.Function("f", z3.IntSort(), z3.IntSort(), z3.IntSort())

    def rule(t):
        return f(rewrite(t.arg(0)), k) if t.decl().kind() == z3.Z3_OP_MUL and t.arg(1).eq(k) else None

    def rewrite(term):
        return replace_subterms(term, rule)

    assert rewrite((a * k) * k).eq(f(f(a, k), k))


def test_subterms_lists_each_wanted_application_once():
    a, b = z3.Ints("a b")
    f = z3.Function("f", z3.IntSort(), z3.IntSort())
    found = subterms([f(a) + f(a), f(b) > 0], lambda t: t.decl().eq(f))
    assert sorted(str(t) for t in found) == ["f(a)", "f(b)"]
