"""Benchmark: how long `collspec prove` takes, whole command and per proof.

Target (issue 4): the default suite in under 60 s on 2 cores, whole command
included (interpreter start, imports, every proof). Runs the default suite
RUNS times in fresh processes and `--full` once; prints the median wall
time of the command, and each proof's median seconds as the command
reports them.

Run: .venv/bin/python bench/proofs_suite.py [--skip-full]
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 3


def one_run(*options: str) -> tuple[float, dict]:
    """(wall seconds, JSON report) of one `collspec prove` in a fresh process."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "prove.json")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "collspec", "prove", *options, "--json", path], capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"collspec prove {' '.join(options)} failed:\n{done.stdout}\n{done.stderr}")
        with open(path) as handle:
            return seconds, json.load(handle)


def table(title: str, runs: list[tuple[float, dict]]) -> None:
    walls = [wall for wall, _ in runs]
    print(f"\n{title}: median {statistics.median(walls):.1f} s over {len(runs)} run(s) (min {min(walls):.1f}, max {max(walls):.1f})")
    per_proof: dict[str, list[float]] = {}
    scopes: dict[str, str] = {}
    for _, report in runs:
        for proof in report["stats"]["proofs"]:
            per_proof.setdefault(proof["name"], []).append(proof["seconds"])
            scopes[proof["name"]] = proof["scope"]
    width = max(map(len, per_proof))
    print(f"  {'proof':<{width}}  {'scope':<11}  median s")
    for name, seconds in per_proof.items():
        print(f"  {name:<{width}}  {scopes[name]:<11}  {statistics.median(seconds):8.2f}")
    every_n = sum(statistics.median(s) for n, s in per_proof.items() if scopes[n].startswith("all N"))
    print(f"  proofs for all N: {every_n:.1f} s; bounded: {sum(statistics.median(s) for s in per_proof.values()) - every_n:.1f} s")


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    table("collspec prove (default suite)", [one_run() for _ in range(RUNS)])
    if "--skip-full" not in sys.argv:
        table("collspec prove --full", [one_run("--full")])


if __name__ == "__main__":
    main()
