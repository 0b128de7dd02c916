"""Benchmark: NCCL's algorithms (issue 13) through the one checker, over full ranges.

- nccl-ring: every collective, N = 2..64, 1..4 channels; a count with a
  partial last loop (and empty chunks at many N), chunk 2; channels past the
  first run on their own ring (a seeded random permutation of the ranks).
- nccl-tree: all-reduce, N = 2..64 with 1..4 channels, and N = 512, with
  NCCL's split (one channel for 23 elements) and with the parts given evenly.
- nccl-pat: reduce-scatter and all-gather, N = 2..64 with every aggregation
  NCCL can use (1, 2, 4, ... up to N/2), and `collspec check` of both at
  N = 512 end to end (target: reduce-scatter in under 20 s).
- the double binary tree's facts (tree_facts: two spanning binary trees,
  who forwards in both) with numpy for every N = 1..4096 and the powers of
  two up to 65536 and their neighbours; proofs/nccl_trees.py proves them
  for every N <= 65536.
- buffer slots (``check --slots``): nccl-ring at NCCL_STEPS = 8 slots
  deadlocks exactly when a chunk needs more than 8, for N = 2..64.

Prints, per section, what was checked, how many failed, and the seconds;
exit 1 if anything failed. The test suite checks a sample of the same
(tests/test_models_nccl.py).

Run: .venv/bin/python bench/nccl_verify.py [--only ring]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from collspec.models.checker import check
from collspec.models.generators import generate

RING_COLLECTIVES = ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")
#: elements (per rank for reduce_scatter and allgather)
RING_COUNTS = {"allreduce": 37, "broadcast": 37, "reduce": 37, "reduce_scatter": 7, "allgather": 7}


def _rings(n: int, channels: int) -> list[list[int]]:
    rng = np.random.default_rng(n * 100 + channels)
    return [list(range(n))] + [rng.permutation(n).tolist() for _ in range(channels - 1)]


def ring_section() -> tuple[str, int, int]:
    checked, failed = 0, []
    for collective in RING_COLLECTIVES:
        for n in range(2, 65):
            for channels in range(1, 5):
                schedule = generate("nccl-ring", collective, n, channels=channels, chunk=2, count=RING_COUNTS[collective], rings=_rings(n, channels))
                result = check(schedule)
                checked += 1
                if not result.ok:
                    failed.append(f"{collective} N={n} channels={channels}: {[str(v) for v in result.violations if v.is_error][:1]}")
    for line in failed[:10]:
        print("  FAILED", line)
    return "nccl-ring, 5 collectives x N=2..64 x channels 1..4", checked, len(failed)


def tree_section() -> tuple[str, int, int]:
    checked, failed = 0, []
    cases = [(n, c) for n in range(2, 65) for c in range(1, 5)] + [(512, 2)]
    for n, channels in cases:
        # NCCL's split puts 23 elements on channel 0; the parts given spread them over every channel
        parts = [23 // channels + (c < 23 % channels) for c in range(channels)]
        for options in ({"count": 23}, {"parts": parts}):
            result = check(generate("nccl-tree", "allreduce", n, channels=channels, chunk=2, **options))
            checked += 1
            if not result.ok:
                failed.append(f"N={n} channels={channels} {options}: {[str(v) for v in result.violations if v.is_error][:1]}")
    for line in failed[:10]:
        print("  FAILED", line)
    return "nccl-tree allreduce, N=2..64 x channels 1..4 and N=512, NCCL's split and parts given", checked, len(failed)


def pat_section() -> tuple[str, int, int]:
    import subprocess

    from collspec.models.generators.nccl_pat import max_aggregation

    checked, failed = 0, []
    for collective in ("reduce_scatter", "allgather"):
        for n in range(2, 65):
            for k in range(int(max_aggregation(n)).bit_length()):
                result = check(generate("nccl-pat", collective, n, aggregation=1 << k, chunk=2, count=3))
                checked += 1
                if not result.ok:
                    failed.append(f"{collective} N={n} aggregation={1 << k}: {[str(v) for v in result.violations if v.is_error][:1]}")
    for collective in ("reduce_scatter", "allgather"):
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "collspec", "check", "-a", "nccl-pat", "-c", collective, "-n", "512"], capture_output=True, text=True)
        seconds = time.perf_counter() - began
        checked += 1
        print(f"  collspec check -a nccl-pat -c {collective} -n 512: exit {done.returncode}, {seconds:.1f} s")
        if done.returncode != 0 or (collective == "reduce_scatter" and seconds >= 20):
            failed.append(f"{collective} N=512: exit {done.returncode}, {seconds:.1f} s")
    for line in failed[:10]:
        print("  FAILED", line)
    return "nccl-pat, 2 collectives x N=2..64 x every aggregation, and N=512", checked, len(failed)


def tree_facts_section() -> tuple[str, int, int]:
    from collspec.models.generators.nccl_tree import tree_facts

    sizes = sorted(set(range(1, 4097)) | {v for b in range(12, 17) for v in (2**b - 1, 2**b, 2**b + 1) if v <= 65536})
    failed = 0
    for n in sizes:
        try:
            facts = tree_facts(n)
        except ValueError as error:
            print("  FAILED", error)
            failed += 1
            continue
        if facts["interior_in_both"] != ([0] if n % 2 == 1 and n >= 3 else []):
            print(f"  N={n}: forwarding in both trees: {facts['interior_in_both'][:8]}")
            failed += 1
    return "double binary tree facts, N=1..4096 and 2**b-1..2**b+1 up to 65536", len(sizes), failed


def slots_section() -> tuple[str, int, int]:
    """NCCL_STEPS = 8 slots of one element: a ring chunk of 4 slots (NCCL's
    ALLREDUCE_CHUNKSTEPS) never deadlocks, one of 9 always does, at step 0;
    a broadcast chain of 9 never does."""
    from collspec.models.slots import slot_deadlocks

    checked, failed = 0, []
    for n in range(2, 65):
        for collective in ("allreduce", "reduce_scatter", "allgather"):
            for chunk, dead in ((4, False), (8, False), (9, True)):
                count = chunk * (n if collective == "allreduce" else 1)
                found = slot_deadlocks(generate("nccl-ring", collective, n, channels=1, chunk=chunk, count=count), slots=8)
                checked += 1
                if bool(found) != dead or (found and found[0].step != 0):
                    failed.append(f"{collective} N={n} chunk={chunk}: {[v.message for v in found]}")
        chain = generate("nccl-ring", "broadcast", n, channels=1, chunk=9, count=18)
        checked += 1
        if slot_deadlocks(chain, slots=8):
            failed.append(f"broadcast N={n}: a chain reported a deadlock")
    for line in failed[:10]:
        print("  FAILED", line)
    return "slots: nccl-ring at 8 slots, N=2..64, chunks of 4, 8 and 9 slots, and the broadcast chain", checked, len(failed)


SECTIONS = {"ring": ring_section, "tree": tree_section, "pat": pat_section, "tree-facts": tree_facts_section, "slots": slots_section}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SECTIONS), help="run one section")
    args = parser.parse_args(argv)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    bad = 0
    for name, section in SECTIONS.items():
        if args.only and name != args.only:
            continue
        began = time.perf_counter()
        what, checked, failed = section()
        bad += failed
        print(f"{what}: {checked} checked, {failed} failed, {time.perf_counter() - began:.1f} s", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
