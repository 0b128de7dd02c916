"""Run a function on every rank of a gloo process group, in spawned
processes, and always clean up.

``run_ranks(world_size, fn, *args)`` starts ``world_size`` processes
(torch.multiprocessing, spawn). Each joins a gloo (or nccl) group through
a TCP store that this process serves on a port the OS picks (no port races),
calls ``fn(rank, world_size, *args)`` and sends back its return value or
its traceback. Whatever happens, every process is gone when ``run_ranks``
returns: ranks still running at the deadline are killed (SIGKILL) and
reaped, and the function asserts that none survived.

A minimal launcher for impl's tests; the product's launcher lives in
``collspec.conformance``.
"""

from __future__ import annotations

import pickle
import queue as queue_module
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

import torch.distributed as dist
import torch.multiprocessing as mp


@dataclass
class RankResult:
    rank: int
    ok: bool
    value: Any = None  # fn's return value when ok
    error: str = ""  # the traceback otherwise
    exitcode: int | None = None
    seconds: float = 0.0  # from start until this rank reported


def _rank_main(rank: int, world_size: int, port: int, timeout: float, backend: str, fn: Callable, args: tuple, results) -> None:
    import torch

    torch.set_num_threads(1)  # ranks share the machine's cores
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        store = dist.TCPStore("127.0.0.1", port, world_size + 1, is_master=False, timeout=timedelta(seconds=timeout))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout))
        value = pickle.dumps(fn(rank, world_size, *args))  # here, so a value that cannot be sent is reported
        results.put((rank, True, value, ""))
    except BaseException:  # noqa: BLE001 - everything goes back to the test
        results.put((rank, False, None, traceback.format_exc()))
        return
    dist.destroy_process_group()


def run_ranks(world_size: int, fn: Callable, *args, timeout: float = 120.0, group_timeout: float = 60.0, backend: str = "gloo") -> list[RankResult]:
    """Run ``fn(rank, world_size, *args)`` on every rank; results by rank.

    ``group_timeout`` is the process group's timeout of every operation;
    ``timeout`` bounds the whole run (then the ranks still running are
    killed and reported as not ok). ``backend="nccl"`` gives rank r the GPU
    r (mod the GPU count).
    """
    ctx = mp.get_context("spawn")
    store = dist.TCPStore("127.0.0.1", 0, world_size + 1, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=timeout))
    results = ctx.Queue()
    started = time.monotonic()
    procs = [ctx.Process(target=_rank_main, args=(r, world_size, store.port, group_timeout, backend, fn, args, results), daemon=True) for r in range(world_size)]
    for p in procs:
        p.start()
    reported: dict[int, RankResult] = {}
    deadline = started + timeout
    try:
        while len(reported) < world_size and time.monotonic() < deadline:
            try:
                rank, ok, value, error = results.get(timeout=0.2)
            except queue_module.Empty:
                if all(not p.is_alive() for p in procs) and results.empty():
                    break
                continue
            reported[rank] = RankResult(rank, ok, pickle.loads(value) if ok else None, error, seconds=time.monotonic() - started)
    finally:
        for p in procs:
            p.join(max(0.0, min(10.0, deadline - time.monotonic())))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(10)
        survivors = [p.pid for p in procs if p.is_alive()]
        results.close()
        results.join_thread()
        del store
    assert not survivors, f"rank processes {survivors} survived SIGKILL"
    out = []
    for r, p in enumerate(procs):
        result = reported.get(r, RankResult(r, False, error="no result: the rank died or ran past the deadline"))
        result.exitcode = p.exitcode
        out.append(result)
    return out


def values(results: list[RankResult]) -> list[Any]:
    """Every rank's return value; fails with every failed rank's traceback otherwise."""
    failed = [f"rank {r.rank} failed (exit code {r.exitcode}):\n{r.error}" for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    return [r.value for r in results]
