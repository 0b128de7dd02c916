"""Cases for impl's multi-process tests: what each rank runs, and what the
test expects of it.

A :class:`Case` names a backend, a collective, a world size, a count, a
dtype and an op. Inputs are generated from the case and the rank alone, so
the rank processes and the test process see the same numbers without
sending them. ``run_cases`` runs in every rank of one 4-process gloo group:
cases for fewer ranks run on the sub-group of ranks 0..n-1. The test process
then compares each result with

- the spec (``collspec.spec``): exactly for integers and for collectives
  that do not reduce, within ``check_reduction``'s bound for floats;
- the models interpreter running the same schedule over ``Numbers`` (floats
  rounded after every hop): bit for bit, for every rank;
- the checker, on the trace the executor recorded.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import zlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import torch

from collspec import spec
from collspec.models.algebras import Numbers
from collspec.models.generators import generate
from collspec.models.interpreter import run
from collspec.spec.dtypes import as_dtype, is_float
from collspec.spec.ops import finish

SCHEDULE_BACKENDS = {
    "ring": "Ring",
    "recursive-doubling": "RecursiveDoubling",
    "halving-doubling": "HalvingDoubling",
    "binary-tree": "BinaryTree",
    "hierarchical-ring": "HierarchicalRing",
    "direct": "Direct",
}
SHM_BACKENDS = {"shm": {}, "shm-one-shot": {"mode": "one-shot"}, "shm-two-shot": {"mode": "two-shot"}, "shm-dist-barrier": {"mode": "two-shot", "barrier": "dist"}, "shm-small-slots": {"capacity": 256}, "shm-numpy": {"compiled": False}, "shm-numpy-two-shot": {"compiled": False, "mode": "two-shot"}}
REDUCING = ("allreduce", "reduce_scatter", "reduce")


@dataclass(frozen=True)
class Case:
    backend: str  # a SCHEDULE_BACKENDS or SHM_BACKENDS key, or "wrong-hop"
    collective: str
    ranks: int
    count: int  # per rank: the vector (allreduce, broadcast, reduce), the output (reduce_scatter), the input (allgather), a block (alltoall)
    dtype: str = "float32"
    op: str = "sum"
    inplace: bool = False
    strided: bool = False  # pass a non-contiguous tensor (allreduce)
    record: bool = False
    root: int = 0

    @property
    def seed(self) -> int:
        return zlib.crc32(repr(self).encode())

    def label(self) -> str:
        extra = "".join([" in-place" if self.inplace else "", " strided" if self.strided else "", f" root {self.root}" if self.collective in ("broadcast", "reduce") else ""])
        return f"{self.backend} {self.collective} N={self.ranks} count={self.count} {self.dtype} {self.op}{extra}"


# -- inputs ------------------------------------------------------------------------


def input_count(case: Case) -> int:
    return case.count * (case.ranks if case.collective in ("reduce_scatter", "alltoall") else 1)


@functools.lru_cache(maxsize=4096)
def inputs(case: Case, rank: int) -> np.ndarray:
    """Rank ``rank``'s input: random values of the case's dtype. Floats for
    prod stay near 1 (no overflow); integers cover the whole range, so sums
    and products wrap. (Cached: do not modify the array.)"""
    rng = np.random.default_rng([case.seed, rank])
    n, dtype = input_count(case), as_dtype(case.dtype)
    if not is_float(dtype):
        info = np.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max), size=n, endpoint=True, dtype=np.int64).astype(dtype)
    values = rng.uniform(0.5, 1.5, size=n) if case.op == "prod" else rng.standard_normal(n) * 100
    return values.astype(np.float32).astype(dtype) if dtype == ml_dtypes.bfloat16 else values.astype(dtype)


def to_torch(array: np.ndarray) -> torch.Tensor:
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return tensor.numpy().copy()


# -- the rank side ---------------------------------------------------------------------


def wrong_hop_executor(victim: int, hop: int):
    """An executor class whose rank ``victim`` sends the next chunk instead
    of the scheduled one in its first message of step ``hop``."""
    from collspec.impl.executor import Executor

    class WrongHop(Executor):
        def compile(self, schedule):
            plan = super().compile(schedule)
            if self.rank != victim or hop >= len(plan.steps) or not plan.steps[hop].sends:
                return plan
            step = plan.steps[hop]
            first = step.sends[0]
            wrong = dataclasses.replace(first, cells=((first.cells[0] + 1) % schedule.chunks,) + first.cells[1:])
            steps = list(plan.steps)
            steps[hop] = dataclasses.replace(step, sends=(wrong,) + step.sends[1:])
            return dataclasses.replace(plan, steps=tuple(steps))

    return WrongHop


def make_backend(name: str, rank: int, ranks: int, group, recorder):
    from collspec.impl import backends

    if name in SCHEDULE_BACKENDS:
        return getattr(backends, SCHEDULE_BACKENDS[name])(rank, ranks, recorder=recorder, group=group)
    if name in SHM_BACKENDS:
        return backends.SharedMemory(rank, ranks, group=group, **SHM_BACKENDS[name])
    if name == "wrong-hop":
        cls = type("WrongHopRing", (backends.Ring,), {"executor_class": wrong_hop_executor(victim=1, hop=2)})
        return cls(rank, ranks, recorder=recorder, group=group)
    raise ValueError(name)


def call(backend, case: Case, rank: int, device: str = "cpu") -> tuple[torch.Tensor, bool]:
    """Run the case's collective; return the output and whether an
    out-of-place input was left unchanged."""
    x = to_torch(inputs(case, rank)).to(device)
    before = x.clone()
    n, c = case.ranks, case.collective
    if c == "allreduce":
        if case.strided:
            wide = torch.zeros((x.numel(), 2), dtype=x.dtype, device=device)
            wide[:, 0] = x
            x = wide[:, 0]
        backend.all_reduce(x, case.op)
        return x, True
    if c == "reduce_scatter":
        if case.inplace:
            out = x[rank * case.count : (rank + 1) * case.count]
            backend.reduce_scatter(out, x, case.op)
            return out.clone(), True
        out = torch.empty(case.count, dtype=x.dtype, device=device)
        backend.reduce_scatter(out, x, case.op)
        return out, torch.equal(x, before)
    if c == "allgather":
        out = torch.full((n * case.count,), 7, dtype=x.dtype, device=device)
        if case.inplace:
            out[rank * case.count : (rank + 1) * case.count] = x
            backend.all_gather(out, out[rank * case.count : (rank + 1) * case.count])
            return out, True
        backend.all_gather(out, x)
        return out, torch.equal(x, before)
    if c == "broadcast":
        backend.broadcast(x, case.root)
        return x, True
    if c == "reduce":
        backend.reduce(x, case.root, case.op)
        return x, True
    if c == "alltoall":
        out = torch.empty_like(x)
        backend.all_to_all(out, x)
        return out, torch.equal(x, before)
    raise ValueError(c)


def run_cases(rank: int, world: int, cases: list[Case], device: str = "cpu") -> dict:
    """Every case on the ranks it needs; returns {case index: (output,
    input kept, traces)} for this rank's cases, where rank 0 holds every
    rank's traces of a recorded case. With ``device="cuda"`` the tensors
    live on this rank's GPU."""
    import torch.distributed as dist

    from collspec.impl.trace import Recorder, gather

    groups = {n: dist.new_group(list(range(n))) for n in range(1, world)}
    groups[world] = None
    backends: dict[tuple[str, int], object] = {}
    recorder = Recorder()
    results = {}
    for i, case in sorted(enumerate(cases), key=lambda ic: ic[1].ranks):
        if rank >= case.ranks:
            continue
        key = (case.backend, case.ranks)
        if key not in backends:
            backends[key] = make_backend(case.backend, rank, case.ranks, groups[case.ranks], recorder)
        recorder.traces.clear()
        backends[key].recorder = recorder if case.record else None
        out, kept = call(backends[key], case, rank, device)
        traces = gather(list(recorder.traces), groups[case.ranks]) if case.record else None
        results[i] = (to_numpy(out), kept, traces or [])
    for b in backends.values():
        if hasattr(b, "close"):
            b.close()
    results["shm segments"] = [b.name for b in backends.values() if hasattr(b, "name")]
    dist.barrier()
    return results


# -- the test side ----------------------------------------------------------------------


def spec_result(case: Case, rank: int):
    """What the spec says rank ``rank`` must hold (None: nothing, as a non-root of reduce)."""
    return _spec_results(case)[rank]


@functools.lru_cache(maxsize=256)
def _spec_results(case: Case) -> list:
    xs = [inputs(case, r) for r in range(case.ranks)]
    c = case.collective
    if c == "allreduce":
        return spec.all_reduce(xs, case.op)
    if c == "reduce_scatter":
        return spec.reduce_scatter(xs, case.op)
    if c == "allgather":
        return spec.all_gather(xs)
    if c == "broadcast":
        return spec.broadcast(xs, case.root)
    if c == "reduce":
        return spec.reduce(xs, case.root, case.op)
    return spec.all_to_all(xs)


def spec_problem(case: Case, rank: int, got: np.ndarray) -> str | None:
    """Why ``got`` is not what the spec allows, or None."""
    want = spec_result(case, rank)
    if want is None:  # a non-root of reduce: its tensor must be untouched
        return None if got.tobytes() == inputs(case, rank).tobytes() else "reduce changed a non-root's tensor"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got shape {got.shape} {got.dtype}, spec {want.shape} {want.dtype}"
    if case.collective not in REDUCING or not is_float(want.dtype):
        return None if got.tobytes() == want.tobytes() else f"differs from the spec at {int(np.flatnonzero(got != want)[0])}"
    xs = [inputs(case, r) for r in range(case.ranks)]
    if case.collective == "reduce_scatter":  # rank r's block of every input
        xs = [x[rank * case.count : (rank + 1) * case.count] for x in xs]
    accuracy = spec.check_reduction(got, xs, case.op)
    return None if accuracy.ok else f"outside the spec's bound: {accuracy}"


def interpreted(case: Case) -> list[np.ndarray | None]:
    """Each rank's output when the models interpreter runs the case's schedule
    over Numbers (rounded after every hop), cells cut as impl cuts them.
    Float ops and integer sum/prod/min/max; None where a rank has no output."""
    from collspec.impl.cells import cell_bounds

    algorithm = "ring" if case.backend == "wrong-hop" else case.backend
    options = {"root": case.root} if case.collective in ("broadcast", "reduce") else {}
    schedule = generate(algorithm, case.collective, case.ranks, **options)
    n, dtype = case.ranks, as_dtype(case.dtype)
    blocks = n if case.collective in ("reduce_scatter", "allgather", "alltoall") else 1
    total = case.count * (n if blocks == n else 1)
    bounds = cell_bounds(total, schedule.chunks, blocks)
    lengths = np.diff(bounds)
    width = int(lengths.max()) if len(lengths) else 0
    layout = schedule.layout

    def padded(vector: np.ndarray) -> np.ndarray:
        out = np.zeros((schedule.chunks, width), dtype=dtype)
        for c in range(schedule.chunks):
            out[c, : lengths[c]] = vector[bounds[c] : bounds[c + 1]]
        return out

    values = []
    for r in range(n):
        x = inputs(case, r)
        if case.collective == "allgather":
            full = np.zeros(total, dtype=dtype)
            full[r * case.count : (r + 1) * case.count] = x
            x = full
        values.append(padded(x)[layout.inputs[r]])
    state = run(schedule, Numbers(values, case.op)).state
    out = []
    for r in range(n):
        cells = layout.outputs[r]
        if len(cells) == 0:
            out.append(None)
            continue
        flat = np.concatenate([state[r, c, : lengths[c]] for c in cells]) if len(cells) else np.zeros(0, dtype)
        out.append(finish(case.op, flat, n, dtype) if case.op == "avg" else flat)
    return out


def suicide_recorder(victim: int, hop: int):
    """A recorder that SIGKILLs rank ``victim``'s process as it sends in ``hop``."""
    from collspec.impl.trace import Recorder

    class Suicide(Recorder):
        def record(self, trace, event):
            if trace.rank == victim and event.step == hop:
                os.kill(os.getpid(), signal.SIGKILL)
            super().record(trace, event)

    return Suicide()


def kill_mid_collective(rank: int, world: int, victim: int, hop: int, count: int) -> str:
    """Ring all-reduce with a recorder that kills ``victim`` at ``hop``."""
    from collspec.impl.backends import Ring

    ring = Ring(rank, world, recorder=suicide_recorder(victim, hop))
    x = torch.ones(count)
    ring.all_reduce(x)
    return "finished"  # must not happen: a peer died mid-collective
