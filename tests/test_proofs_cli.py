"""`collspec prove`: rows, --list, --only, --json, exit codes, and the
verify part."""

from __future__ import annotations

import json
import subprocess
import sys

import z3

from collspec.cli import main
from collspec.commands import verify
from collspec.models import indexing as ix
from collspec.proofs import suite as proofs
from collspec.proofs.solver import Query, decide


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collspec", "prove", *args], capture_output=True, text=True, timeout=300)


def test_list_shows_every_proof_with_its_scope():
    result = run("--list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(proofs.suite())
    assert any(line.split()[:2] == ["ring.contributors", "all"] for line in lines)
    assert any(line.split()[:2] == ["lower-bound.ring", "2<=N<=6"] for line in lines)


def test_only_runs_the_matching_proofs_and_prints_one_row_each(tmp_path):
    report = tmp_path / "p.json"
    result = run("--only", "traffic", "--json", str(report))
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[1:-1]]
    assert [row[0] for row in rows] == ["ring.traffic", "ring-seed.traffic"]
    assert all(row[1:3] == ["all", "N>=2"] or row[1:3] == ["all", "N>=2,"] for row in rows)  # ring-seed's adds its declared ownership
    assert all(row[-2] == "proved" and float(row[-1]) >= 0 for row in rows)
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["command"] == "prove" and data["violations"] == []
    assert [p["name"] for p in data["stats"]["proofs"]] == ["ring.traffic", "ring-seed.traffic"]
    assert all(p["result"] == "proved" and p["scope"].startswith("all N>=2") and p["queries"] for p in data["stats"]["proofs"])


def test_unknown_name_is_exit_2_with_one_line():
    result = run("--only", "no-such-proof")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "collspec prove --list" in result.stderr


def test_a_failing_proof_is_exit_1_with_its_counterexample(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(ix, "rs_send", lambda owner, r, s, n: (owner(r, n) + n - s) % n)
    report = tmp_path / "p.json"
    assert main(["prove", "--only", "ring.forwarding", "--json", str(report)]) == 1
    out = capsys.readouterr().out
    assert "ring.forwarding" in out and "FAILED" in out and "counterexample: N=" in out
    (violation,) = json.loads(report.read_text())["violations"]
    assert violation["kind"] == "postcondition" and violation["proof"] == "ring.forwarding"
    assert violation["result"] == "FAILED" and "N" in violation["counterexample"] and "r" in violation["counterexample"]


def test_unknown_is_a_failure_not_a_pass(monkeypatch, tmp_path):
    x, y, z = z3.Ints("x y z")
    hard = proofs.Proof(
        "hard.fermat-3", proofs.ALL_N, "no cubes add up", lambda: decide(Query("x^3 + y^3 != z^3", [x > 0, y > 0, z > 0], x * x * x + y * y * y != z * z * z), 2000)
    )
    monkeypatch.setattr(proofs, "suite", lambda full=False: [hard])
    report = tmp_path / "p.json"
    assert main(["prove", "--json", str(report)]) == 1
    data = json.loads(report.read_text())
    assert data["ok"] is False and data["stats"]["proofs"][0]["result"] == "unknown"


def test_verify_runs_the_proof_suite(monkeypatch):
    assert dict(verify.PARTS)["prove"] is verify._prove
    every = proofs.suite()
    monkeypatch.setattr(proofs, "suite", lambda full=False: proofs.select(every, "same-index"))
    ok, detail = verify._prove()
    assert ok and detail == "2/2 proved (2 for all N, 0 bounded; 0 true by definition, not counted)"
    # rows true by definition are named apart and left out of the count
    monkeypatch.setattr(proofs, "suite", lambda full=False: proofs.select(every, "same-index") + proofs.select(every, "two-ranks-agree"))
    ok, detail = verify._prove()
    assert ok and detail == "2/2 proved (2 for all N, 0 bounded; 2 true by definition, not counted)"
