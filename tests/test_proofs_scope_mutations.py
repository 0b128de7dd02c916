"""Holes a developer could open without a word, planted: a premise that
narrows N, an ownership changed in the generator and its invariant alike,
and a resource limit that runs out. Each must now show: a failing row or a
scope that says it, a failing row, and "unknown (resource limit reached)"
with exit 1 and what to do."""

from __future__ import annotations

import json
from dataclasses import replace

import z3

from collspec.cli import main
from collspec.models.generators import ring as ring_gen
from collspec.proofs import floating, induction, invariants, ring
from collspec.proofs.solver import FAILED, PROVED, UNKNOWN
from collspec.proofs.suite import run_proof, suite

# imported where used, so that each test fails on its own against code without them
NARROWS, RESOURCE_LIMIT = "a premise narrows the scope", "resource limit reached"


def row(name, full=False):
    (proof,) = [p for p in suite(full) if p.name == name]
    return run_proof(proof)


# -- 3. a scope says exactly what was proved ------------------------------------------------------


def test_a_premise_n_at_most_16_written_into_a_query_fails_the_row(monkeypatch):
    """``N <= 16`` added to the ring proofs' shared premises: the row fails,
    naming the premise and the scope it narrows, instead of staying
    "all N>=2"."""
    original = ring._ranks
    monkeypatch.setattr(ring, "_ranks", lambda *vs: original(*vs) + [ring.N <= 16])
    result = row("ring.contributors")
    assert result.status == FAILED and result.reason == NARROWS
    assert "N <= 16" in result.message and "all N>=2" in result.message
    assert "scope" in result.advice


def test_a_premise_n_at_most_16_in_an_invariant_shows_in_the_scope(monkeypatch):
    """The same premise stated as an invariant's premise: the row still
    proves, and its scope (table, --list, JSON) says "N in 2..16"."""
    from collspec.proofs import scope

    original = invariants.INVARIANTS[("ring", "allgather")]
    monkeypatch.setitem(invariants.INVARIANTS, ("ring", "allgather"), lambda: replace(original(), premises=(scope.Bound("N", "<=", 16),)))
    result = row("ring.allgather-exactly-once")
    assert result.status == PROVED
    assert result.scope == "all N in 2..16"
    assert {"variable": "N", "op": "<=", "value": 16} in result.premises


def test_a_narrowed_root_fails_the_row(monkeypatch):
    """``root = 0`` slipped into the chain invariant's premises as a raw Z3
    term (not a scope premise): the row says the scope is narrowed."""
    from collspec.proofs import scope

    original = induction.scope_of

    def narrowed(program, extra=()):
        made = original(program, extra)
        if "root" in program.params:
            return made + (scope.Condition("root is 0", ("root",), lambda root: root == 0),)
        return made

    (proof,) = [p for p in suite() if p.name == "ring.broadcast-exactly-once"]  # its scope: "all N>=2, all roots"
    monkeypatch.setattr(induction, "scope_of", narrowed)
    result = run_proof(proof)
    assert result.status == FAILED and result.reason == NARROWS and "root == 0" in result.message


def test_every_rows_scope_is_its_premises_text():
    """Over every row of the full suite: the scope shown is the text of its
    premises, a symbolic row says "all N" and bounds N from below by 2 (or
    by more, shown in its text: nccl-pat's row from 10 ranks), and a bounded
    row gives N's range."""
    from collspec.proofs import scope

    for proof in suite(full=True):
        assert proof.scope == proof.premises.text(), proof.name
        bounds = {(p.op, p.value) for p in proof.premises.premises if isinstance(p, scope.Bound) and p.variable == "N"}
        if proof.premises.symbolic:
            lows = [value for op, value in bounds if op == ">="]
            assert proof.scope.startswith("all N") and lows and min(lows) >= 2, proof.name
            assert min(lows) == 2 or proof.scope.startswith(f"all N in {min(lows)}.."), proof.name
        else:
            assert {op for op, _ in bounds} == {">=", "<="} and not proof.scope.startswith("all"), proof.name


def test_list_and_json_carry_the_scope_and_its_premises(tmp_path, capsys):
    assert main(["prove", "--list", "--only", "binary-tree.reduce"]) == 0
    assert "all N in 2..65536, all roots" in capsys.readouterr().out
    report = tmp_path / "p.json"
    assert main(["prove", "--only", "ring.traffic", "--json", str(report)]) == 0
    (first,) = json.loads(report.read_text())["stats"]["proofs"]
    assert first["scope"] == "all N>=2" and first["premises"] == [{"variable": "N", "op": ">=", "value": 2}]
    assert first["rlimit"]["most_used"] > 0 and first["rlimit"]["limit"] >= 4 * first["rlimit"]["most_used"]


# -- 4. end conditions written independently of the generators -------------------------------------


def mirrored_owner(monkeypatch):
    """ring-seed's owner changed to (r + N - 1) mod N in the generator, and
    the invariant's shift with it (+1 -> -1): all consistent, all wrong
    against the declared "rank r owns chunk r + 1"."""
    monkeypatch.setitem(ring_gen.OWNERS, "ring-seed", lambda r, n: (r + n - 1) % n)
    original = invariants.ring_allreduce
    monkeypatch.setattr(invariants, "ring_allreduce", lambda shift, phases=2: original(-1 if shift == 1 else shift, phases))


def test_the_mirrored_owner_fails_the_reduce_scatter_row(monkeypatch):
    mirrored_owner(monkeypatch)
    result = row("ring-seed.reduce_scatter-exactly-once")
    assert result.status == FAILED and result.counterexample
    assert result.queries[-1][0].startswith("end:")
    assert "rank r owns chunk r + 1" in result.scope


def test_the_mirrored_owner_fails_the_ring_seed_contributors_row(monkeypatch):
    mirrored_owner(monkeypatch)
    result = row("ring-seed.contributors")
    assert result.status == FAILED and "N" in result.counterexample


def test_invariants_import_no_generator_code():
    import ast
    from pathlib import Path

    source = Path(invariants.__file__).read_text()
    imported = [n.module or "" for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    assert not any("generators" in m for m in imported), imported


# -- 6. the same verdict on a loaded machine: resource limits, and unknown said as unknown ----------


def test_a_row_out_of_resource_units_says_unknown_exits_1_and_says_what_to_do(tmp_path, capsys):
    report = tmp_path / "p.json"
    code = main(["prove", "--only", "ring.contributors", "--rlimit-factor", "0.00001", "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 1
    assert "unknown (resource limit reached)" in out
    assert "to do:" in out and "--rlimit-factor" in out
    (violation,) = json.loads(report.read_text())["violations"]
    assert violation["reason"] == RESOURCE_LIMIT and "--rlimit-factor" in violation["advice"]


def test_ring_differs_out_of_resource_units_says_unknown_not_no_such_inputs():
    outcome = floating.ring_differs("float16", 3, rlimit=10)
    assert outcome.status == UNKNOWN and outcome.reason == RESOURCE_LIMIT
    assert "unknown (resource limit reached)" in outcome.message and "no such inputs found" in outcome.message


def test_the_resource_units_of_a_check_do_not_depend_on_what_ran_before():
    """Each check is decided in a fresh Z3 context, so its cost (and its
    verdict under a limit) is the query's alone."""
    from collspec.proofs.solver import new_solver

    x, y = z3.Ints("x y")

    def units():
        solver = new_solver(rlimit=10_000_000)
        solver.add(x * x + y * y == 25, x > 0, y > 0)
        assert solver.check() == z3.sat
        return solver.units

    first = units()
    row("ring.traffic")  # builds many terms in the main context
    assert units() == first
