"""Program.enumerate evaluates the compiled Z3 term on a block of steps at
once; it must build exactly the steps that evaluating the Python transfer
function on numpy one step at a time (``s`` a Python int) builds: the two
evaluations of one program agree."""

from __future__ import annotations

import numpy as np
import pytest

from collspec.models import indexing as ix
from collspec.models.generators import PROGRAMS
from collspec.models.program import Program, Transfer
from collspec.models.schedule import Step

PAIRS = [(a, c) for a, table in PROGRAMS.items() for c in table]
OPTIONS = {("hierarchical-ring", "allreduce"): {"size": 3}}


def step_by_step(program: Program, n: int) -> list[Step]:
    """The reference: one evaluation per step with a scalar ``s``."""
    ranks = np.arange(n, dtype=np.int64)[:, None]
    slots = np.arange(int(program.width(n)), dtype=np.int64)[None, :]
    shape = (n, slots.shape[1])
    steps = []
    for s in range(int(program.steps(n))):
        t = program.transfer(n, s, ranks, slots)
        active = np.broadcast_to(np.asarray(t.active, dtype=bool), shape)
        columns = [np.broadcast_to(np.asarray(v, dtype=np.int64), shape)[active] for v in (ranks, t.dst, t.src_chunk, t.dst_chunk, t.op)]
        phase, name = program.label(n, s)
        steps.append(Step.of(*columns, phase=phase, name=name))
    return steps


def same_steps(got: list[Step], want: list[Step]) -> None:
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert (a.phase, a.name) == (b.phase, b.name), k
        for field in ("src", "dst", "src_chunk", "dst_chunk", "op"):
            x, y = getattr(a, field), getattr(b, field)
            assert x.dtype == y.dtype and np.array_equal(x, y), (k, field)


@pytest.mark.parametrize("algorithm, collective", PAIRS, ids=[f"{a}-{c}" for a, c in PAIRS])
@pytest.mark.parametrize("block", [1, 7, 1 << 18])
def test_block_enumeration_builds_the_steps_of_step_by_step(algorithm, collective, block):
    program = PROGRAMS[algorithm][collective](**OPTIONS.get((algorithm, collective), {}))
    for n in (1, 2, 3, 5, 6, 8, 9, 12, 13, 24):
        if algorithm == "hierarchical-ring" and n % 3:
            continue
        same_steps(program.enumerate(n, block=block), step_by_step(program, n))


def test_a_block_with_an_index_past_int32_keeps_step_of_conversions():
    """A block whose values do not fit the narrow index type is split step
    by step through Step.of, which widens only the steps that need it."""
    big = 1 << 40

    def transfer(n, s, r, j):
        return Transfer(True, (r + 1) % n, ix.where(s == 1, big, 0) + 0 * r, 0, 0)

    program = Program("t", "allgather", lambda n: 1, lambda n: 3, lambda n: 1, transfer, lambda n, s: (None, f"step {s}"), lambda: program)
    got = program.enumerate(4)
    assert [s.src_chunk.dtype for s in got] == [np.int32, np.int64, np.int32]
    same_steps(got, step_by_step(program, 4))
