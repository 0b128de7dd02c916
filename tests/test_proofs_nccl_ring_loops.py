"""nccl-ring's all-N rows with every chunk, alignment and count
(:mod:`collspec.proofs.nccl_ring_loops`): bugs planted in the generator's
pieces that only several loops or a partial last loop show must fail the
row, at the lemma that covers them, with a counterexample; the one-loop
program (chunk 1, count N) that the rows proved before passes with the
same bugs."""

from __future__ import annotations

import z3

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_ring
from collspec.proofs import induction, invariants, nccl_ring_loops
from collspec.proofs.scope import Scope
from collspec.proofs.solver import FAILED, PROVED, Query, Row, decide, run_queries, within
from collspec.proofs.suite import run_proof, suite
from proof_results import result_of


def row(name):
    (proof,) = [p for p in suite() if p.name == name]
    return run_proof(proof)


def one_loop_proof():
    """The induction the all-reduce row ran before: 1 channel, chunk 1, count N (one loop)."""
    with within(Row("one loop", Scope.all_n(), 60_000_000)):  # 26.5 million units with the rounding bug in the terms
        return run_queries(induction.queries(nccl_ring.one_loop_program("allreduce"), invariants.ring_allreduce(0)))


def test_the_rows_prove_every_collective_and_name_their_lemmas():
    rows = {p.name: p for p in suite()}
    for collective in nccl_ring_loops.PROOFS:  # nothing patched: the session's one run of each row (tests/proof_results.py)
        result = result_of(rows[f"nccl-ring.{collective}-exactly-once"])
        assert result.status == PROVED, (collective, result.message)
        names = [q[0] for q in result.queries]
        assert any(name.startswith("composition: ") for name in names)
        assert any(name.startswith(("cells: ", "blocks: ")) for name in names)
        assert any(name.startswith("end: ") for name in names)
    names = [q[0] for q in result_of(rows["nccl-ring.allreduce-exactly-once"]).queries]
    assert "rounding: N chunkCount covers the loop (min(rem, N chunkCount) = min(rem, N chunk))" in names


def test_last_loop_rounded_down_from_17_fails_the_allreduce_row(monkeypatch):
    """The last loop's chunkCount divUp(rem, N) taken as rem div N for N >= 17:
    its last elements are never sent. One loop of N chunk elements never has
    a partial loop, so the one-loop proof passes; so does the per-N check to 16."""
    original = nccl_ring.chunk_count

    def rounded_down(layout, n, rem):
        down = nccl_ring._align_up(ix.floordiv(rem, n), layout.align)
        return ix.where(ix.both(n >= 17, rem < n * layout.chunk), down, original(layout, n, rem))

    monkeypatch.setattr(nccl_ring, "chunk_count", rounded_down)
    assert check(generate("nccl-ring", "allreduce", 16, channels=1, chunk=2, count=45)).ok
    assert not check(generate("nccl-ring", "allreduce", 17, channels=1, chunk=2, count=45)).ok
    assert one_loop_proof().status == PROVED
    result = row("nccl-ring.allreduce-exactly-once")
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0] == "rounding: chunkCount is in 1..chunk"
    assert result.counterexample["N"] >= 17 and result.counterexample["rem"] < result.counterexample["N"] * result.counterexample["chunk"]


def test_second_loop_one_element_late_fails_the_allreduce_row(monkeypatch):
    """Loop 1 starts one element after N chunk: a bug only several loops
    show (the one-loop proof and one-loop schedules pass)."""
    original = nccl_ring.loop_base
    monkeypatch.setattr(nccl_ring, "loop_base", lambda layout, n, loop: original(layout, n, loop) + ix.where(loop == 1, 1, 0))
    for n in (2, 5):
        assert check(generate("nccl-ring", "allreduce", n, channels=1, chunk=1, count=n)).ok
    assert not check(generate("nccl-ring", "allreduce", 3, channels=1, chunk=1, count=7)).ok
    assert one_loop_proof().status == PROVED
    result = row("nccl-ring.allreduce-exactly-once")
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0] == "loops: every loop has elements left"


def test_reduce_scatter_second_loop_one_element_late_fails_its_row(monkeypatch):
    """The same bug written into the transfer itself (loop 1's cells one
    later): the composition query sees the transfer is no longer the loop
    function at its base."""
    original = nccl_ring._block_ring

    def mutated(layout, reduce):
        steps, transfer, label = original(layout, reduce)

        def late(n, s, r, j):
            t = transfer(n, s, r, j)
            cell = t.src_chunk + ix.where(ix.floordiv(s, n - 1) == 1, 1, 0)
            return nccl_ring.Transfer(t.active, t.dst, cell, cell, t.op)

        return steps, late, label

    monkeypatch.setattr(nccl_ring, "_block_ring", mutated)
    monkeypatch.setitem(nccl_ring.BUILDERS, "reduce_scatter", lambda layout: mutated(layout, True))
    assert check(generate("nccl-ring", "reduce_scatter", 4, channels=1, chunk=1, count=1)).ok
    assert not check(generate("nccl-ring", "reduce_scatter", 4, channels=1, chunk=1, count=3)).ok
    result = row("nccl-ring.reduce_scatter-exactly-once")
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0].startswith("composition: ")
    assert result.counterexample["s"] >= result.counterexample["N"] - 1


def test_opaque_products_only_generalise():
    """A product replaced by an uninterpreted function: congruence still
    holds, anything that needs multiplication itself no longer follows."""
    k, k2, cc = z3.Ints("k k2 cc")
    congruent = nccl_ring_loops.opaque_products(Query("congruence", [k == k2, cc >= 1], k * cc == k2 * cc), cc)
    assert "times" in congruent.claim.sexpr() and decide(congruent).status == PROVED
    arithmetic = nccl_ring_loops.opaque_products(Query("monotone", [k >= 1, cc >= 1], k * cc >= cc), cc)
    assert decide(arithmetic).status == FAILED
    assert decide(Query("monotone", [k >= 1, cc >= 1], k * cc >= cc)).status == PROVED


def test_a_slot_short_from_17_in_the_generators_program_fails_the_row(monkeypatch):
    """The generator's program and the proved one are built by one
    constructor (``program_of``): a bug there, here one slot short for
    N >= 17, breaks the generator's schedule and fails the row. (When the
    generator built its own Program, the row stayed proved with this bug.)"""
    from dataclasses import replace

    original = nccl_ring.program_of

    def short(layout, *args, **kwargs):
        made = original(layout, *args, **kwargs)
        return replace(made, width=lambda n: layout.channels * layout.width(n) - ix.where(n >= 17, 1, 0))

    monkeypatch.setattr(nccl_ring, "program_of", short)
    assert check(generate("nccl-ring", "allreduce", 16, channels=1, chunk=4, count=16 * 8 + 3)).ok
    assert not check(generate("nccl-ring", "allreduce", 17, channels=1, chunk=4, count=17 * 8 + 3)).ok
    result = row("nccl-ring.allreduce-exactly-once")
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0] == "rounding: chunkCount is at most the width"
    assert result.counterexample["N"] >= 17


def test_a_channel_split_the_rows_do_not_cover_is_refused(monkeypatch):
    """The channels rows cover every split into parts >= 0 that add up to
    the count; the generator refuses a host split outside that (here one
    element too many on channel 0) rather than build a schedule no row covers."""
    import pytest

    from collspec.models.generators import nccl_host
    from collspec.models.layout import ScheduleError

    original = nccl_host.split_terms
    monkeypatch.setattr(nccl_host, "split_terms", lambda *args: [p + (h == 0) for h, p in enumerate(original(*args))])
    with pytest.raises(ScheduleError, match=r"nccl-ring: the channel split of 20 elements at N=3 is \[21, 0\], not 2 parts >= 0 that add up to the count"):
        generate("nccl-ring", "allreduce", 3, channels=2, count=20)
