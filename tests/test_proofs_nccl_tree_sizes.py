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


@pytest.mark.parametrize("options", [
    {"chunk": 1, "count": 1}, {"chunk": 1, "count": 5}, {"chunk": 3, "count": 7}, {"chunk": 2, "count": 6}, {"chunk": 5, "count": 3},
    {"chunk": 4, "count": 0}, {"chunk": 131072, "count": 1}, {"count": 10_000, "protocol": "ll128"}, {"count": 10_000, "protocol": "ll"},
])
def test_the_proved_program_is_the_generators(options):
    """A 1-channel call (a given chunk or NCCL's) is enumerated from the
    row's terms; they agree with :func:`tree_program`'s own enumeration,
    the path every other option set takes."""
    for n in (1, 2, 3, 6, 17):
        built = generate("nccl-tree", "allreduce", n, channels=1, **options)
        plain = nccl_tree.tree_program(channels=1, **options).schedule(n)
        assert (built.chunks, _plain(built), built.name) == (plain.chunks, _plain(plain), plain.name)
    assert _plain(nccl_tree_sizes.base_program().schedule(5)) == _plain(generate("nccl-tree", "allreduce", 5, **nccl_tree_sizes.BASE))


@pytest.mark.parametrize("options", [{"chunk": 3, "count": 7}, {"count": 10_000, "protocol": "ll128"}])
def test_a_calls_terms_are_the_rows_terms(options):
    """The program a 1-channel call enumerates has the very transfer and
    shape terms the row proves (chunk and count variables), given values."""
    made, proved = nccl_tree.call_program(5, channels=1, **options), nccl_tree_sizes.program()
    assert set(made.params) == {"chunk", "count"}
    assert all(a.eq(b) for a, b in zip(made.terms().transfer + made.terms().shape, proved.terms().transfer + proved.terms().shape))


def _rounds_floored_from_1000_elements(original):
    """TreeLayout.rounds rounding down on plain ints from 1000 elements (a
    bug on the integer path only: the row's terms never take it)."""

    def rounds(self, n):
        got = original(self, n)
        return got - 1 if isinstance(got, int) and self.count >= 1000 and self.count % self.chunks(n)[0] else got

    return rounds


@pytest.mark.parametrize("options", [{"chunk": 3, "count": 1000}, {"count": 10_000, "protocol": "ll"}])
def test_a_bug_on_the_integer_path_does_not_reach_a_proved_call(monkeypatch, options):
    """The row proves the terms with chunk and count variables; a user's
    1-channel call (a given chunk, or NCCL's at N) is enumerated from those
    terms, not from the integer path that a bug could change unseen."""
    monkeypatch.setattr(nccl_tree.TreeLayout, "rounds", _rounds_floored_from_1000_elements(nccl_tree.TreeLayout.rounds))
    assert not check(nccl_tree.tree_program(channels=1, **options).schedule(4)).ok  # the bug is live on the integer path
    assert check(generate("nccl-tree", "allreduce", 4, channels=1, **options)).ok


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


def _dropped(bad):
    """The program with the transfers where ``bad(n, j, transfer, chunk, count)`` holds made idle."""

    def program(chunk=1, count=1):
        made = ORIGINAL(chunk, count)

        def transfer(n, s, r, j):
            now = made.transfer(n, s, r, j)
            return dataclasses.replace(now, active=ix.both(now.active, ix.negate(bad(n, j, now, chunk, count))))

        return dataclasses.replace(made, transfer=transfer)

    return program


def test_a_send_down_lost_in_the_last_short_chunk_fails_the_copy_lemma(monkeypatch):
    """The last element of a short last chunk (chunk past the vector's end) is not sent down."""
    last = _dropped(lambda n, j, t, chunk, count: ix.both(j % nccl_tree.ROLES != 0, j >= nccl_tree.ROLES, t.dst_chunk == count - 1,
                                                          t.dst_chunk - ix.floordiv(j, nccl_tree.ROLES) + chunk > count))
    monkeypatch.setattr(nccl_tree, "sizes_program", last)
    assert check(nccl_tree.sizes_program(3, 6).schedule(5)).ok  # chunk 3 divides 6: no short chunk
    assert not check(nccl_tree.sizes_program(3, 5).schedule(5)).ok
    outcome = _decide("copy (k, e)")
    assert outcome.status == FAILED and outcome.reason == "counterexample"
    assert outcome.counterexample["e"] >= 1


def test_one_step_short_from_100_ranks_fails_the_shape_lemma(monkeypatch):
    """steps(n) one short from N = 100 with two chunks or more (the last
    chunk's last sends down never happen); the one-cell program is unchanged."""

    def short(chunk=1, count=1):
        made = ORIGINAL(chunk, count)
        return dataclasses.replace(made, steps=lambda n: ix.where(n >= 100, ix.where(count > chunk, made.steps(n) - 1, made.steps(n)), made.steps(n)))

    monkeypatch.setattr(nccl_tree, "sizes_program", short)
    assert check(nccl_tree.sizes_program(2, 5).schedule(99)).ok
    assert not check(nccl_tree.sizes_program(2, 5).schedule(100)).ok
    outcome = _decide("shape")
    assert outcome.status == FAILED and outcome.reason == "counterexample"
    assert outcome.counterexample["N"] >= 100
