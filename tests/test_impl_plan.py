"""A rank's plan of a schedule, and the executor on local transfers.

Schedules whose transfers all stay on one rank need no process group, so
the executor's step machinery (snapshots, listed-order writes, reductions)
is tested here in-process, bit for bit against the models interpreter.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch

from collspec.impl import plan as plan_module
from collspec.impl.cells import cell_bounds
from collspec.impl.executor import Executor
from collspec.impl.plan import compile_plan
from collspec.impl.reduction import Reduction
from collspec.impl.trace import Recorder, check_traces
from collspec.models.algebras import Numbers
from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.interpreter import run
from collspec.models.schedule import COPY, REDUCE, Schedule, Step


def test_ring_plan_follows_the_schedule():
    ring = generate("ring", "allreduce", 4)
    plan = compile_plan(ring, 1)
    for index, step in enumerate(ring.steps):
        p = plan.steps[index]
        (send,), (recv,) = p.sends, p.recvs
        assert (send.peer, send.cells) == (2, (int(step.src_chunk[1]),))
        assert (recv.peer, recv.cells) == (0, (int(step.dst_chunk[0]),))
        if step.phase == "reduce-scatter":  # received into scratch, reduced as soon as it arrives
            assert not recv.direct and [(a.cell, a.op, a.early) for a in p.applies] == [(recv.cells[0], REDUCE, True)]
        else:  # all-gather: received straight into the cell
            assert recv.direct and p.applies == ()


def test_several_chunks_to_one_peer_travel_as_one_message_in_listed_order():
    hd = generate("halving-doubling", "allreduce", 4)
    first = compile_plan(hd, 0).steps[0]
    assert [(m.peer, m.cells) for m in first.sends] == [(2, (2, 3))]
    assert [(m.peer, m.cells) for m in first.recvs] == [(2, (0, 1))]


def test_several_reduces_into_one_cell_wait_and_apply_in_listed_order():
    direct = generate("direct", "allreduce", 3)  # rank 0 receives from 1 and 2 into its only cell
    (step,) = compile_plan(direct, 0).steps
    assert [(a.message, a.early) for a in step.applies] == [(0, False), (1, False)]
    assert [step.recvs[a.message].peer for a in step.applies] == [1, 2]


def test_a_copy_into_a_cell_the_step_also_sends_is_not_received_in_place():
    swap = Schedule("allreduce", 2, 1, (Step.of([0, 1], [1, 0], 0, 0, COPY),))
    (step,) = compile_plan(swap, 0).steps
    assert not step.recvs[0].direct and step.applies[0].message == 0


def _local(steps, chunks=3):
    return Schedule("allreduce", 1, chunks, tuple(steps), name="local transfers")


LOCAL = {
    # a swap: both copies read start-of-step values, so both sources are snapshotted
    "swap": _local([Step.of([0, 0], [0, 0], [0, 1], [1, 0], COPY)]),
    # two reduces into cell 2 in one step, listed order, then a copy of the result
    "accumulate": _local([Step.of([0, 0], [0, 0], [0, 1], [2, 2], REDUCE), Step.of(0, 0, 2, 0, COPY)]),
    # a reduce reading a cell another transfer of the step overwrites
    "read-before-write": _local([Step.of([0, 0], [0, 0], [1, 0], [0, 1], [REDUCE, COPY])]),
}


@pytest.mark.parametrize("name", sorted(LOCAL))
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int8])
@pytest.mark.parametrize("count", [0, 3, 63])
def test_local_schedules_give_the_interpreters_bits(name, dtype, count):
    schedule = LOCAL[name]
    assert compile_plan(schedule, 0).steps[0].snapshots or name != "swap"
    rng = np.random.default_rng(count)
    x = torch.from_numpy(rng.standard_normal(count).astype(np.float32) * 50).to(dtype)
    bounds = cell_bounds(count, schedule.chunks)
    recorder = Recorder()
    buffer = x.clone()
    Executor(0, 1).run(schedule, buffer, bounds, Reduction("sum", dtype, 1), recorder)

    width = int(np.diff(bounds).max())
    cells = np.zeros((schedule.chunks, width), dtype=x.numpy().dtype)
    for c in range(schedule.chunks):
        cells[c, : bounds[c + 1] - bounds[c]] = x.numpy()[bounds[c] : bounds[c + 1]]
    state = run(schedule, Numbers([cells])).state[0]
    want = np.concatenate([state[c, : bounds[c + 1] - bounds[c]] for c in range(schedule.chunks)])
    assert buffer.numpy().tobytes() == want.tobytes()
    # these toy schedules are no all-reduce, so the checker objects to them;
    # the trace must draw exactly the same objections (it is the same schedule)
    traced = check_traces(recorder.traces)
    assert [(v.kind, v.step) for v in traced.violations] == [(v.kind, v.step) for v in check(schedule).violations]


def test_a_transfer_between_cells_of_different_sizes_is_refused():
    with pytest.raises(ValueError, match="step 0: rank 0's chunk 0 has 2 elements but rank 0's chunk 1 has 1"):
        Executor(0, 1).run(LOCAL["swap"], torch.zeros(4), cell_bounds(4, 3))


def test_a_schedule_that_reduces_needs_a_reduction_op():
    with pytest.raises(ValueError, match="reduces; give a reduction op"):
        Executor(0, 1).run(LOCAL["accumulate"], torch.zeros(3), cell_bounds(3, 3))


def test_examples():
    assert doctest.testmod(plan_module).failed == 0
