"""Benchmark: NCCL's algorithms (issue 13) through the one checker, over full ranges.

- nccl-ring: every collective, N = 2..64, 1..4 channels; a count with a
  partial last loop (and empty chunks at many N), chunk 2; channels past the
  first run on their own ring (a seeded random permutation of the ranks).

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


SECTIONS = {"ring": ring_section}


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
