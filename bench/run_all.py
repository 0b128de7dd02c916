"""Every benchmark figure against its target (``make bench``); exit 1 on a miss.

:data:`FIGURES` is a table of (name, measure function, target) rows, one
per figure an issue asks for: a row measures one number (in the target's
unit) and the runner prints it beside its target. Then every other
``bench/*.py`` script (those without rows here; files starting with ``_``
are helpers) runs as before, standalone, its exit status saying whether it
met its own targets.

    .venv/bin/python bench/run_all.py [--only SUBSTRING] [--no-scripts]
"""

from __future__ import annotations

import argparse
import glob
import operator
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checker_scale  # noqa: E402
import msccl_ring128  # noqa: E402


@dataclass(frozen=True)
class Target:
    """``value OP limit`` in ``unit``."""

    op: str  # "<", "<=", ">", ">="
    limit: float
    unit: str

    def met(self, value: float) -> bool:
        return {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}[self.op](value, self.limit)


#: (name, measure function, target): issue 15's figures
FIGURES: list[tuple[str, Callable[[], float], Target]] = [
    ("check ring allreduce N=4096: seconds", checker_scale.ring_4096_seconds, Target("<", 15.0, "s")),
    ("check ring allreduce N=4096: peak memory", checker_scale.ring_4096_peak_gib, Target("<", 3.0, "GiB")),
    ("check hierarchical-ring 8 x 512: seconds", checker_scale.hierarchical_8x512_seconds, Target("<", 15.0, "s")),
    ("check ring: time per transfer N=4096 / N=1024", checker_scale.per_transfer_ratio_4096_to_1024, Target("<=", 1.0, "x")),
    ("check MSCCL a100 ring, 128 ranks, end to end", lambda: msccl_ring128.measure_ring128()["wall"], Target("<", 0.5, "s")),
]

#: scripts whose figures are rows above (not run again as scripts)
IN_TABLE = {"checker_scale.py", "msccl_ring128.py"}


def run_figures(only: str | None) -> list[str]:
    missed = []
    for name, measure, target in FIGURES:
        if only and only not in name:
            continue
        began = time.monotonic()
        value = measure()
        met = target.met(value)
        print(f"{'ok    ' if met else 'MISSED'} {name}: {value:.3f} {target.unit} (target {target.op} {target.limit:g} {target.unit}; {time.monotonic() - began:.0f} s)", flush=True)
        if not met:
            missed.append(name)
    return missed


def run_scripts(only: str | None) -> list[str]:
    scripts = sorted(p for p in glob.glob(os.path.join(HERE, "*.py")) if not os.path.basename(p).startswith("_") and os.path.basename(p) not in IN_TABLE | {"run_all.py"})
    failed = []
    for script in scripts:
        name = os.path.basename(script)
        if only and only not in name:
            continue
        print(f"== {name}", flush=True)
        began = time.monotonic()
        code = subprocess.run([sys.executable, script]).returncode
        print(f"== {name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {time.monotonic() - began:.0f} s", flush=True)
        if code:
            failed.append(name)
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only figures and scripts whose name contains this")
    parser.add_argument("--no-scripts", action="store_true", help="only the table of figures")
    args = parser.parse_args()
    print(msccl_ring128.machine_line())
    missed = run_figures(args.only)
    failed = [] if args.no_scripts else run_scripts(args.only)
    print(f"bench: {len(missed)} figure(s) missed their targets, {len(failed)} script(s) failed")
    return 1 if missed or failed else 0


if __name__ == "__main__":
    sys.exit(main())
