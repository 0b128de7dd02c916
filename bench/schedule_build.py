"""Schedule build time: ``generate`` for the 4096-rank ring all-reduce and the
8 x 512 hierarchical-ring (the two largest rows of bench/checker_scale.py),
in process, without the checker: the cost of turning a program into steps.

    .venv/bin/python bench/schedule_build.py --runs 5

Prints, per subject, the median wall and CPU (user + system) seconds of
``runs`` builds, after one warm-up build (imports, first allocation).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from collspec.models.generators import generate

SUBJECTS = {
    "ring all-reduce N=4096": lambda: generate("ring", "allreduce", 4096),
    "hierarchical-ring 8 x 512": lambda: generate("hierarchical-ring", "allreduce", 4096, group_size=512),
}


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def measure(build, runs: int) -> tuple[float, float]:
    build()
    walls, cpus = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), cpu()
        build()
        walls.append(time.perf_counter() - w)
        cpus.append(cpu() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for name, build in SUBJECTS.items():
        wall, spent = measure(build, args.runs)
        print(f"{name}: median wall {wall:.2f} s, CPU {spent:.2f} s ({args.runs} runs), load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
