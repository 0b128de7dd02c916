"""Benchmark: how long the MSCCL++ plan verifier takes, end to end (read
the JSON file, parse, happens-before, races, result check through the one
interpreter and checker), on two plans written by collspec's exporter:

- an 8-GPU all-to-all plan of about 1.9 MB (every rank sends m chunks to
  each peer, one LL packet op per chunk and side): target under 3 s;
- the ring all-reduce on 64 GPUs (``collspec export -a ring -c allreduce
  -n 64 --format mscclpp``): target under 2 s.

Each figure is the median of 3 runs, in seconds. "check" is what
`collspec check FILE.json` does after Python starts. Exit 1 if a target is
missed. Writes bench/results/mscclpp_verify.json.

    .venv/bin/python bench/mscclpp_verify.py
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

from collspec.models.generators import generate
from collspec.models.mscclpp import load, verify
from collspec.models.mscclpp.export import to_plan
from collspec.models.schedule import COPY, Schedule, Step

RUNS = 3
TARGET_ALLTOALL_MB = 1.9


def alltoall(n: int, m: int) -> Schedule:
    """One step: rank s sends block r of its vector (m chunks) to rank r."""
    s, r, j = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), np.arange(m), indexing="ij"))
    keep = s != r
    s, r, j = s[keep], r[keep], j[keep]
    step = Step.of(s, r, r * m + j, s * m + j, COPY)
    return Schedule("alltoall", n, n * m, (step,), name=f"alltoall {n} GPUs, {m} chunks per peer")


def median_seconds(fn) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(label: str, path: str, target: float) -> dict:
    plan = load(path)
    verdict = verify(plan)
    check = median_seconds(lambda: verify(load(path)))
    return {
        "subject": label, "MB": round(os.path.getsize(path) / 1e6, 3), "gpus": plan.ngpus, "ops": len(plan.ops),
        "check_s": round(check, 3), "target_s": target, "met": check < target, "verdict": "ok" if verdict.ok else "FAILED",
    }


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        m = 8
        while len(to_plan(alltoall(8, m))) < TARGET_ALLTOALL_MB * 1e6:
            m += 8
        path = os.path.join(folder, "alltoall8.json")
        with open(path, "w") as handle:
            handle.write(to_plan(alltoall(8, m)))
        rows.append(measure(f"alltoall, 8 GPUs, {m} chunks/peer", path, 3.0))
        path = os.path.join(folder, "ring64.json")
        with open(path, "w") as handle:
            handle.write(to_plan(generate("ring", "allreduce", 64)))
        rows.append(measure("ring allreduce, 64 GPUs", path, 2.0))
    print(f"# MSCCL++ plan verifier, median of {RUNS} runs; {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}")
    print(f"{'subject':<34} {'MB':>5} {'GPUs':>5} {'ops':>6} {'check s':>8} {'target s':>9}  verdict")
    for r in rows:
        print(f"{r['subject']:<34} {r['MB']:>5.2f} {r['gpus']:>5} {r['ops']:>6} {r['check_s']:>8.3f} {'< ' + str(r['target_s']):>9}  {r['verdict']}{'  (met)' if r['met'] else '  (MISSED)'}")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "mscclpp_verify.json"), "w") as handle:
        json.dump({"runs": RUNS, "load": os.getloadavg()[0], "rows": rows}, handle, indent=1)
    return 0 if all(r["met"] and r["verdict"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
