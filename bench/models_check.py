"""Benchmark: `collspec check --algorithm ring --collective allreduce --ranks N`.

Target (issue 3): N = 1024 (about 2.1 million transfers) in under 2 s and
under 2 GiB on 2 cores, whole command included (interpreter start, import,
generation, checking). Prints the median wall time over 5 runs and the peak
resident memory for N = 128, 256, 512, 1024, and how time grows from 128 to
1024 (transfers grow 64x: N^2).

Run: .venv/bin/python bench/models_check.py
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time

RUNS = 5
SIZES = (128, 256, 512, 1024)


def one_run(n: int) -> tuple[float, float]:
    """(seconds, peak RSS in MiB) of one command run in a fresh process."""
    command = [sys.executable, "-m", "collspec", "check", "--algorithm", "ring", "--collective", "allreduce", "--ranks", str(n)]
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: exec the command so its peak RSS is measured alone
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.execv(command[0], command)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"check failed for N={n}")
    return seconds, usage.ru_maxrss / 1024


def main() -> int:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'N':>6} {'transfers':>10} {'median s':>9} {'min s':>7} {'peak MiB':>9}")
    medians = {}
    for n in SIZES:
        runs = [one_run(n) for _ in range(RUNS)]
        times = [t for t, _ in runs]
        medians[n] = statistics.median(times)
        print(f"{n:>6} {2 * (n - 1) * n:>10} {medians[n]:>9.2f} {min(times):>7.2f} {max(m for _, m in runs):>9.0f}")
    print(f"time N=1024 / N=128: {medians[1024] / medians[128]:.1f}x for 64x the transfers")
    met = medians[1024] < 2.0
    print(f"N=1024 median {medians[1024]:.2f} s: {'meets' if met else 'MISSES'} the 2 s target")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
