"""Helpers for the conformance tests that start rank processes."""

from __future__ import annotations

from pathlib import Path

from collspec.conformance.procs import tagged

ZOO = Path(__file__).resolve().parent / "zoo_backends"


def leftover_processes() -> list[str]:
    """Command lines of live processes started by any conformance run (tagged COLLSPEC_RUN_ID)."""
    found = []
    for pid in tagged(None):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                found.append(f"{pid}: " + handle.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # it ended meanwhile
    return found


def by_kind(conformance) -> dict[str, list]:
    """The run's violations grouped by kind."""
    out: dict[str, list] = {}
    for violation in conformance.violations:
        out.setdefault(violation.kind, []).append(violation)
    return out
