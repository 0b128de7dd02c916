"""Harness overhead: busbw of gloo all-reduce through collspec vs a bare loop.

Target (issue 7): at 16 MiB on 4 ranks, ``collspec bench --backend gloo``
reaches at least 0.95 of the busbw a bare torch.distributed loop reaches.

Both sides time the same way (nccl-tests' loop): 5 warm-up calls, a
barrier, 20 calls back to back; the time of one call is the slowest rank's
mean; busbw = bytes / time * spec.bus_factor("allreduce", 4). The two are
run alternately ROUNDS times and compared by their medians, because four
ranks on a small machine are noisy.

    .venv/bin/python bench/conform_overhead.py [--rounds 11]

Writes bench/results/conform_overhead.json; exits 1 if the ratio is below 0.95.

``--two-nodes`` (root): the same comparison across two "nodes", network
namespaces joined by a veth pair (tests/cluster/nodes.py), two ranks on
each, both sides started by multi-node torchrun (c10d rendezvous): the
bare loop with ``env://``, the harness as ``collspec bench --launcher
external``. Writes bench/results/conform_overhead_two_nodes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

WORLD, BYTES, ITERS, WARMUP = 4, 16 * 2**20, 20, 5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bare_rank(rank: int, store_dir: str | None) -> None:
    """One rank of the bare loop: torch.distributed directly, nothing else (``env://`` under torchrun)."""
    import torch
    import torch.distributed as dist

    if store_dir is None:
        dist.init_process_group("gloo", init_method="env://")
    else:
        dist.init_process_group("gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=WORLD)
    tensor = torch.ones(BYTES // 4, dtype=torch.float32)
    for _ in range(WARMUP):
        dist.all_reduce(tensor)
    dist.barrier()
    began = time.perf_counter()
    for _ in range(ITERS):
        dist.all_reduce(tensor)
    mean = torch.tensor([(time.perf_counter() - began) / ITERS], dtype=torch.float64)
    dist.all_reduce(mean, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"seconds": float(mean)}))
    dist.destroy_process_group()


def bare() -> float:
    from collspec.spec import bus_factor

    with tempfile.TemporaryDirectory() as store_dir:
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        ranks = [
            subprocess.Popen([sys.executable, __file__, "--bare-rank", str(r), store_dir], env=env, stdout=subprocess.PIPE, text=True)
            for r in range(WORLD)
        ]
        outputs = [p.communicate(timeout=600)[0] for p in ranks]
    seconds = json.loads(outputs[0].strip().splitlines()[-1])["seconds"]
    return BYTES / seconds / 1e9 * bus_factor("allreduce", WORLD)


def harness() -> float:
    with tempfile.TemporaryDirectory() as out:
        report = os.path.join(out, "bench.json")
        subprocess.run(
            [sys.executable, "-m", "collspec", "bench", "--backend", "gloo", "--world-size", str(WORLD),
             "--sizes", f"{BYTES}:{BYTES}", "--iters", str(ITERS), "--warmup", str(WARMUP), "--json", report],
            check=True, stdout=subprocess.DEVNULL,
        )
        with open(report) as handle:
            return json.load(handle)["stats"]["rows"][0]["busbw_GBps"]


def _torchrun_two_nodes(nodes, command: list[str], out: str, run: str) -> list[str]:
    """``command`` (after ``torchrun ...``) as 2 x 2 ranks on the two nodes; the two nodes' output."""
    procs = []
    for i in range(2):
        launcher = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
                    "--node-rank", str(i), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{nodes.addresses[0]}:29400",
                    "--rdzv-id", run, "--rdzv-conf", f"is_host={'true' if i == 0 else 'false'}", "--max-restarts", "0"]
        procs.append(nodes.start(i, launcher + command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 cwd=out, env=dict(os.environ, PYTHONPATH=ROOT)))
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a two-node run failed:\n{outputs[0][-3000:]}\n{outputs[1][-3000:]}")
    return outputs


def bare_two_nodes(nodes, out: str, run: str) -> float:
    from collspec.spec import bus_factor

    outputs = _torchrun_two_nodes(nodes, [os.path.abspath(__file__), "--bare-env"], out, run)
    line = next(line for text in outputs for line in text.splitlines() if line.startswith('{"seconds"'))
    return BYTES / json.loads(line)["seconds"] / 1e9 * bus_factor("allreduce", WORLD)


def harness_two_nodes(nodes, out: str, run: str) -> float:
    report = os.path.join(out, f"{run}.json")
    _torchrun_two_nodes(nodes, ["-m", "collspec", "bench", "--launcher", "external", "--backend", "gloo",
                                "--sizes", f"{BYTES}:{BYTES}", "--iters", str(ITERS), "--warmup", str(WARMUP),
                                "--json", report], out, run)
    with open(report) as handle:
        return json.load(handle)["stats"]["rows"][0]["busbw_GBps"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--two-nodes", action="store_true", help="4 ranks on two namespaced nodes, through torchrun")
    args = parser.parse_args()
    if args.two_nodes:
        return main_two_nodes(args.rounds)
    bare_runs, harness_runs = [], []
    for round_ in range(args.rounds):
        bare_runs.append(bare())
        harness_runs.append(harness())
        print(f"round {round_ + 1}: bare {bare_runs[-1]:.3f} GB/s, harness {harness_runs[-1]:.3f} GB/s", flush=True)
    return _report("conform_overhead", "busbw of gloo all_reduce, 16 MiB float32, 4 ranks: collspec bench vs a bare torch.distributed loop",
                   bare_runs, harness_runs)


def main_two_nodes(rounds: int) -> int:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from cluster.nodes import TwoNodes, unavailable

    reason = unavailable()
    if reason:
        print(f"--two-nodes: {reason}", file=sys.stderr)
        return 2
    bare_runs, harness_runs = [], []
    began = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic()
    with TwoNodes() as nodes, tempfile.TemporaryDirectory() as out:
        for round_ in range(rounds):
            bare_runs.append(bare_two_nodes(nodes, out, f"bare{round_}"))
            harness_runs.append(harness_two_nodes(nodes, out, f"harness{round_}"))
            print(f"round {round_ + 1}: bare {bare_runs[-1]:.3f} GB/s, harness {harness_runs[-1]:.3f} GB/s", flush=True)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return _report("conform_overhead_two_nodes",
                   "busbw of gloo all_reduce, 16 MiB float32, 4 ranks on two network-namespace nodes (veth), torchrun c10d: "
                   "collspec bench --launcher external vs a bare torch.distributed loop",
                   bare_runs, harness_runs,
                   load_average_at_end=os.getloadavg(),
                   cpu_seconds=round(used.ru_utime + used.ru_stime - began.ru_utime - began.ru_stime, 1),
                   wall_seconds=round(time.monotonic() - wall, 1))


def _report(name: str, what: str, bare_runs: list[float], harness_runs: list[float], **extra) -> int:
    """Write bench/results/NAME.json and print the medians; 0 when the
    harness keeps at least 95% of the bare loop's median busbw."""
    ratio = statistics.median(harness_runs) / statistics.median(bare_runs)
    result = {
        "benchmark": name,
        "what": what,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        **extra,
        "bare_busbw_GBps": bare_runs,
        "harness_busbw_GBps": harness_runs,
        "median_bare": statistics.median(bare_runs),
        "median_harness": statistics.median(harness_runs),
        "ratio": ratio,
        "target": 0.95,
    }
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"{name}.json"), "w") as handle:
        json.dump(result, handle, indent=2)
    print(f"median busbw: bare {result['median_bare']:.3f} GB/s, harness {result['median_harness']:.3f} GB/s, "
          f"ratio {ratio:.3f} (target >= 0.95); load average {os.getloadavg()[0]:.1f}")
    return 0 if ratio >= 0.95 else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--bare-rank":
        bare_rank(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 2 and sys.argv[1] == "--bare-env":
        bare_rank(int(os.environ["RANK"]), None)
    else:
        sys.exit(main())
