"""A bit-vector program's schedule is the enumeration of its 20-bit terms
only where N, the options, the steps and the slots are 20-bit values:
outside them :meth:`Program.schedule` refuses (it once built the terms
of another N: 2^19 + 10 ranks evaluated as N = -524278, no steps); and
the compiled code it runs follows the generator's functions as they are
now (a changed helper is never served old code)."""

from __future__ import annotations

import pytest

from collspec.models.generators import nccl_pat
from collspec.models.program import RefinementError


@pytest.mark.parametrize("n", [(1 << 19) + 10, (1 << 20) + 10])
def test_a_rank_count_past_the_20_bit_vectors_is_refused(n):
    with pytest.raises(RefinementError, match=rf"N = {n} .*20-bit vectors"):
        nccl_pat.pat_program("reduce_scatter", chunk=1, count=1).schedule(n)


def _cells(schedule):
    return [(int(r), int(d), int(c)) for step in schedule.steps for r, d, c in zip(step.src, step.dst, step.src_chunk)]


def test_a_changed_generator_helper_gets_new_compiled_code(monkeypatch):
    """The compiled code is kept by the Z3 terms' ids: a helper changed after
    a schedule was built gives other terms, so other code, and changing it
    back gives the first schedule again."""
    before = _cells(nccl_pat.generate_pat("reduce_scatter", 12, chunk=1, count=1))
    original = nccl_pat.hop

    def farther(n, t, e, aggregation, post, reduce):
        s, b, used = original(n, t, e, aggregation, post, reduce)
        return s, b + (n - n), used  # the same values, other terms

    monkeypatch.setattr(nccl_pat, "hop", farther)
    assert _cells(nccl_pat.generate_pat("reduce_scatter", 12, chunk=1, count=1)) == before
    monkeypatch.setattr(nccl_pat, "hop", lambda *a: (lambda s, b, u: (s, b * 2, u))(*original(*a)))
    assert _cells(nccl_pat.generate_pat("reduce_scatter", 12, chunk=1, count=1)) != before
    monkeypatch.setattr(nccl_pat, "hop", original)
    assert _cells(nccl_pat.generate_pat("reduce_scatter", 12, chunk=1, count=1)) == before


@pytest.mark.xfail(strict=True, reason="Program.terms() keeps the terms of the program object's first evaluation: a schedule "
                   "of a program object built before a helper changed runs the old terms, while a proof of the same object "
                   "(models.program.symbolic) evaluates the new ones; rebuilding the terms on every schedule (20-30 ms a call) "
                   "or having the proofs read Program.terms() would close it")
def test_a_program_object_built_before_a_helper_changed_follows_the_change(monkeypatch):
    made = nccl_pat.pat_program("reduce_scatter", chunk=1, count=1)
    before = _cells(made.schedule(12))
    original = nccl_pat.hop
    monkeypatch.setattr(nccl_pat, "hop", lambda *a: (lambda s, b, u: (s, b * 2, u))(*original(*a)))
    assert _cells(made.schedule(12)) != before
