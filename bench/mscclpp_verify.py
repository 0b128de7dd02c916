"""Benchmark: how long the MSCCL++ plan verifier takes, end to end (read
the JSON file, parse, happens-before, races, result check through the one
interpreter and checker), on three plans:

- an 8-GPU all-to-all plan of about 1.9 MB in the shape MSCCL++'s DSL
  writes one (Simple protocol, memory-channel ``put`` into the peer's
  scratch, ``signal``/``wait``, a device semaphore between a rank's send
  and receive thread blocks, ``copy`` out of scratch; over a hundred
  thread blocks per GPU, see :func:`put_alltoall`): target under 3 s;
- an 8-GPU all-to-all of about 1.9 MB written by collspec's exporter (one
  LL packet op per chunk and side): target under 3 s;
- the ring all-reduce on 64 GPUs (``collspec export -a ring -c allreduce
  -n 64 --format mscclpp``): target under 2 s.

Each figure is the median of 3 runs, in seconds of wall time ("check s",
what the targets apply to) and of this process's CPU time ("cpu s": on a
shared, loaded machine the wall time also counts the neighbours). "check"
is what `collspec check FILE.json` does after Python starts. Exit 1 if a
target is missed. Writes bench/results/mscclpp_verify.json.

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


def put_alltoall(n: int, m: int) -> str:
    """An in-place all-to-all plan of n GPUs, m chunks per peer, as a DSL
    program over memory channels writes one: for each chunk slot k, GPU r
    has a send thread block (per peer p: ``put`` of i[p*m+k] into p's
    scratch slot for (r, k), ``nop``, ``signal`` on its k-th channel to p,
    ``sem_release``) and a receive thread block (per peer p: ``wait`` on
    the k-th channel to p, ``nop``, ``sem_acquire`` of that send's
    semaphore, so the copy does not overwrite i[p*m+k] before it was put,
    ``nop``, ``copy`` from the scratch slot into i[p*m+k], ``nop``)."""
    gpus = []
    for r in range(n):
        peers = [p for p in range(n) if p != r]
        channel = {(p, k): j * m + k for j, p in enumerate(peers) for k in range(m)}
        sem = channel  # one semaphore per (peer, slot), numbered like the channels
        slot = lambda sender, receiver, k: (sender if sender < receiver else sender - 1) * m + k  # noqa: E731
        sends, receives = [], []
        for k in range(m):
            ops = []
            for j, p in enumerate(peers):
                ops += [
                    {"name": "put", "src_buff": [{"type": "i", "index": p * m + k, "size": 1}],
                     "dst_buff": [{"buffer_id": j, "index": slot(r, p, k), "size": 1}], "channel_type": "memory"},
                    {"name": "nop"},
                    {"name": "signal", "channel_ids": [j], "channel_type": "memory"},
                    {"name": "sem_release", "semaphore_ids": [sem[p, k]]},
                    {"name": "nop"},
                ]
            sends.append({"channels": [{"channel_type": "memory", "channel_ids": [channel[p, k] for p in peers]}],
                          "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": list(range(len(peers)))}],
                          "ops": ops})
            ops = []
            for j, p in enumerate(peers):
                ops += [
                    {"name": "wait", "channel_ids": [j], "channel_type": "memory"},
                    {"name": "nop"},
                    {"name": "sem_acquire", "semaphore_ids": [sem[p, k]]},
                    {"name": "nop"},
                    {"name": "copy", "src_buff": [{"type": "s", "index": slot(p, r, k), "size": 1}],
                     "dst_buff": [{"type": "i", "index": p * m + k, "size": 1}]},
                    {"name": "nop"},
                ]
            receives.append({"channels": [{"channel_type": "memory", "channel_ids": [channel[p, k] for p in peers]}],
                             "remote_buffer_refs": [], "ops": ops})
        tbs = [{"id": t, **tb} for t, tb in enumerate(sends + receives)]
        gpus.append({
            "id": r, "input_chunks": n * m, "output_chunks": n * m, "scratch_chunks": (n - 1) * m,
            "channels": [{"channel_type": "memory", "connected_to": [p for p in peers for _ in range(m)]}],
            "remote_buffers": [{"rank": p, "type": "s", "access_channel_types": ["memory"]} for p in peers],
            "semaphores": [{"init_value": 0} for _ in range(len(peers) * m)], "threadblocks": tbs,
        })
    plan = {"name": f"alltoall_put_{n}x{m}", "collective": "alltoall", "protocol": "Simple", "inplace": True,
            "reuse_resources": False, "gpus": gpus, "num_threads_per_block": 1024, "use_double_scratch_buffer": False,
            "buffer_alignment": 16, "min_message_size": 0, "max_message_size": (1 << 64) - 1}
    return json.dumps(plan, indent=1)


def median_seconds(fn) -> tuple[float, float]:
    """Median wall and CPU seconds of RUNS calls."""
    wall, cpu = [], []
    for _ in range(RUNS):
        start, used = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - used)
    return statistics.median(wall), statistics.median(cpu)


def measure(label: str, path: str, target: float) -> dict:
    plan = load(path)
    verdict = verify(plan)
    check, cpu = median_seconds(lambda: verify(load(path)))
    return {
        "subject": label, "MB": round(os.path.getsize(path) / 1e6, 3), "gpus": plan.ngpus, "ops": len(plan.ops),
        "check_s": round(check, 3), "cpu_s": round(cpu, 3), "target_s": target, "met": check < target, "verdict": "ok" if verdict.ok else "FAILED",
    }


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        m = 8
        while len(put_alltoall(8, m)) < TARGET_ALLTOALL_MB * 1e6:
            m += 1
        path = os.path.join(folder, "alltoall8_put.json")
        with open(path, "w") as handle:
            handle.write(put_alltoall(8, m))
        rows.append(measure(f"alltoall put/signal, 8 GPUs, {m} ch/peer", path, 3.0))
        m = 8
        while len(to_plan(alltoall(8, m))) < TARGET_ALLTOALL_MB * 1e6:
            m += 8
        path = os.path.join(folder, "alltoall8.json")
        with open(path, "w") as handle:
            handle.write(to_plan(alltoall(8, m)))
        rows.append(measure(f"alltoall LL export, 8 GPUs, {m} ch/peer", path, 3.0))
        path = os.path.join(folder, "ring64.json")
        with open(path, "w") as handle:
            handle.write(to_plan(generate("ring", "allreduce", 64)))
        rows.append(measure("ring allreduce, 64 GPUs", path, 2.0))
    print(f"# MSCCL++ plan verifier, median of {RUNS} runs; {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}")
    print(f"{'subject':<40} {'MB':>5} {'GPUs':>5} {'ops':>6} {'check s':>8} {'cpu s':>6} {'target s':>9}  verdict")
    for r in rows:
        print(f"{r['subject']:<40} {r['MB']:>5.2f} {r['gpus']:>5} {r['ops']:>6} {r['check_s']:>8.3f} {r['cpu_s']:>6.3f} {'< ' + str(r['target_s']):>9}  {r['verdict']}{'  (met)' if r['met'] else '  (MISSED)'}")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "mscclpp_verify.json"), "w") as handle:
        json.dump({"runs": RUNS, "load": os.getloadavg()[0], "rows": rows}, handle, indent=1)
    return 0 if all(r["met"] and r["verdict"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
