"""Violations: what a check found wrong, in the report format of contracts.md.

Every checker in collspec (the schedule checker, the MSCCL verifier, the
proofs, conformance) returns :class:`Violation` values. ``kind`` is one of
:data:`KINDS`; a ``warning`` never makes a report fail.

>>> v = Violation("wrong-column", "rank 2 added rank 1's chunk 0 into its chunk 1", step=2, src=1, dst=2)
>>> v.to_json()["kind"], v.is_error
('wrong-column', True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = (
    "wrong-column",
    "link-repeat",
    "link-overload",
    "missing-contribution",
    "duplicate-contribution",
    "postcondition",
    "unmatched",
    "deadlock",
    "race",
    "malformed",
    "not-bandwidth-optimal",
    "wrong-value",
    "ranks-disagree",
    "hang",
    "crash",
    "unsupported",
    "operand-order",  # a non-commutative reduction combined the ranks' operands out of rank order
    "not-reproducible",  # the same inputs gave different bits on another call (a warning)
    "lint",  # format drift and executor limits in MSCCL files (always a warning)
)


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
