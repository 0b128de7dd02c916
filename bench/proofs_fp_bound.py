"""Benchmark: is the floating-point error bound of design.md tight?

For float16, bfloat16 and float32 and N = 2 .. 64, runs a ring all-reduce
(the interpreter over numbers) on inputs built so that every addition
rounds the same way (collspec.proofs.floating.adversarial_inputs) and
prints the worst |ring - exact| / bound and its inverse, the factor by
which the bound exceeds the worst error found. A bound that held only
because it was huge would show a large factor; the issue asks for <= 64.

Run: .venv/bin/python bench/proofs_fp_bound.py
"""

from __future__ import annotations

import os
import platform

from collspec.proofs.floating import bound_attainment

SIZES = (2, 3, 4, 8, 16, 32, 64)
DTYPES = ("float16", "bfloat16", "float32")


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores")
    print("worst error / bound (factor = bound / worst error)")
    print(f"  {'N':>4}  " + "  ".join(f"{d:>18}" for d in DTYPES))
    worst = 0.0
    for n in SIZES:
        ratios = [bound_attainment(d, n) for d in DTYPES]
        worst = max(worst, max(1 / r for r in ratios))
        print(f"  {n:>4}  " + "  ".join(f"{r:8.3f} (x{1 / r:5.2f})" for r in ratios))
    print(f"largest factor: {worst:.2f}")


if __name__ == "__main__":
    main()
