"""What a conformance run prints: progress while it runs, then a summary.

On a terminal, progress is one line rewritten in place; otherwise (CI logs)
a line every tenth of the cases. Hangs, crashes and failures are printed as
they happen in both. The summary is a table of statuses per collective and
the capability matrix (:mod:`.matrix`).
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter

from . import matrix
from .conform import STATUSES


class Progress:
    """A callback for :func:`~collspec.conformance.conform.conform` that reports as cases finish."""

    def __init__(self, stream=None):
        self.total, self.stream = 0, stream or sys.stdout
        self.tty = self.stream.isatty()
        self.counts: Counter = Counter()
        self.began = time.monotonic()
        self.seen = 0

    def start(self, total: int) -> None:
        self.total = total
        self.began = time.monotonic()

    def __call__(self, outcome) -> None:
        self.seen += outcome.case is not None
        self.counts[outcome.status] += 1
        if outcome.status in ("fail", "hang", "crash"):
            self._clear()
            for violation in outcome.violations[:2]:
                print(f"  {violation}", file=self.stream)
        line = f"  [{self.seen}/{self.total}] {self.summary()}  ({time.monotonic() - self.began:.0f} s)"
        if self.tty:
            print("\r" + line, end="", file=self.stream, flush=True)
        elif self.seen == self.total or self.seen % max(1, self.total // 10) == 0:
            print(line, file=self.stream, flush=True)

    def summary(self) -> str:
        return ", ".join(f"{self.counts[s]} {s}" for s in STATUSES if self.counts[s])

    def _clear(self) -> None:
        if self.tty:
            print("\r\033[K", end="", file=self.stream)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream)


def summary_table(outcomes) -> str:
    """Statuses per collective, and the total."""
    per: dict[str, Counter] = {}
    for outcome in outcomes:
        if outcome.case is not None:
            per.setdefault(matrix.label(outcome.case), Counter())[outcome.status] += 1
    total = sum(per.values(), Counter())
    rows = [["collective", "cases", *STATUSES]]
    for name, counts in [*per.items(), ("total", total)]:
        rows.append([name, str(sum(counts.values())), *(str(counts[s]) for s in STATUSES)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths))) for row in rows)


def print_summary(conformance, stream=None, limit: int = 20) -> None:
    """The table, the matrix, the first ``limit`` errors, the warnings grouped, and the verdict."""
    stream = stream or sys.stdout
    report = conformance.report()
    print(summary_table(conformance.outcomes), file=stream)
    print(f"\ncapability matrix ({', '.join(f'{s} {matrix.SYMBOLS[s]}' for s in matrix.ORDER)}):", file=stream)
    print(matrix.text(conformance.capability), file=stream)
    errors = [v for v in report.violations if v.is_error]
    for violation in errors[:limit]:
        print(f"  {violation}", file=stream)
    if len(errors) > limit:
        print(f"  ... and {len(errors) - limit} more errors (use --json for all of them)", file=stream)
    for (kind, collective, _), (count, note) in _grouped([v for v in report.violations if not v.is_error]).items():
        print(f"  {count} x {kind} {collective}: {note}", file=stream)
    for line in not_applicable_lines(conformance.outcomes):
        print(line, file=stream)
    verdict = "ok" if report.ok else "FAILED"
    print(f"conform {conformance.backend.text}: {verdict} ({len(errors)} errors; {conformance.summary()})", file=stream)


def _grouped(warnings) -> dict[tuple, list]:
    """Warnings by kind, collective and reason (numbers ignored): {key: [count, first reason]}."""
    groups: dict[tuple, list] = {}
    for v in warnings:
        note = v.details.get("known") or v.details.get("reason") or v.message
        key = (v.kind, v.details.get("collective", ""), re.sub(r"\d+", "#", note))
        groups.setdefault(key, [0, note])[0] += 1
    return groups


def not_applicable_lines(outcomes) -> list[str]:
    """One line per collective and reason for the ``n/a`` cases, naming every
    count the line covers (not only the first case's)."""
    groups: dict[tuple, list] = {}
    for outcome in outcomes:
        if outcome.status == "n/a":
            key = (outcome.case.collective, re.sub(r"\d+", "#", outcome.note))
            group = groups.setdefault(key, [0, outcome.note, []])
            group[0] += 1
            if outcome.case.count not in group[2]:
                group[2].append(outcome.case.count)
    lines = []
    for (collective, _), (count, note, counts) in groups.items():
        if len(counts) > 1:
            listed = ", ".join(map(str, sorted(counts)))
            note = re.sub(r"^a count of \d+ does not split", f"counts {listed} do not split", note)
        lines.append(f"  {count} x n/a {collective}: {note}")
    return lines
