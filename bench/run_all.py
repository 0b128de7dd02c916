"""Every benchmark figure against its target (``make bench``); exit 1 on any miss.

:data:`ROWS` is a table of (name, measure, target): ``measure()`` returns
one number, ``target`` says which numbers pass. Figures that come out of
one run (the shm table, say) share it: their measure functions read a
cached run. Scripts that report only an exit status are rows whose figure
is that status, target ``== 0``. Adding a benchmark is adding rows.

    python bench/run_all.py               # every row
    python bench/run_all.py --only shm    # the rows whose name contains 'shm'
"""

from __future__ import annotations

import argparse
import functools
import operator
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checker_scale  # noqa: E402  - sibling scripts
import msccl_ring128  # noqa: E402
import shm_vs_mpi  # noqa: E402


@dataclass(frozen=True)
class Target:
    """``figure <relation> bound``, e.g. Target("<=", 1.5)."""

    relation: str
    bound: float

    def met(self, figure: float) -> bool:
        return {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt}[self.relation](figure, self.bound)

    def __str__(self) -> str:
        return f"{self.relation} {self.bound:g}"


@dataclass(frozen=True)
class Row:
    name: str
    measure: Callable[[], float]
    target: Target


# -- measure functions ----------------------------------------------------------------------


def script_status(script: str, *args: str) -> Callable[[], float]:
    """The exit status of ``bench/<script>`` (its own output goes through)."""

    def measure() -> float:
        return float(subprocess.run([sys.executable, os.path.join(HERE, script), *args]).returncode)

    return measure


@functools.cache
def _shm_run(ranks: int, pin: bool) -> dict:
    """One shm-vs-Open-MPI run at every size, its table printed; {bytes: row}."""
    found, _ = shm_vs_mpi.run(ranks, pin, shm_vs_mpi.SIZES, shm_vs_mpi.REPS)
    print(f"shm vs Open MPI, {ranks} ranks, {'one core per rank' if pin else 'unbound on ' + str(os.cpu_count()) + ' cores'}:")
    print(shm_vs_mpi.table(found), flush=True)
    return {r["bytes"]: r for r in found}


def shm_time_ratio(size: int, ranks: int, pin: bool) -> Callable[[], float]:
    """shm time / Open MPI time at ``size`` bytes (median of paired repetitions)."""
    return lambda: _shm_run(ranks, pin)[size]["ratio"]


def shm_busbw_ratio(size: int, ranks: int, pin: bool) -> Callable[[], float]:
    """shm busbw / Open MPI busbw at ``size`` bytes: the inverse of the time ratio."""
    return lambda: 1 / _shm_run(ranks, pin)[size]["ratio"]


def _shm_rows(ranks: int, pin: bool, where: str) -> list[Row]:
    sizes = shm_vs_mpi._size
    return [Row(f"shm all-reduce {sizes(s)} time / Open MPI, {where}", shm_time_ratio(s, ranks, pin), Target("<=", shm_vs_mpi.TIME_RATIO))
            for s in shm_vs_mpi.LATENCY_SIZES] + \
           [Row(f"shm all-reduce {sizes(s)} busbw / Open MPI, {where}", shm_busbw_ratio(s, ranks, pin), Target(">=", 1.0))
            for s in shm_vs_mpi.BANDWIDTH_SIZES]


ROWS: list[Row] = [
    Row("check ring allreduce N=4096: seconds", checker_scale.ring_4096_seconds, Target("<", 15.0)),
    Row("check ring allreduce N=4096: peak GiB", checker_scale.ring_4096_peak_gib, Target("<", 3.0)),
    Row("check hierarchical-ring 8 x 512: seconds", checker_scale.hierarchical_8x512_seconds, Target("<", 15.0)),
    Row("check ring: time per transfer N=4096 / N=1024", checker_scale.per_transfer_ratio_4096_to_1024, Target("<=", 1.0)),
    Row("check MSCCL a100 ring 128 ranks end to end: seconds", lambda: msccl_ring128.measure_ring128()["wall"], Target("<", 0.5)),
    Row("bench/mscclpp_verify.py exit status", script_status("mscclpp_verify.py"), Target("==", 0)),
    Row("bench/conform_overhead.py exit status", script_status("conform_overhead.py"), Target("==", 0)),
    Row("bench/impl_vs_gloo.py exit status", script_status("impl_vs_gloo.py"), Target("==", 0)),
    Row("bench/models_check.py exit status", script_status("models_check.py"), Target("==", 0)),
    Row("bench/msccl_verify.py exit status", script_status("msccl_verify.py"), Target("==", 0)),
    Row("bench/nccl_verify.py exit status", script_status("nccl_verify.py"), Target("==", 0)),
    Row("bench/proofs_fp_bound.py exit status", script_status("proofs_fp_bound.py"), Target("==", 0)),
    Row("bench/proofs_suite.py exit status", script_status("proofs_suite.py"), Target("==", 0)),
    *_shm_rows(4, False, "4 ranks on 2 cores"),
    *_shm_rows(2, True, "2 ranks, one core each"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the rows whose name contains this text")
    args = parser.parse_args(argv)
    rows = [r for r in ROWS if args.only in r.name]
    if not rows:
        print(f"run_all: --only {args.only!r} matches no row", file=sys.stderr)
        return 2
    results = []
    for row in rows:
        began = time.monotonic()
        print(f"== {row.name}", flush=True)
        figure = row.measure()
        results.append((row, figure, row.target.met(figure)))
        print(f"== {row.name}: {figure:.3g} (target {row.target}) {'ok' if results[-1][2] else 'MISS'} "
              f"[{time.monotonic() - began:.0f} s]", flush=True)
    width = max(len(r.name) for r in rows)
    print(f"\n{'figure':<{width}} {'value':>9}  {'target':<8} result")
    for row, figure, met in results:
        print(f"{row.name:<{width}} {figure:9.3g}  {str(row.target):<8} {'ok' if met else 'MISS'}")
    missed = sum(not met for _, _, met in results)
    print(f"bench: {len(results) - missed} of {len(results)} figures met their targets")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
