"""Helpers for the conformance tests that start rank processes."""

from __future__ import annotations

import os
from pathlib import Path

ZOO = Path(__file__).resolve().parent / "zoo_backends"


def leftover_processes() -> list[str]:
    """Command lines of live processes started by any conformance run (tagged COLLSPEC_RUN_ID)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if b"COLLSPEC_RUN_ID=" not in handle.read():
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry}: {command}")
        except OSError:
            continue
    return found


def by_kind(conformance) -> dict[str, list]:
    """The run's violations grouped by kind."""
    out: dict[str, list] = {}
    for violation in conformance.violations:
        out.setdefault(violation.kind, []).append(violation)
    return out
