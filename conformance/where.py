"""Naming ranks with their hosts, so that a bad node stands out.

A job's *rank table* maps every rank to ``{"rank", "host", "local_rank"}``
(:mod:`.external` collects it at set-up). :func:`annotate` gives a violation
``details["where"]`` (one entry per rank it names) and ends its message with
the hosts; :func:`by_host` groups the failures of a run per host.

>>> table = {r: {"rank": r, "host": "ab"[r // 2], "local_rank": r % 2} for r in range(4)}
>>> name([3, 2, 0], table)
'rank 0 on a (local 0); ranks 2-3 on b (local 0-1)'
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from ..spec import Violation


def _spans(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    out, numbers = [], sorted(set(numbers))
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def name(ranks, table: dict) -> str:
    """The ranks grouped by host: ``"ranks 2-3 on b (local 0-1)"``; unknown ranks as ``on ?``."""
    per: dict[str, list[int]] = defaultdict(list)
    for rank in ranks:
        per[table.get(rank, {}).get("host", "?")].append(rank)
    parts = []
    for host, group in sorted(per.items(), key=lambda item: min(item[1])):
        noun = "rank" if len(group) == 1 else "ranks"
        locals_ = [table[r]["local_rank"] for r in group if r in table]
        local = f" (local {_spans(locals_)})" if locals_ else ""
        parts.append(f"{noun} {_spans(group)} on {host}{local}")
    return "; ".join(parts)


def annotate(violation: Violation, table: dict) -> Violation:
    """``violation`` with ``details["where"]`` and its hosts at the end of the message (once)."""
    ranks = [r for r in violation.details.get("ranks", []) if isinstance(r, int) and r >= 0]  # the culprits, not the waiting
    if not ranks or "where" in violation.details:
        return violation
    where = [table.get(r, {"rank": r, "host": "?", "local_rank": None}) for r in sorted(ranks)]
    return replace(violation, message=f"{violation.message} [{name(sorted(ranks), table)}]",
                   details={**violation.details, "where": where})


def by_host(violations, table: dict) -> list[str]:
    """One line per (host, kind) among the error violations: ``"ranks 2-3 on b (local 0-1): missing-contribution (4 cases)"``."""
    groups: dict[tuple[str, str], tuple[set, set]] = {}
    for v in violations:
        if not v.is_error:
            continue
        for entry in v.details.get("where", []):
            ranks, cases = groups.setdefault((entry.get("host", "?"), v.kind), (set(), set()))
            ranks.add(entry["rank"])
            cases.add(v.details.get("case", v.message))
    lines = []
    for (host, kind), (ranks, cases) in sorted(groups.items(), key=lambda item: (min(item[1][0]), item[0][1])):
        count = len(cases)
        lines.append(f"{name(sorted(ranks), table)}: {kind} ({count} case{'s' if count != 1 else ''})")
    return lines
