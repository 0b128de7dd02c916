"""Violations: what a check found wrong, in the report format of contracts.md.

Every checker in collspec (the schedule checker, the MSCCL verifier, the
proofs, conformance) returns :class:`Violation` values. ``kind`` is one of
:data:`KINDS`, each explained in :data:`DEFINITIONS`; a ``warning`` never makes a report fail.

>>> v = Violation("wrong-column", "rank 2 added rank 1's chunk 0 into its chunk 1", step=2, src=1, dst=2)
>>> v.to_json()["kind"], v.is_error
('wrong-column', True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Every kind a report may name, with one sentence on what it means (the
#: reference's violations page shows each; SARIF reports carry it as the rule's help text).
DEFINITIONS = {
    "wrong-column": "A transfer combines a chunk into a different chunk of the receiver (chunk c added into chunk d != c), so two columns of the vector get mixed.",
    "link-repeat": "The same chunk crosses the same directed link twice within one phase, which a bandwidth-optimal schedule never needs.",
    "link-overload": "A directed link carries more chunks in one step than its capacity (1 by default).",
    "missing-contribution": "An output cell ends without some rank's input for that chunk.",
    "duplicate-contribution": "An output cell counts some rank's input for that chunk more than once.",
    "postcondition": "The result breaks the collective's definition in some other way (for example chunks ending on the wrong ranks), or a proof is not proved.",
    "unmatched": "A send has no matching receive, or a receive no matching send (MSCCL, MSCCL++).",
    "deadlock": "Some thread blocks or ranks wait for each other forever, so the program cannot finish.",
    "race": "Two transfers or thread blocks write the same cell, or one reads a cell another writes, with nothing ordering them.",
    "malformed": "The input cannot be checked as given: bad JSON or XML, a missing or out-of-range field, or a value the executors would read differently.",
    "not-bandwidth-optimal": "A rank sends or receives more than the lower bound for the collective (a warning).",
    "wrong-value": "A real backend's result differs from the spec's beyond the summation error bound.",
    "ranks-disagree": "Ranks end with different bits for the same element (an error for a real backend; for a schedule, a warning that ranks reduce in different orders).",
    "hang": "A rank did not return within the timeout.",
    "crash": "A rank raised an exception or died.",
    "unsupported": "The backend has no method for the collective, or refused an (op, dtype); never counted as a pass.",
    "operand-order": "A non-commutative reduction (the compose op) combined the ranks' operands in an order other than rank order.",
    "not-reproducible": "The same inputs gave different bits on another call (a warning, with --repeat).",
    "lint": "Format drift between executors or an executor's limit in an MSCCL or MSCCL++ file (a warning).",
}

KINDS = tuple(DEFINITIONS)


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
