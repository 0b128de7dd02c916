"""nccl-tree's all-reduce at every chunk and count (1 channel): the row
:mod:`collspec.proofs.nccl_tree_sizes` (``--full`` only). Its program is the
generator's; bugs planted from the third chunk or past the first element of
a chunk fail the named lemma with a counterexample, while the per-N check
at the proofs' fixed options (chunk 1, count 2) cannot see them. Each
planted-bug test decides only its lemma (the unchanged program's proof is
``collspec prove --full``'s)."""

from __future__ import annotations

import dataclasses

import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_tree
from collspec.models.program import Transfer
from collspec.proofs import nccl_tree_sizes
from collspec.proofs.solver import FAILED, Row, decide, within
from collspec.proofs.suite import rlimit_of, suite

ORIGINAL = nccl_tree.sizes_program
FIELDS = [f.name for f in dataclasses.fields(Transfer)]


def test_the_row_is_full_only_with_its_scope():
    rows = {p.name: p.scope for p in suite(full=True)}
    assert rows[nccl_tree_sizes.ROW] == "all N in 2..65536, chunk in 1..131072, count in 0..131072, 1 channel (tree 0)"
    assert nccl_tree_sizes.ROW not in {p.name for p in suite()}


def _plain(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


@pytest.mark.parametrize("chunk, count", [(1, 1), (1, 5), (3, 7), (2, 6), (5, 3), (4, 0), (131072, 1)])
def test_the_proved_program_is_the_generators(chunk, count):
    for n in (1, 2, 3, 6, 17):
        proved = nccl_tree.sizes_program(chunk, count).schedule(n)
        built = generate("nccl-tree", "allreduce", n, channels=1, chunk=chunk, count=count)
        assert (proved.chunks, _plain(proved)) == (built.chunks, _plain(built))
    assert _plain(nccl_tree_sizes.base_program().schedule(5)) == _plain(generate("nccl-tree", "allreduce", 5, **nccl_tree_sizes.BASE))


def test_the_row_asks_the_lemmas_then_the_one_cell_induction():
    names = [q.name.split(":")[0] for q in nccl_tree_sizes.lemmas()]
    assert names == ["shape", "copy (k, e)", "only copies", "rounds", "range", "cells", "cells"]
    assert nccl_tree_sizes.base_program().params == {}
    assert nccl_tree_sizes.base_program().meta == {"channels": 1, "chunk": 1, "count": 1}
    assert [q.name.split(":")[0] for q in nccl_tree_sizes.base_queries()][-2:] == ["base", "end"]


def _decide(prefix):
    """Decide the row's lemma named ``prefix...`` alone, in the row's scope and limit."""
    (query,) = [q for q in nccl_tree_sizes.lemmas() if q.name.startswith(prefix)]
    with within(Row(nccl_tree_sizes.ROW, nccl_tree_sizes.scope(), rlimit_of(nccl_tree_sizes.ROW, True))):
        return decide(query)


def down_late_from_the_third_chunk(chunk=1, count=1):
    """The program whose sends down (roles 1, 2) of chunks k >= 2 (cells from
    2 chunk on) happen one step late: the last one never reaches the leaves."""
    made = ORIGINAL(chunk, count)

    def transfer(n, s, r, j):
        now, late = made.transfer(n, s, r, j), made.transfer(n, s - 1, r, j)
        down = j % nccl_tree.ROLES != 0
        use_late = ix.both(down, late.active, late.dst_chunk >= chunk + chunk)
        drop = ix.both(down, now.dst_chunk >= chunk + chunk)
        picked = Transfer(*(ix.where(use_late, getattr(late, f), getattr(now, f)) for f in FIELDS))
        return dataclasses.replace(picked, active=ix.where(use_late, late.active, ix.both(now.active, ix.negate(drop))))

    return dataclasses.replace(made, transfer=transfer)


def test_a_bug_from_the_third_chunk_fails_the_copy_lemma(monkeypatch):
    monkeypatch.setattr(nccl_tree, "sizes_program", down_late_from_the_third_chunk)
    assert check(nccl_tree.sizes_program(1, 2).schedule(4)).ok  # two chunks: what the count-2 row proves is unchanged
    assert not check(nccl_tree.sizes_program(1, 3).schedule(4)).ok
    outcome = _decide("copy (k, e)")
    assert outcome.status == FAILED and outcome.reason == "counterexample"
    assert outcome.counterexample["k"] >= 2


def up_early_past_the_first_element(chunk=1, count=1):
    """The program whose sends up (role 0) of elements e >= 1 of a chunk
    (slots 3 e, e >= 1) happen one step early, before the children's
    contributions arrive: only with chunk > 1."""
    made = ORIGINAL(chunk, count)

    def transfer(n, s, r, j):
        now, early = made.transfer(n, s, r, j), made.transfer(n, s + 1, r, j)
        bad = ix.both(j % nccl_tree.ROLES == 0, j >= nccl_tree.ROLES)
        return Transfer(*(ix.where(bad, getattr(early, f), getattr(now, f)) for f in FIELDS))

    return dataclasses.replace(made, transfer=transfer)


def test_a_bug_past_the_first_element_fails_the_copy_lemma(monkeypatch):
    monkeypatch.setattr(nccl_tree, "sizes_program", up_early_past_the_first_element)
    assert check(nccl_tree.sizes_program(1, 4).schedule(5)).ok  # chunk 1: one element per chunk, unchanged
    assert not check(nccl_tree.sizes_program(2, 4).schedule(5)).ok
    outcome = _decide("copy (k, e)")
    assert outcome.status == FAILED and outcome.reason == "counterexample"
    assert outcome.counterexample["e"] >= 1 and outcome.counterexample["chunk"] >= 2


def test_a_send_moved_to_a_later_step_fails_the_only_copies_lemma(monkeypatch):
    """The late sends of the third-chunk bug are transfers no copy makes."""
    monkeypatch.setattr(nccl_tree, "sizes_program", down_late_from_the_third_chunk)
    outcome = _decide("only copies")
    assert outcome.status == FAILED and outcome.reason == "counterexample"
    assert outcome.counterexample["j"] % nccl_tree.ROLES != 0  # a send down
