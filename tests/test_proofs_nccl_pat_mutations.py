"""nccl-pat's all-N row (:mod:`collspec.proofs.nccl_pat`, ``--full`` only):
their scopes, the program they prove, the restated order against the built
schedule, and bugs planted in nccl-pat's transfer function that fail them
with a counterexample. The per-N checks of small N miss each bug: that is
why the all-N rows exist. Each planted-bug test runs a row under Z3 (about
a minute of CPU or more): marked slow."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_pat
from collspec.models.program import Transfer
from collspec.proofs import nccl_pat as proof
from collspec.proofs.solver import FAILED
from collspec.proofs.suite import run_proof, suite

ORIGINAL_PROGRAM = nccl_pat.pat_program
ORIGINAL_REVERSE = nccl_pat._reverse
RS = "nccl-pat.reduce_scatter-exactly-once"


def row(name, full=True):
    (found,) = [p for p in suite(full=full) if p.name == name]
    return run_proof(found)


def one_message_too_many_from_17(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
    """nccl-pat's program with one message more per run when N >= 17: the
    last message sent again (a step too many)."""
    made = ORIGINAL_PROGRAM(collective, aggregation, chunk, count, post, dtype)

    def steps(n):
        return made.steps(n) + ix.where(n >= 17, 1, 0)

    def transfer(n, s, r, j):
        last = made.steps(n) - 1
        return made.transfer(n, ix.where(s > last, last, s), r, j)

    return dataclasses.replace(made, steps=steps, transfer=transfer)


def mirror_of_two_bits(x, width):
    """mirrorInvert over at most 2 bits: right while a step has at most 4
    messages (aggregation <= 4), wrong from aggregation 8."""
    return ORIGINAL_REVERSE(x, ix.where(width > 4, 4, width))


def test_rows_are_full_only_with_their_options_in_the_scope():
    rows = {p.name: p.scope for p in suite(full=True) if p.name in proof.OPTIONS}
    assert rows == {
        RS: "all N in 10..65536, aggregation 8, postFreq 1, chunk 1, count 1",
    }
    assert not [p for p in suite() if p.name.startswith("nccl-pat.")]


def test_the_proved_program_is_the_generators_at_the_scope_options():
    rows = {p.name: p for p in suite(full=True)}
    for name, (collective, options) in proof.OPTIONS.items():
        made = proof.program(name)
        assert made.meta == {**options, "dtype": "float32"}
        for n in (10, 17):
            assert rows[name].premises.fixed(n) == options
            assert _plain(made.schedule(n)) == _plain(generate("nccl-pat", collective, n, **options))
            # NCCL 2.30's own choice at chunk 1, count 1 from N = 10 (no aggregation or post given)
            assert _plain(made.schedule(n)) == _plain(generate("nccl-pat", collective, n, chunk=1, count=1))


def test_the_restated_order_is_the_built_schedules():
    """The invariant's send order (T(o), each message's distance) against
    the messages the generator builds."""
    for n in (10, 17, 33):
        built = proof.program(RS).schedule(n)
        for t, step in enumerate(built.steps):
            for src, dst, c in zip(step.src.tolist(), step.dst.tolist(), step.src_chunk.tolist()):
                assert int(proof.send_step(np.int64(n), np.int64((c - src) % n))) == t
                assert (dst - src) % n == int(proof.distance(np.int64(n), np.int64(t))) % n


def _plain(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


def _failed_query(result):
    return [q for q, status, _ in result.queries if status == FAILED]


@pytest.mark.slow
def test_one_message_too_many_from_17_fails_the_reduce_scatter_row(monkeypatch):
    monkeypatch.setattr(nccl_pat, "pat_program", one_message_too_many_from_17)
    options = proof.OPTIONS[RS][1]
    for n in (10, 16):
        assert check(generate("nccl-pat", "reduce_scatter", n, **options)).ok  # the per-N check up to 16 cannot see it
    assert not check(generate("nccl-pat", "reduce_scatter", 17, **options)).ok
    assert row("builtin.nccl-pat", full=False).ok  # the default bounded row (N <= 6) passes
    result = row(RS)
    assert result.status == FAILED and result.counterexample["N"] >= 17
    assert _failed_query(result) == ["adds-new: a reduce brings nothing the cell already holds"]


@pytest.mark.slow
def test_mirror_over_two_bits_passes_aggregation_4_and_fails_the_all_n_rows(monkeypatch):
    monkeypatch.setattr(nccl_pat, "_reverse", mirror_of_two_bits)
    for n in range(2, 10):  # NCCL's aggregation is at most 4 here: the bug cannot show
        assert check(generate("nccl-pat", "reduce_scatter", n, chunk=1, count=1)).ok
    assert check(generate("nccl-pat", "reduce_scatter", 17, aggregation=4, post=1, chunk=1, count=1)).ok
    assert not check(generate("nccl-pat", "reduce_scatter", 17, chunk=1, count=1)).ok
    assert row("builtin.nccl-pat", full=False).ok  # the default bounded row (N <= 6, aggregation <= 4) passes
    result = row(RS)
    assert result.status == FAILED and result.counterexample["N"] >= 10
    assert _failed_query(result) == ["adds-new: a reduce brings nothing the cell already holds"]
