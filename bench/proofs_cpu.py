"""Benchmark: CPU time and Z3 resource units of every `collspec prove` row.

Wall time on a shared machine depends on its load; CPU time (user + sys)
much less, and Z3's resource units ("rlimit count") not at all. This runs
the default suite (or `--full`) in this one process and prints, per row,
its CPU seconds, the most units one of its solver checks used, its limit
and the margin (limit / most used), then the process's total CPU time
(interpreter start and imports included) and the load average.

The margins are what `collspec.proofs.suite.RLIMITS` is calibrated from:
every row's limit is at least 4x what it needs.

With `--queries`, each row is followed by its queries, heaviest first: the
CPU seconds of each query (its solver checks and the building of its
terms), the most units one of its checks used and its total units. That is
where a row's time goes.

Run: .venv/bin/python bench/proofs_cpu.py [--full] [--only NAME] [--queries]
"""

from __future__ import annotations

import os
import platform
import resource
import sys
import time


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class QueryCosts:
    """Per-query CPU seconds and Z3 units, noted by wrapping the solver's
    ``decide`` and ``Solver.check`` (the proofs run unchanged)."""

    def __init__(self) -> None:
        from collspec.proofs import solver

        self.rows: list[tuple[str, float, int, int]] = []
        self._units: list[int] = []
        decide, check = solver.decide, solver.Solver.check

        def counted_check(this):
            answer = check(this)
            self._units.append(this.units)
            return answer

        def counted_decide(query, rlimit=None):
            self._units = []
            before = cpu()
            outcome = decide(query, rlimit)
            self.rows.append((query.name, cpu() - before, max(self._units, default=0), sum(self._units)))
            return outcome

        solver.Solver.check = counted_check
        solver.decide = counted_decide

    def report(self) -> None:
        for name, seconds, most, units in sorted(self.rows, key=lambda row: -row[1]):
            print(f"    {seconds:7.2f} s  {most:>13,}  {units:>13,}  {name}")
        self.rows = []


def main() -> None:
    from collspec.proofs.suite import run_proof, select, suite

    full = "--full" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average {os.getloadavg()}")
    costs = QueryCosts() if "--queries" in sys.argv else None
    rows = select(suite(full=full), only)
    width = max(len(p.name) for p in rows)
    print(f"{'proof':<{width}}  {'result':<8}  {'CPU s':>6}  {'most used':>13}  {'limit':>13}  margin")
    total, started, tight = 0.0, time.perf_counter(), []
    for proof in rows:
        before = cpu()
        result = run_proof(proof)
        spent = cpu() - before
        total += spent
        used, limit = getattr(result, "most_used", 0), getattr(result, "rlimit", 0)
        margin = f"{limit / used:6.1f}x" if used else "     -"
        if used and limit / used < 4:
            tight.append(proof.name)
        print(f"{proof.name:<{width}}  {result.status:<8}  {spent:6.2f}  {used:>13,}  {limit:>13,}  {margin}", flush=True)
        if costs is not None:
            print(f"    {'CPU s':>9}  {'most used':>13}  {'units':>13}  query")
            costs.report()
    print(f"rows: {total:.1f} s CPU; process: {cpu():.1f} s CPU (imports included), {time.perf_counter() - started:.1f} s wall; "
          f"load average {os.getloadavg()}")
    if tight:
        print(f"margin below 4x: {', '.join(tight)}")


if __name__ == "__main__":
    main()
