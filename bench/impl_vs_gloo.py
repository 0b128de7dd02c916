"""Bus bandwidth of impl's executors next to gloo's own all_reduce.

Two tables, each measured side by side in one run (the implementations
alternate at every size, so both see the same machine load):

1. the ``ring`` schedule executor vs ``dist.all_reduce`` (gloo), float32
   all-reduce, 1 KiB to 64 MiB;
2. the ``shm`` one-shot all-reduce vs gloo, 4 KiB to 1 MiB.

busbw = bytes / time * ``collspec.spec.bus_factor("allreduce", N)``, as
nccl-tests computes it. Each figure is the median over ``--reps``
repetitions of a timed loop; a loop's time is the slowest rank's.

Usage: python bench/impl_vs_gloo.py [--ranks 4] [--reps 7] [--sizes 16M,64M] [--shm-sizes 4K] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collspec.spec import bus_factor
from collspec.units import format_size, parse_size

RING_SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB
SHM_SIZES = [1 << k for k in range(12, 21, 2)]  # 4 KiB .. 1 MiB


def _iterations(nbytes: int) -> int:
    """Enough calls that a loop takes a few tens of milliseconds."""
    return max(2, min(50, (8 << 20) // max(nbytes, 1)))


def _loop_seconds(run, tensor: torch.Tensor, iterations: int) -> float:
    """Seconds per call of the slowest rank."""
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        run(tensor)
    elapsed = torch.tensor([(time.perf_counter() - start) / iterations], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed)


def _measure(impls: dict, sizes: list[int], reps: int) -> dict:
    """{(name, size): median seconds per call}, alternating implementations."""
    out = {}
    for size in sizes:
        tensors = {name: torch.ones(size // 4, dtype=torch.float32) for name in impls}
        iterations = _iterations(size)
        for name, run in impls.items():  # warm up: plans, buffers, connections
            run(tensors[name])
        samples = {name: [] for name in impls}
        for _ in range(reps):
            for name, run in impls.items():
                samples[name].append(_loop_seconds(run, tensors[name], iterations))
        for name in impls:
            out[(name, size)] = statistics.median(samples[name])
    return out


def _rank(rank: int, world_size: int, port: int, reps: int, ring_sizes: list[int], shm_sizes: list[int], results) -> None:
    from collspec.impl.backends import Ring, SharedMemoryOneShot

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world_size + 1, is_master=False, timeout=timedelta(seconds=300))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timedelta(seconds=300))
    ring, shm = Ring(rank, world_size), SharedMemoryOneShot(rank, world_size)
    gloo = lambda t: dist.all_reduce(t)  # noqa: E731
    first = _measure({"ring": ring.all_reduce, "gloo": gloo}, ring_sizes, reps)
    second = _measure({"shm one-shot": shm.all_reduce, "gloo": gloo}, shm_sizes, reps)
    shm.close()
    if rank == 0:
        results.put((first, second))
    dist.barrier()
    dist.destroy_process_group()


def _table(title: str, seconds: dict, sizes: list[int], ours: str, n: int) -> None:
    factor = bus_factor("allreduce", n)
    print(f"\n{title}")
    print(f"{'size':>8} {ours + ' us':>14} {'gloo us':>10} {ours + ' GB/s':>16} {'gloo GB/s':>10} {'ratio':>6}")
    for size in sizes:
        a, g = seconds[(ours, size)], seconds[("gloo", size)]
        bw_a, bw_g = size / a * factor / 1e9, size / g * factor / 1e9
        print(f"{format_size(size):>8} {a * 1e6:14.0f} {g * 1e6:10.0f} {bw_a:16.3f} {bw_g:10.3f} {bw_a / bw_g:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (a smoke run)")
    parser.add_argument("--sizes", help="ring table sizes, comma-separated (e.g. 16M,64M); default 1K..64M")
    parser.add_argument("--shm-sizes", help="shm table sizes, comma-separated; default 4K..1M")
    args = parser.parse_args()
    ring_sizes, shm_sizes, reps = RING_SIZES, SHM_SIZES, args.reps
    if args.sizes:
        ring_sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.shm_sizes:
        shm_sizes = [parse_size(s) for s in args.shm_sizes.split(",")]
    if args.quick:
        ring_sizes, shm_sizes, reps = [1 << 10, 1 << 20], [1 << 12], 2
    ctx = mp.get_context("spawn")
    store = dist.TCPStore("127.0.0.1", 0, args.ranks + 1, is_master=True, wait_for_workers=False)
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, args.ranks, store.port, reps, ring_sizes, shm_sizes, results)) for r in range(args.ranks)]
    for p in procs:
        p.start()
    first, second = results.get(timeout=3600)
    for p in procs:
        p.join()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}; {args.ranks} ranks on one host, gloo over loopback TCP")
    print(f"busbw = size / time * {bus_factor('allreduce', args.ranks):g} (bus_factor allreduce, N={args.ranks}); median of {reps} loops")
    _table("ring executor vs gloo all_reduce, float32", first, ring_sizes, "ring", args.ranks)
    _table("shm one-shot vs gloo all_reduce, float32", second, shm_sizes, "shm one-shot", args.ranks)


if __name__ == "__main__":
    main()
