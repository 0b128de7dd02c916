"""Benchmark: the checker at 1024 to 4096 ranks, whole command included.

Targets (issue 15), on this 2-core machine:

- ``collspec check -a ring -c allreduce -n 4096`` (33.5 million transfers)
  in under 15 s and under 3 GiB peak resident memory;
- an 8 x 512 ``hierarchical-ring`` all-reduce
  (``-a hierarchical-ring -n 4096 --option group_size=512``) in under 15 s;
- time per transfer flat or falling from 1024 to 4096 ranks (the 4096-rank
  figure at most the 1024-rank one).

Each figure is the median of RUNS fresh processes (interpreter start,
import, generation, checking); the CPU time (user + system) is printed
beside the wall time because the machine is shared with other work.

    .venv/bin/python bench/checker_scale.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _measure import command_run, machine_line  # noqa: E402

RUNS = 3
RING_SIZES = (1024, 2048, 4096)
TARGET_SECONDS = 15.0
TARGET_GIB = 3.0


def _check(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "collspec", "check", *arguments]


def ring_command(n: int) -> list[str]:
    return _check("--algorithm", "ring", "--collective", "allreduce", "--ranks", str(n))


def hierarchical_command(groups: int = 8, size: int = 512) -> list[str]:
    return _check("--algorithm", "hierarchical-ring", "--collective", "allreduce", "--ranks", str(groups * size), "--option", f"group_size={size}")


def ring_transfers(n: int) -> int:
    return 2 * (n - 1) * n


def hierarchical_transfers(groups: int, size: int) -> int:
    """2(L-1) intra hops moving G chunks per rank, 2(G-1) inter hops moving one."""
    n = groups * size
    return 2 * (size - 1) * n * groups + 2 * (groups - 1) * n


def median_run(command: list[str], runs: int) -> dict:
    results = [command_run(command, expect_exit=0) for _ in range(runs)]
    return {
        "wall": statistics.median(r["wall"] for r in results),
        "cpu": statistics.median(r["cpu"] for r in results),
        "rss_mib": max(r["rss_mib"] for r in results),
    }


# -- one function per figure, for bench/run_all.py ----------------------------------


def ring_4096_seconds(runs: int = 1) -> float:
    return median_run(ring_command(4096), runs)["wall"]


def ring_4096_peak_gib(runs: int = 1) -> float:
    return median_run(ring_command(4096), runs)["rss_mib"] / 1024


def hierarchical_8x512_seconds(runs: int = 1) -> float:
    return median_run(hierarchical_command(8, 512), runs)["wall"]


def per_transfer_ratio_4096_to_1024(runs: int = 1) -> float:
    """Wall time per transfer at 4096 ranks over that at 1024 (at most 1: flat or falling)."""
    small = median_run(ring_command(1024), runs)["wall"] / ring_transfers(1024)
    large = median_run(ring_command(4096), runs)["wall"] / ring_transfers(4096)
    return large / small


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    print(machine_line())
    print(f"{'subject':<34} {'transfers':>10} {'wall s':>7} {'cpu s':>7} {'peak MiB':>9} {'ns/transfer':>12}")
    rows = {}
    for n in RING_SIZES:
        rows[n] = figures = median_run(ring_command(n), args.runs)
        per = figures["wall"] / ring_transfers(n) * 1e9
        print(f"{f'ring allreduce N={n}':<34} {ring_transfers(n):>10} {figures['wall']:>7.2f} {figures['cpu']:>7.2f} {figures['rss_mib']:>9.0f} {per:>12.0f}")
    hier = median_run(hierarchical_command(8, 512), args.runs)
    transfers = hierarchical_transfers(8, 512)
    print(f"{'hierarchical-ring 8 x 512':<34} {transfers:>10} {hier['wall']:>7.2f} {hier['cpu']:>7.2f} {hier['rss_mib']:>9.0f} {hier['wall'] / transfers * 1e9:>12.0f}")

    per_small = rows[1024]["wall"] / ring_transfers(1024)
    per_large = rows[4096]["wall"] / ring_transfers(4096)
    checks = [
        (f"ring N=4096 {rows[4096]['wall']:.2f} s < {TARGET_SECONDS:.0f} s", rows[4096]["wall"] < TARGET_SECONDS),
        (f"ring N=4096 peak {rows[4096]['rss_mib'] / 1024:.2f} GiB < {TARGET_GIB:.0f} GiB", rows[4096]["rss_mib"] / 1024 < TARGET_GIB),
        (f"hierarchical-ring 8 x 512 {hier['wall']:.2f} s < {TARGET_SECONDS:.0f} s", hier["wall"] < TARGET_SECONDS),
        (f"time per transfer N=4096 / N=1024 = {per_large / per_small:.2f} <= 1 (flat or falling)", per_large <= per_small),
    ]
    for text, met in checks:
        print(f"{'meets' if met else 'MISSES'}: {text}")
    return 0 if all(met for _, met in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
