"""Helpers for the conformance tests that start rank processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from collspec.conformance.procs import tagged

ZOO = Path(__file__).resolve().parent / "zoo_backends"


def leftover_processes() -> list[str]:
    """Command lines of live processes started by any conformance run (tagged COLLSPEC_RUN_ID)
    of this interpreter (runs of other checkouts on the same machine are theirs)."""
    found = []
    mine = os.path.dirname(sys.executable) + os.sep
    for pid in tagged(None):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue  # it ended meanwhile
        if argv[0].decode(errors="replace").startswith(mine):
            found.append(f"{pid}: " + b" ".join(argv).decode(errors="replace"))
    return found


def by_kind(conformance) -> dict[str, list]:
    """The run's violations grouped by kind."""
    out: dict[str, list] = {}
    for violation in conformance.violations:
        out.setdefault(violation.kind, []).append(violation)
    return out
