"""The capability matrix: what a backend does, per collective, mode, dtype and op.

Every case's status is folded into the cell of its (collective, in-place
mode, dtype, op), over sizes, roots, input patterns and seeds:

=========== ====== ==============================================================
status      symbol meaning
=========== ====== ==============================================================
pass        ✓      every case passed
equal-only  =      every case with equal blocks passed; unequal blocks are not
                   applicable (``n/a``: the class has no ``_v`` method)
partial     ½      some cases unsupported (e.g. only for unequal blocks), the rest passed
unsupported −      the backend refused every case (never counted as a pass)
n/a         ∅      every case not applicable (never counted as a pass)
finding     !      a known disagreement with the spec (:mod:`.findings`)
fail        ✗      a check failed, a rank hung, crashed or raised
not-run     ·      not reached (after too many hangs; the reason is in the case)
=========== ====== ==============================================================

A table cell shows one symbol when every op agrees, else the most common
symbol followed by the exceptions: ``✓ avg−`` is "every op passes, avg is
unsupported".

>>> cell({"sum": "pass", "prod": "pass", "min": "pass", "max": "pass", "avg": "unsupported"})
'✓ avg−'
>>> fold({"pass", "n/a"}), fold({"n/a"}), fold({"pass", "n/a", "crash"})
('equal-only', 'n/a', 'fail')
"""

from __future__ import annotations

from collections import Counter

from ..spec import DTYPES

SYMBOLS = {"pass": "✓", "equal-only": "=", "partial": "½", "unsupported": "−", "n/a": "∅", "finding": "!", "fail": "✗",
           "not-run": "·"}
ORDER = ("fail", "finding", "partial", "unsupported", "equal-only", "pass", "n/a", "not-run")


def fold(statuses: set[str]) -> str:
    """One cell's status from the statuses of its cases."""
    if statuses & {"fail", "hang", "crash"}:
        return "fail"
    if "finding" in statuses:
        return "finding"
    if "unsupported" in statuses:
        return "partial" if "pass" in statuses else "unsupported"
    if "pass" in statuses:
        return "equal-only" if "n/a" in statuses else "pass"
    return "n/a" if "n/a" in statuses else "not-run"


def label(case) -> str:
    """A row's name: the collective, and the MPI algorithm when the case forces one."""
    return case.collective if case.algorithm is None else f"{case.collective} alg={case.algorithm}"


def capability(outcomes) -> dict:
    """``{collective: {mode: {dtype: {op: status}}}}``; op is "-" for collectives that do not reduce.

    The collective key carries the algorithm (:func:`label`): one row per algorithm.
    """
    seen: dict = {}
    for outcome in outcomes:
        case = outcome.case
        if case is None:
            continue
        mode = "in place" if case.inplace else "out of place"
        cell = seen.setdefault(label(case), {}).setdefault(mode, {}).setdefault(case.dtype, {})
        cell.setdefault(case.op or "-", set()).add(outcome.status)
    return {
        collective: {
            mode: {dtype: {op: fold(s) for op, s in ops.items()} for dtype, ops in dtypes.items()}
            for mode, dtypes in modes.items()
        }
        for collective, modes in seen.items()
    }


def cell(ops: dict[str, str]) -> str:
    """The text of one table cell (see the module text)."""
    counts = Counter(ops.values())
    common = max(counts, key=lambda status: (counts[status], -ORDER.index(status)))
    rest = [f"{op}{SYMBOLS[status]}" for op, status in ops.items() if status != common]
    return " ".join([SYMBOLS[common], *rest])


def markdown(matrix: dict) -> str:
    """The matrix as a Markdown table: one row per collective and mode, one column per dtype."""
    dtypes = [d for d in DTYPES if any(d in m for modes in matrix.values() for m in modes.values())]
    lines = ["| collective | mode | " + " | ".join(dtypes) + " |", "|---|---|" + "---|" * len(dtypes)]
    for collective, modes in matrix.items():
        for mode, row in sorted(modes.items(), reverse=True):
            cells = [cell(row[d]) if d in row else "" for d in dtypes]
            lines.append(f"| {collective} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def text(matrix: dict) -> str:
    """The matrix as aligned plain text, for the terminal."""
    dtypes = [d for d in DTYPES if any(d in m for modes in matrix.values() for m in modes.values())]
    rows = [["collective", "mode", *dtypes]]
    for collective, modes in matrix.items():
        for mode, row in sorted(modes.items(), reverse=True):
            rows.append([collective, mode, *(cell(row[d]) if d in row else "" for d in dtypes)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(value.ljust(w) for value, w in zip(row, widths)).rstrip() for row in rows)
