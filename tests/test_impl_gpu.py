"""The executor on CUDA tensors (and nccl). Skipped without a GPU.

With one GPU: the executor's step machinery on CUDA tensors, in-process
(schedules whose transfers stay on one rank need no process group), and
every collective at world size 1 over nccl. With two GPUs or more: the
schedules over nccl point-to-point, one rank per GPU, checked as on gloo.
"""

from __future__ import annotations

import pytest
import torch

from collspec.impl.cells import cell_bounds
from collspec.impl.executor import Executor
from collspec.impl.reduction import Reduction
from collspec.impl.trace import check_traces
from collspec.models.generators import ALGORITHMS

from impl_cases import SCHEDULE_BACKENDS, Case, interpreted, run_cases, spec_problem
from impl_harness import run_ranks, values

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32])
def test_local_steps_on_cuda_tensors_match_cpu_bits(dtype):
    from test_impl_plan import LOCAL

    for schedule in LOCAL.values():
        x = (torch.randn(63) * 50).to(dtype)
        bounds = cell_bounds(63, schedule.chunks)
        on_cpu, on_gpu = x.clone(), x.clone().cuda()
        Executor(0, 1).run(schedule, on_cpu, bounds, Reduction("sum", dtype, 1))
        Executor(0, 1).run(schedule, on_gpu, bounds, Reduction("sum", dtype, 1))
        assert torch.equal(on_gpu.cpu(), on_cpu)


def _check(cases, per_rank):
    failures = []
    for i, case in enumerate(cases):
        want = interpreted(case) if not (case.op == "avg" and not case.dtype.startswith("float")) else None
        traces = per_rank[0][i][2]
        if traces and not check_traces(traces).ok:
            failures.append(f"{case.label()}: trace check failed")
        for rank in range(case.ranks):
            got = per_rank[rank][i][0]
            why = spec_problem(case, rank, got)
            if not why and want is not None and want[rank] is not None and got.tobytes() != want[rank].tobytes():
                why = "bits differ from the interpreter's"
            if why:
                failures.append(f"{case.label()} rank {rank}: {why}")
    assert not failures, "\n".join(failures[:20])


def _cases(n: int) -> list[Case]:
    matrix = [Case(a, c, n, count, dtype, record=True) for a in SCHEDULE_BACKENDS for c in ALGORITHMS[a] for count in (0, 7, 1000) for dtype in ("int32", "float32")]
    ops = [Case("ring", "allreduce", n, 1000, dtype, op) for dtype in ("int8", "int64", "float16", "bfloat16", "float64") for op in ("sum", "prod", "min", "max", "avg")]
    return matrix + ops + [Case("ring", "allreduce", n, 1 << 20, "float32", record=True)]


def test_every_schedule_at_world_size_one_over_nccl():
    cases = _cases(1)
    _check(cases, values(run_ranks(1, run_cases, cases, "cuda", backend="nccl", timeout=240)))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="nccl point-to-point needs two GPUs or more (one rank per GPU)")
def test_schedules_over_nccl_point_to_point():
    n = min(torch.cuda.device_count(), 4)
    cases = _cases(n)
    _check(cases, values(run_ranks(n, run_cases, cases, "cuda", backend="nccl", timeout=240)))

