"""SARIF 2.1.0 (OASIS, the Static Analysis Results Interchange Format), the
format GitHub code scanning and other CI systems show as annotations on
the lines of a pull request.

One ``run`` of the tool ``collspec``. Its rules are the violation kinds of
:data:`collspec.spec.violations.DEFINITIONS` (rule id = kind, the
description as its help text). One ``result`` per violation and warning:
``level`` ``error`` or ``warning``, the violation's message, and a
location at the file and, where known, the line and column of the
offending element (:mod:`collspec.locate`: the MSCCL ``<step>``, the
MSCCL++ op, the schedule file's transfer). Columns count characters
(``columnKind``: ``unicodeCodePoints``). File locations are relative URIs
for relative paths (as code scanning wants them, from the folder the
command ran in) and ``file:`` URIs for absolute ones. A file that could
not be checked for an internal error of collspec is a
``toolExecutionNotification`` of the invocation, not a result.

Proof rows (``collspec prove`` without files) are results with a logical
location: the proof's name.
"""

from __future__ import annotations

import json
import os
import pathlib
from urllib.parse import quote

from .report import write_text

VERSION = "2.1.0"
SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _rules() -> list[dict]:
    from .spec.violations import DEFINITIONS

    return [
        {
            "id": kind,
            "name": "".join(part.capitalize() for part in kind.split("-")),
            "shortDescription": {"text": text},
            "help": {"text": text},
        }
        for kind, text in DEFINITIONS.items()
    ]


def uri(path: str) -> str:
    """The artifact URI of a path: relative, with '/' and percent-escapes,
    or a ``file:`` URI for an absolute path."""
    if os.path.isabs(path):
        return pathlib.Path(path).as_uri()
    return quote(pathlib.PurePath(path).as_posix())


def _result(violation, rules: dict[str, int], location: dict | None) -> dict:
    out = {
        "ruleId": violation.kind,
        "ruleIndex": rules[violation.kind],
        "level": "error" if violation.is_error else "warning",
        "message": {"text": violation.message},
    }
    if location is not None:
        out["locations"] = [location]
    facts = {k: v for k, v in violation.to_json().items() if k not in ("kind", "severity", "message")}
    if facts:
        out["properties"] = json.loads(json.dumps(facts, default=str))
    return out


def _physical(path: str, place: tuple[int | None, int | None] | None) -> dict:
    physical: dict = {"artifactLocation": {"uri": uri(path)}}
    line, column = place or (None, None)
    if line is not None:
        physical["region"] = {"startLine": int(line)}
        if column is not None:
            physical["region"]["startColumn"] = int(column)
    return {"physicalLocation": physical}


def document(file_results=(), proof_results=(), version: str | None = None) -> dict:
    """The SARIF log of a run: file results (collspec.commands.batch) and
    proof rows (collspec.proofs.suite), either may be empty."""
    from . import __version__
    from .spec.violations import Violation

    rules = _rules()
    index = {rule["id"]: k for k, rule in enumerate(rules)}
    results, notifications, artifacts = [], [], []
    worst = 0
    for r in file_results:
        worst = max(worst, r.status)
        artifacts.append({"location": {"uri": uri(r.path)}})
        if r.status == 3:
            notifications.append({"level": "error", "message": {"text": r.error}, "locations": [_physical(r.path, None)]})
            continue
        places = r.locations or [None] * len(r.report.violations)
        for violation, place in zip(r.report.violations, places):
            results.append(_result(violation, index, _physical(r.path, place)))
    for proof in proof_results:
        if proof.ok:
            continue
        worst = max(worst, 1)
        violation = Violation("postcondition", f"proof {proof.name} ({proof.scope}) {proof.status}: {proof.message}", details={"proof": proof.name, "scope": proof.scope, "result": proof.status})
        results.append(_result(violation, index, {"logicalLocations": [{"name": proof.name, "kind": "function"}]}))
    invocation = {"executionSuccessful": worst < 3, "exitCode": worst}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run = {
        "tool": {"driver": {"name": "collspec", "version": version or __version__, "rules": rules}},
        "invocations": [invocation],
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    if artifacts:
        run["artifacts"] = artifacts
    return {"$schema": SCHEMA, "version": VERSION, "runs": [run]}


def write(log: dict, path: str) -> None:
    """The log as JSON to ``path`` ('-': stdout), atomically."""
    write_text(json.dumps(log, indent=2) + "\n", path)
