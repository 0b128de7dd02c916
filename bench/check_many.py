"""Benchmark: `collspec check` over the bundled MSCCL corpus
(models/msccl/data/*.xml, one command for all files) with --jobs 1 and
--jobs 2. Each figure is the median of 5 runs of the whole command (Python
start included), the two settings alternating; CPU is user + system time of
the command and its worker processes. Prints the medians and the ratio
wall(--jobs 2) / wall(--jobs 1) with the machine line; exits 0 (a report,
no target: the ratio depends on the cores free at the time).

    .venv/bin/python bench/check_many.py
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _measure import command_run, machine_line  # noqa: E402

from collspec.models.msccl.corpus import files  # noqa: E402

RUNS = 5


def main() -> int:
    collspec = os.path.join(os.path.dirname(sys.executable), "collspec")
    paths = [str(p) for p in files()]
    runs: dict[int, list[dict]] = {1: [], 2: []}
    for _ in range(RUNS):
        for jobs in runs:
            runs[jobs].append(command_run([collspec, "check", *paths, "--jobs", str(jobs)]))
    size = sum(os.path.getsize(p) for p in paths) / 1e6
    print(f"collspec check, {len(paths)} MSCCL corpus files ({size:.1f} MB), median of {RUNS} runs:")
    medians = {}
    for jobs, results in runs.items():
        medians[jobs] = {key: statistics.median(r[key] for r in results) for key in ("wall", "cpu", "rss_mib")}
        m = medians[jobs]
        print(f"  --jobs {jobs}: wall {m['wall']:.2f} s, CPU {m['cpu']:.2f} s, peak RSS {m['rss_mib']:.0f} MiB (largest process)")
    print(f"  wall ratio --jobs 2 / --jobs 1: {medians[2]['wall'] / medians[1]['wall']:.2f}")
    print(machine_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
