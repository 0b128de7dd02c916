"""Known disagreements between a built-in backend and the spec.

A real backend that disagrees with the spec is a finding, not a failure to
hide. Each entry below was seen by running ``collspec conform`` and is
documented in ``docs/conformance.md``; a violation that matches one is kept
in the report, visible, with ``"known"`` saying why, but with severity
``warning`` so that the backend's other checks still decide the exit status.
``--strict`` turns them back into errors. A table entry that no longer
reproduces is caught by the test suite, which runs these backends.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..spec import Violation


@dataclass(frozen=True)
class Finding:
    """Violations of ``kind`` by ``backend`` on ``collective``, in ``region`` (None: any)."""

    backend: str
    collective: str
    kind: str
    region: str | None
    note: str

    def matches(self, backend: str, violation: Violation) -> bool:
        return (
            backend == self.backend
            and violation.kind == self.kind
            and violation.details.get("collective") == self.collective
            and (self.region is None or violation.details.get("region") == self.region)
        )


KNOWN: tuple[Finding, ...] = (
    Finding(
        "gloo", "reduce", "postcondition", "non-root",
        "gloo's reduce leaves partial results in the non-root ranks' buffers; torch.distributed documents "
        "the result only on the destination rank, while the spec requires every other rank's buffer untouched",
    ),
    Finding(
        "direct", "allreduce", "ranks-disagree", None,
        "direct exchange: every rank adds the others' vectors into its own, each starting from itself, so "
        "floating-point sums differ in order and bits differ across ranks (within the error bound); "
        "'collspec check -a direct -c allreduce' predicts it as a ranks-disagree warning",
    ),
)


def mark(backend: str, violations: list[Violation], strict: bool = False) -> list[Violation]:
    """The violations with known findings marked (and, unless ``strict``, made warnings)."""
    out = []
    for violation in violations:
        finding = next((f for f in KNOWN if f.matches(backend, violation)), None)
        if finding is not None:
            details = {**violation.details, "known": finding.note}
            violation = replace(violation, details=details, severity=violation.severity if strict else "warning")
        out.append(violation)
    return out
