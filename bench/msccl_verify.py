"""Benchmark: how long the MSCCL verifier takes on the largest real file of
the corpus and on exported ring all-reduces (64 and 128 ranks).

Targets (issue 5): the 1.4 MB RCCL ring (16 GPUs, 24 channels) verified in
under 3 s; a 128-rank ring all-reduce, exported by collspec, in under 2 s.
Each figure is the median of 5 runs, in seconds. "check" is parse + verify,
what `collspec check FILE.xml` does after Python starts.

    .venv/bin/python bench/msccl_verify.py
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time

from collspec.models.generators import generate
from collspec.models.msccl import load, to_xml, verify
from collspec.models.msccl.corpus import DATA

RUNS = 5
TARGETS = {"all-reduce-ring-simple.xml": 3.0, "ring allreduce, 128 ranks": 2.0}


def median_seconds(fn) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(label: str, path: str, export_seconds: float | None) -> dict:
    parse = median_seconds(lambda: load(path))
    program = load(path)
    verdict = verify(program)
    verifying = median_seconds(lambda: verify(program))
    checked = median_seconds(lambda: verify(load(path)))
    return {
        "subject": label,
        "MB": os.path.getsize(path) / 1e6,
        "gpus": program.ngpus,
        "steps": program.steps,
        "export": export_seconds,
        "parse": parse,
        "verify": verifying,
        "check": checked,
        "verdict": "ok" if verdict.ok else "FAILED",
        "target": TARGETS.get(label),
    }


def main() -> None:
    rows = [measure("all-reduce-ring-simple.xml", str(DATA / "all-reduce-ring-simple.xml"), None)]
    with tempfile.TemporaryDirectory() as folder:
        for n in (64, 128):
            path = os.path.join(folder, f"ring{n}.xml")
            export = median_seconds(lambda: to_xml(generate("ring", "allreduce", n)))
            with open(path, "w") as handle:
                handle.write(to_xml(generate("ring", "allreduce", n)))
            rows.append(measure(f"ring allreduce, {n} ranks", path, export))
    print(f"# MSCCL verifier, median of {RUNS} runs; {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"{'subject':<28} {'MB':>5} {'GPUs':>5} {'steps':>6} {'export s':>9} {'parse s':>8} {'verify s':>9} {'check s':>8} {'target s':>9}  verdict")
    for r in rows:
        export = f"{r['export']:.3f}" if r["export"] is not None else "-"
        target = f"< {r['target']:.0f}" if r["target"] else "-"
        met = "" if not r["target"] else ("  (met)" if r["check"] < r["target"] else "  (MISSED)")
        print(f"{r['subject']:<28} {r['MB']:>5.2f} {r['gpus']:>5} {r['steps']:>6} {export:>9} {r['parse']:>8.3f} {r['verify']:>9.3f} {r['check']:>8.3f} {target:>9}  {r['verdict']}{met}")


if __name__ == "__main__":
    main()
