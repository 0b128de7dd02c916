"""Each default proof runs once per test session.

tests/test_proofs_suite.py asserts that every proof holds; the site that
tests/site_support.py builds shows the same results, written as the report
``collspec prove --json`` writes (:func:`collspec.commands.prove.proofs_report`),
instead of running the whole suite a second time (the proofs are the slowest
part of building the site). ``make docs`` still runs ``collspec prove``.
"""

from __future__ import annotations

import json
from pathlib import Path

from collspec.commands.prove import proofs_report
from collspec.proofs.suite import ProofResult, run_proof, suite

_RESULTS: dict[str, ProofResult] = {}


def result_of(proof) -> ProofResult:
    """``run_proof(proof)``, run at most once per session (keyed by name).
    Call it only where nothing is monkeypatched."""
    if proof.name not in _RESULTS:
        _RESULTS[proof.name] = run_proof(proof)
    return _RESULTS[proof.name]


def write_prove_report(path: Path) -> None:
    """The default suite's report, as ``collspec prove --json PATH`` writes it."""
    results = [result_of(proof) for proof in suite()]
    report = proofs_report("collspec proofs", results, sum(r.seconds for r in results))
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n")


def deciding_only(monkeypatch, wanted) -> list[str]:
    """Make the proof rows run in this test decide only the queries whose
    name ``wanted(name)`` accepts; every other query of a row is reported
    ``trivial`` with the message "not decided by this test" (so the row goes
    on past it) and its name is added to the returned list.

    For planted-bug tests: the row is built exactly as ``collspec prove``
    builds it, and the query where the bug shows is decided by Z3 as the
    row decides it; the queries before it, which the unchanged program
    passes, are not decided again (``collspec prove --full`` decides them).
    A test that uses it asserts which query failed and that it was among
    those decided."""
    from collspec.proofs import solver

    original = solver.decide
    passed_over: list[str] = []

    def decide(query, rlimit=None):
        if wanted(query.name):
            return original(query, rlimit)
        passed_over.append(query.name)
        return solver.Outcome(solver.TRIVIAL, "not decided by this test", queries=[(query.name, solver.TRIVIAL, 0.0)])

    monkeypatch.setattr(solver, "decide", decide)
    return passed_over
