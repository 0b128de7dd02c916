"""A bit-vector program's schedule is the enumeration of its 20-bit terms
only where N, the options, the steps and the slots are 20-bit values:
outside them :meth:`Program.schedule` refuses (it once built the terms
of another N: 2^19 + 10 ranks evaluated as N = -524278, no steps); and
the compiled code it runs follows the generator's functions as they are
now (a changed helper is never served old code) for a program built after
the change, while a program object already used keeps, for its schedules
and its proofs alike, the terms of its first evaluation."""

from __future__ import annotations

import pytest

from collspec.models.generators import nccl_pat
from collspec.models.program import RefinementError, symbolic


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


def _proved_dst(made, n, s, r, j):
    """The destination a proof of ``made`` reads at one point: its symbolic
    view's term with N, s, r, j given, simplified to a number."""
    import z3

    sym, _ = symbolic(made)
    t = sym.transfer(n, s, r, j)
    return z3.simplify(t.dst).as_signed_long()


def test_a_program_objects_proofs_and_schedules_read_one_evaluation_of_its_functions(monkeypatch):
    """A helper changed after a program object's first use changes neither
    its schedules nor its proofs (both read the terms kept with the object);
    a program built after the change gets the change in both."""
    made = nccl_pat.pat_program("reduce_scatter", chunk=1, count=1)
    before = _cells(made.schedule(12))
    s, step = next((k, step) for k, step in enumerate(made.schedule(12).steps) if len(step.src))
    r, dst = int(step.src[0]), int(step.dst[0])
    assert _proved_dst(made, 12, s, r, 0) == dst
    original = nccl_pat.hop
    monkeypatch.setattr(nccl_pat, "hop", lambda *a: (lambda s, b, u: (s, b * 2, u))(*original(*a)))
    assert _cells(made.schedule(12)) == before
    assert _proved_dst(made, 12, s, r, 0) == dst
    fresh = nccl_pat.pat_program("reduce_scatter", chunk=1, count=1)
    assert _cells(fresh.schedule(12)) != before
    assert _proved_dst(fresh, 12, s, r, 0) != dst
    moved = fresh.schedule(12).steps[s]
    assert int(moved.dst[list(moved.src).index(r)]) == _proved_dst(fresh, 12, s, r, 0)
