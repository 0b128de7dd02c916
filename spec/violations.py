"""Violations: what a check found wrong, in the report format of contracts.md.

Every checker in collspec (the schedule checker, the MSCCL verifier, the
proofs, conformance) returns :class:`Violation` values. ``kind`` is one of
:data:`KINDS`, each explained in :data:`DESCRIPTIONS`; a ``warning`` never makes a report fail.

>>> v = Violation("wrong-column", "rank 2 added rank 1's chunk 0 into its chunk 1", step=2, src=1, dst=2)
>>> v.to_json()["kind"], v.is_error
('wrong-column', True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: every kind a report may name, with what it means (the help text of
#: reports that explain their rules, such as SARIF's)
DESCRIPTIONS = {
    "wrong-column": "A reduce combined values of different chunks: a chunk may only ever be added into its own column.",
    "link-repeat": "The same chunk crossed the same directed link twice within one phase.",
    "link-overload": "A directed link carried more chunks in one step than its capacity.",
    "missing-contribution": "An output cell lacks a rank's contribution that the collective's definition puts there.",
    "duplicate-contribution": "An output cell counts a rank's contribution more than once.",
    "postcondition": "An output is not what the collective's definition requires (wrong place, uninitialised data, a proof that did not hold).",
    "unmatched": "A send without its receive, or a receive, signal or wait without its partner.",
    "deadlock": "Some steps can never run: a cycle of waits, or a message that finds no buffer slot.",
    "race": "Two unordered operations touch the same cell and at least one writes it, so the result depends on timing.",
    "malformed": "The input cannot be checked as given: bad syntax, a missing or out-of-range field, or a value the executors refuse.",
    "not-bandwidth-optimal": "The busiest rank moves more data than the collective's lower bound requires (a warning).",
    "wrong-value": "A backend returned a value other than the one the specification computes.",
    "ranks-disagree": "Ranks that must hold the same result compute it in different orders or got different bits.",
    "hang": "A backend did not finish within the time limit.",
    "crash": "A backend raised an error or a rank process died.",
    "unsupported": "A backend does not implement the collective, operation or data type.",
    "operand-order": "A non-commutative reduction combined the ranks' operands out of rank order.",
    "not-reproducible": "The same inputs gave different bits on another call (a warning).",
    "lint": "Format drift between executors or an executor limit: the file checks, but a tool or executor may read it differently (a warning).",
}

KINDS = tuple(DESCRIPTIONS)


@dataclass(frozen=True)
class Violation:
    """One thing wrong. ``details`` holds kind-specific keys (rank, chunk, origin, ...)."""

    kind: str
    message: str
    step: int | None = None
    src: int | None = None
    dst: int | None = None
    severity: str = "error"
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown violation kind {self.kind!r}")
        if self.severity not in ("error", "warning"):
            raise ValueError(f"unknown severity {self.severity!r}")

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "severity": self.severity}
        for key in ("step", "src", "dst"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.details)
        out["message"] = self.message
        return out

    def __str__(self) -> str:
        where = f" (step {self.step})" if self.step is not None else ""
        return f"{self.severity} {self.kind}{where}: {self.message}"
