"""impl's ``shm`` all-reduce next to Open MPI's ``MPI_Allreduce``, in one run.

The same ``mpiexec`` ranks run both (float32 sum, in place), alternating at
every repetition, so both see the same machine load. For each size a
repetition is: barrier, ``iters`` calls back to back, time of one call =
the slowest rank's mean (as nccl-tests); the times shown are medians over
``--reps`` repetitions. Load from other processes comes and goes on a
scale of seconds, so the targets are judged on the *paired* ratio: the
median over repetitions of shm's time / Open MPI's time in the same
repetition (``ratio``; a busbw ratio is its inverse). busbw as
nccl-tests: 2(N-1)/N * bytes / time. The ``cpu`` columns are each rank's CPU time per call (``process_time``),
averaged over the ranks: what a call costs the cores, waiting included.

Targets, checked on the paired ratio after the table; exit 1 on any miss:

- 1 KiB to 64 KiB: shm time at most 1.5 x Open MPI's;
- 1, 4 and 16 MiB: shm busbw at least Open MPI's.

``--pin`` gives each rank one core of its own (rank r on the r-th core of
the affinity mask, set with ``sched_setaffinity`` in the rank, before
either library is touched); needs ranks <= cores. Without it no rank is
bound (``--bind-to none``), so 4 ranks on 2 cores share them as the
scheduler decides.

Usage: python bench/shm_vs_mpi.py [--ranks 4] [--pin] [--reps 15] [--sizes 1K,64K,16M] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LATENCY_SIZES = [1 << 10, 4 << 10, 16 << 10, 64 << 10]
BANDWIDTH_SIZES = [1 << 20, 4 << 20, 16 << 20]
SIZES = LATENCY_SIZES + [256 << 10] + BANDWIDTH_SIZES
REPS = 15
TIME_RATIO = 1.5  # shm time / Open MPI time at the latency sizes, at most


def bus_factor(ranks: int) -> float:
    return 2 * (ranks - 1) / ranks


def _iterations(nbytes: int) -> int:
    """Enough back-to-back calls that one repetition takes tens of milliseconds."""
    return max(3, min(100, (8 << 20) // nbytes))


# -- the rank side (run under mpiexec) ---------------------------------------------------


def _rank(args) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    if args.pin:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[rank]})
    import numpy as np
    import torch
    import torch.distributed as dist

    from collspec.impl.shm import SharedMemory

    store = dist.FileStore(os.path.join(args.rank_dir, "store"), ranks)  # no socket at all
    dist.init_process_group("gloo", store=store, rank=rank, world_size=ranks)
    shm = SharedMemory(rank, ranks)
    tensors = {}

    def run_shm(size):
        shm.all_reduce(tensors[("shm", size)])

    def run_mpi(size):
        comm.Allreduce(MPI.IN_PLACE, tensors[("mpi", size)].numpy(), op=MPI.SUM)

    impls = {"shm": run_shm, "mpi": run_mpi}
    seconds = {}
    for size in args.sizes:
        for name in impls:
            tensors[(name, size)] = torch.zeros(size // 4, dtype=torch.float32)
            for _ in range(3):
                impls[name](size)
        iters = _iterations(size)
        samples = {name: [] for name in impls}
        cpu = {name: [] for name in impls}
        for _ in range(args.reps):
            for name, run in impls.items():
                comm.Barrier()
                began, used = time.perf_counter(), time.process_time()
                for _ in range(iters):
                    run(size)
                samples[name].append(comm.allreduce((time.perf_counter() - began) / iters, op=MPI.MAX))
                cpu[name].append(comm.allreduce((time.process_time() - used) / iters, op=MPI.SUM) / ranks)
        for name in impls:
            seconds[f"{name} {size}"] = statistics.median(samples[name])
            seconds[f"{name} {size} cpu"] = statistics.median(cpu[name])
        seconds[f"ratio {size}"] = statistics.median(a / b for a, b in zip(samples["shm"], samples["mpi"]))
        check = torch.full((size // 4,), float(rank + 1))
        shm.all_reduce(check)
        if not bool((check == ranks * (ranks + 1) / 2).all()):
            raise SystemExit(f"shm gave a wrong sum at {size} bytes on rank {rank}")
        del tensors[("shm", size)], tensors[("mpi", size)]
    threads = len(os.listdir("/proc/self/task"))
    shm.close()
    info = comm.gather({"affinity": sorted(os.sched_getaffinity(0)), "threads": threads,
                        "torch_threads": torch.get_num_threads(), "numpy": np.__version__}, root=0)
    if rank == 0:
        with open(os.path.join(args.rank_dir, "result.json"), "w") as handle:
            json.dump({"seconds": seconds, "ranks": info, "mpi": MPI.Get_library_version().split(",")[0]}, handle)
    dist.destroy_process_group()


# -- the coordinator ----------------------------------------------------------------------


def measure(ranks: int, pin: bool, sizes: list[int], reps: int) -> dict:
    """Run the ranks under mpiexec; returns the rank-0 result (seconds per call by 'impl size')."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from collspec.conformance import launch, netns

    with tempfile.TemporaryDirectory(prefix="collspec-shm-bench-") as rank_dir:
        command = [launch._mpiexec(), "-n", str(ranks), "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
                   sys.executable, os.path.abspath(__file__), "--rank-dir", rank_dir, "--reps", str(reps),
                   "--sizes", ",".join(map(str, sizes))] + (["--pin"] if pin else [])
        if netns.available():  # PRRTE listens on every interface: keep it on loopback
            command = netns.wrap(command)
        done = subprocess.run(command, stdin=subprocess.DEVNULL, timeout=3600)
        if done.returncode:
            raise SystemExit(f"the ranks failed (exit {done.returncode})")
        with open(os.path.join(rank_dir, "result.json")) as handle:
            return json.load(handle)


def rows(result: dict, ranks: int, sizes: list[int]) -> list[dict]:
    """One row per size: times, busbw and whether the size's target holds (None: no target)."""
    out = []
    for size in sizes:
        shm, mpi = result["seconds"][f"shm {size}"], result["seconds"][f"mpi {size}"]
        ratio = result["seconds"][f"ratio {size}"]  # median over repetitions of shm time / MPI time in that repetition
        bw_shm, bw_mpi = size / shm * bus_factor(ranks) / 1e9, size / mpi * bus_factor(ranks) / 1e9
        if size in LATENCY_SIZES:
            target, met = f"ratio <= {TIME_RATIO}", ratio <= TIME_RATIO
        elif size in BANDWIDTH_SIZES:
            target, met = "ratio <= 1 (busbw)", ratio <= 1.0
        else:
            target, met = "-", None
        out.append({"bytes": size, "ratio": ratio, "shm_us": shm * 1e6, "mpi_us": mpi * 1e6, "shm_busbw": bw_shm, "mpi_busbw": bw_mpi,
                    "shm_cpu_us": result["seconds"][f"shm {size} cpu"] * 1e6, "mpi_cpu_us": result["seconds"][f"mpi {size} cpu"] * 1e6,
                    "target": target, "met": met})
    return out


def table(found: list[dict]) -> str:
    lines = [f"{'size':>8} {'shm us':>10} {'MPI us':>10} {'ratio':>6} {'shm GB/s':>9} {'MPI GB/s':>9} "
             f"{'shm cpu':>8} {'MPI cpu':>8}  {'target':<18} result"]
    for r in found:
        verdict = "-" if r["met"] is None else ("ok" if r["met"] else "MISS")
        lines.append(f"{_size(r['bytes']):>8} {r['shm_us']:10.1f} {r['mpi_us']:10.1f} {r['ratio']:6.2f} "
                     f"{r['shm_busbw']:9.3f} {r['mpi_busbw']:9.3f} {r['shm_cpu_us']:8.1f} {r['mpi_cpu_us']:8.1f}  "
                     f"{r['target']:<18} {verdict}")
    lines.append(PAIRED)
    return "\n".join(lines)


#: what the table's target column judges, printed under it
PAIRED = ("target: on ratio, the median over repetitions of shm's time / Open MPI's in the same repetition (paired), "
          "not on the time columns, which are each library's own median; the two can differ when load changes between repetitions")


def _size(nbytes: int) -> str:
    for unit, shift in (("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def _parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    return int(text.rstrip("KM")) * scale


def run(ranks: int, pin: bool, sizes: list[int], reps: int) -> tuple[list[dict], dict]:
    """Measure and evaluate: (rows, raw result)."""
    result = measure(ranks, pin, sizes, reps)
    return rows(result, ranks, sizes), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--pin", action="store_true", help="one core per rank (needs ranks <= cores)")
    parser.add_argument("--reps", type=int, default=REPS)
    parser.add_argument("--sizes", help="comma-separated sizes (e.g. 4K,16M); default 1K..16M")
    parser.add_argument("--quick", action="store_true", help="three sizes, three repetitions")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--rank-dir", help=argparse.SUPPRESS)  # set by the coordinator for the ranks
    args = parser.parse_args(argv)
    try:
        sizes = [_parse_size(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    except ValueError:
        print(f"shm_vs_mpi: --sizes {args.sizes}: use sizes like 4K,1M,16M", file=sys.stderr)
        return 2
    if args.quick:
        sizes, args.reps = [4 << 10, 64 << 10, 1 << 20], 3
    if args.rank_dir:
        args.sizes = sizes
        _rank(args)
        return 0
    cores = len(os.sched_getaffinity(0))
    if args.ranks < 2 or (args.pin and args.ranks > cores):
        print(f"shm_vs_mpi: --ranks {args.ranks}{' --pin' if args.pin else ''}: need 2 <= ranks"
              f"{f' <= {cores} cores' if args.pin else ''}", file=sys.stderr)
        return 2
    found, result = run(args.ranks, args.pin, sizes, args.reps)
    load = os.getloadavg()
    print(f"{result['mpi']}; {args.ranks} ranks on {cores} cores, {'one core per rank' if args.pin else 'unbound'}; "
          f"float32 sum in place; median of {args.reps}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("per rank: " + "; ".join(f"cores {i['affinity']} threads {i['threads']} torch {i['torch_threads']}" for i in result["ranks"]))
    print(table(found))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"ranks": args.ranks, "pin": args.pin, "rows": found}, handle, indent=1)
    missed = [r for r in found if r["met"] is False]
    print(f"shm vs Open MPI: {len(missed)} target(s) missed" if missed else "shm vs Open MPI: every target met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
