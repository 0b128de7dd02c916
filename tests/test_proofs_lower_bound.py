"""The SCCL-style lower bound: no ring all-reduce in fewer than 2(N-1)
steps, one in 2(N-1); and the encoding agrees with the interpreter on the
real ring schedule, so the unsat answer is about the right question."""

from __future__ import annotations

import pytest
import z3

from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.schedule import REDUCE
from collspec.proofs.lower_bound import encode, lower_bound
from collspec.proofs.solver import PROVED


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_two_n_minus_two_steps_are_needed_and_enough(n):
    outcome = lower_bound(n)
    assert outcome.status == PROVED, outcome.message
    assert [status for _, status, _ in outcome.queries] == [PROVED, PROVED]


def pin(encoding, schedule, ops: bool = True) -> None:
    """Fix the encoding's choices to the transfers of ``schedule`` (and their ops)."""
    n = encoding.ranks
    for t, step in enumerate(schedule.steps):
        chosen = {(int(step.src[i]), int(step.src_chunk[i])): int(step.op[i]) for i in range(len(step))}
        for p in range(n):
            for k in range(n):
                encoding.solver.add(encoding.carry[t][p][k] == ((p, k) in chosen))
            chosen_ops = [op for (src, _), op in chosen.items() if src == p]
            if ops and chosen_ops:
                encoding.solver.add(encoding.reduce[t][p] == (chosen_ops[0] == REDUCE))


@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("exact", [True, False])
def test_the_encoding_accepts_the_real_ring_and_rejects_it_one_hop_short(n, exact):
    ring = generate("ring", "allreduce", n)
    full = encode(n, len(ring.steps), exact)
    pin(full, ring)
    assert full.solver.check() == z3.sat
    short = encode(n, len(ring.steps) - 1, exact)
    pin(short, type(ring)(ring.collective, n, n, ring.steps[:-1]))
    assert short.solver.check() == z3.unsat


def test_the_encoding_rejects_a_schedule_that_counts_a_rank_twice_only_when_exact():
    """An all-gather that reduces instead of copying double-counts; exact
    counting must refuse it, the generous (set) version must not."""
    n = 3
    ring = generate("ring", "allreduce", n)
    for exact, expected in ((True, z3.unsat), (False, z3.sat)):
        encoding = encode(n, len(ring.steps), exact)
        pin(encoding, ring, ops=False)
        encoding.solver.add([encoding.reduce[t][p] for t in range(len(ring.steps)) for p in range(n)])
        assert encoding.solver.check() == expected


def test_the_synthesised_schedule_is_a_valid_ring_allreduce():
    encoding = encode(4, 6, exact=True)
    assert encoding.solver.check() == z3.sat
    schedule = encoding.schedule(encoding.solver.model())
    result = check(schedule)
    assert result.ok, [str(v) for v in result.violations]
    assert len(schedule.steps) == 6
    assert all((int(s) + 1) % 4 == int(d) for step in schedule.steps for s, d in zip(step.src, step.dst))
