"""Bugs planted in nccl-tree's transfer function fail its all-N rows with a
counterexample (the rows of :mod:`collspec.proofs.nccl_tree_allreduce`,
``--full`` only). The per-N check up to 16 misses each bug: that is why the
all-N rows exist. Each planted-bug test builds one row and decides under Z3
only the query where its bug shows (:func:`proof_results.deciding_only`;
the unchanged program's proof is ``collspec prove --full``'s)."""

from __future__ import annotations

import dataclasses

import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.generators import nccl_tree
from collspec.models.program import Transfer
from collspec.proofs import nccl_tree_allreduce
from collspec.proofs.solver import FAILED
from collspec.proofs.suite import run_proof, suite
from proof_results import deciding_only

ORIGINAL_PROGRAM = nccl_tree.tree_program
ORIGINAL_TO_RANK = nccl_tree.to_rank


def row(name):
    (proof,) = [p for p in suite(full=True) if p.name == f"nccl-tree.allreduce-{name}-exactly-once"]
    return run_proof(proof)


def down_one_step_late_from_17(made):
    """``made`` with its sends down (roles 1 and 2) one step later than
    NCCL's when N >= 17: the last chunk never reaches the leaves."""

    def transfer(n, s, r, j):
        now, late = made.transfer(n, s, r, j), made.transfer(n, s - 1, r, j)
        down = ix.both(n >= 17, j % nccl_tree.ROLES != 0)
        fields = [f.name for f in dataclasses.fields(Transfer)]
        return Transfer(*(ix.where(down, getattr(late, f), getattr(now, f)) for f in fields))

    return dataclasses.replace(made, transfer=transfer)


ORIGINAL_PROGRAM_OF = nccl_tree.program_of


def tree_1_mirrored_for_odd_n_from_17(x, n, tree):
    """Tree 1's label -> rank map uses the mirror (even N's) also for odd
    N >= 17, while rank -> label still shifts: only channels on tree 1 (the
    second of two) go wrong."""
    bad = ix.both(n >= 17, n % 2 == 1, tree == 1, x >= 0)
    return ix.where(bad, n - 1 - x, ORIGINAL_TO_RANK(x, n, tree))


def test_rows_cover_one_and_two_channels_with_their_options_in_the_scope():
    rows = {p.name: p.scope for p in suite(full=True) if p.name.startswith("nccl-tree.allreduce-")}
    assert rows == {
        "nccl-tree.allreduce-one-channel-exactly-once": "all N in 2..65536, 1 channel, chunk 1, count 2",
        "nccl-tree.allreduce-two-channels-exactly-once":
            "all N in 2..65536, 2 channels, chunk 1, count 4, parts 2, 2 (given, as NCCL 2.30 splits a collective that shares its plan)",
        "nccl-tree.allreduce-sizes-exactly-once": "all N in 2..65536, chunk in 1..131072, count in 0..131072, 1 channel (tree 0)",
    }
    assert not [p for p in suite() if p.name.startswith("nccl-tree.allreduce-")]  # --full only


def test_the_proved_program_is_the_generators_at_the_scope_options():
    rows = {p.name: p for p in suite(full=True)}
    for name, options in nccl_tree_allreduce.OPTIONS.items():
        made = nccl_tree_allreduce.program(name)
        assert made.meta == options
        for n in (2, 3, 17):
            assert rows[nccl_tree_allreduce.row(name)].premises.fixed(n) == options
            assert _plain(made.schedule(n)) == _plain(generate("nccl-tree", "allreduce", n, **options))


def _plain(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


def test_down_phase_one_step_late_from_17_fails_the_one_channel_row(monkeypatch):
    # in program_of, which builds every nccl-tree program: the row's and the one a 1-channel call runs
    monkeypatch.setattr(nccl_tree, "program_of", lambda *a, **k: down_one_step_late_from_17(ORIGINAL_PROGRAM_OF(*a, **k)))
    options = nccl_tree_allreduce.OPTIONS["one-channel"]
    for n in (2, 9, 16):
        assert check(generate("nccl-tree", "allreduce", n, **options)).ok  # the per-N check up to 16 cannot see it
    assert not check(generate("nccl-tree", "allreduce", 17, **options)).ok
    failing = "writer: the invariant's witness writes the cell whenever any slot does"
    deciding_only(monkeypatch, lambda name: name == failing)
    result = row("one-channel")
    assert result.status == FAILED and result.counterexample["N"] >= 17
    assert [q for q, status, _ in result.queries if status == FAILED] == [failing]


def test_tree_1_label_bug_from_17_fails_only_the_two_channel_row(monkeypatch):
    monkeypatch.setattr(nccl_tree, "to_rank", tree_1_mirrored_for_odd_n_from_17)
    one, two = (nccl_tree_allreduce.OPTIONS[name] for name in ("one-channel", "two-channels"))
    for n in (3, 15, 17, 19):
        assert check(generate("nccl-tree", "allreduce", n, **one)).ok  # one channel runs on tree 0 only
    for n in (3, 15):
        assert check(generate("nccl-tree", "allreduce", n, **two)).ok
    assert not check(generate("nccl-tree", "allreduce", 17, **two)).ok
    failing = "channel 1: slot j + chunk x 3 of tree 1's rank of label y is slot j of rank y, destination renamed, cells one part on [odd N, up]"
    deciding_only(monkeypatch, lambda name: name == failing)
    result = row("two-channels")
    assert result.status == FAILED
    assert result.counterexample["N"] >= 17 and result.counterexample["N"] % 2 == 1
    assert [q for q, status, _ in result.queries if status == FAILED] == [failing]


def _decide_only(name, prefix, query_name):
    """Decide the two-channel row's lemma ``query_name`` alone (its row's scope and limit)."""
    from collspec.proofs.solver import Row, decide, within

    (proof,) = [p for p in suite(full=True) if p.name == nccl_tree_allreduce.row(name)]
    (query,) = [q for q in nccl_tree_allreduce.channel_queries(name) if q.name.startswith(prefix) and q.name.endswith(query_name)]
    with within(Row(proof.name, proof.premises, proof.rlimit)):
        return decide(query)


def test_the_two_channel_row_asks_channel_0_cells_and_carries_them_to_channel_1():
    one, two = (nccl_tree_allreduce.induction_queries(name) for name in ("one-channel", "two-channels"))
    assert nccl_tree_allreduce.channel_queries("one-channel") == [] and not [q for q in one if q.pin]
    pinned = [q for q in two if q.pin]
    assert {q.name.split(":")[0] for q in pinned} == {"copy-alone", "disjoint-writers", "adds-new", "keeps-arrivals", "reduce-keeps", "writer",
                                                      "unwritten-unchanged", "nothing-else"}
    assert all(q.name.endswith("[channel 0: c < 2]") and [str(p) for p in q.pin] == ["c < 2"] for q in pinned)
    assert {q.name.split(":")[0] for q in two if not q.pin} == {"in-range", "same-index", "reads-data", "base", "end"}
    lemmas = [q.name for q in nccl_tree_allreduce.channel_queries("two-channels")]
    assert [n.split(":")[0] for n in lemmas] == ["channels", "renaming", "renaming"] + ["channel 1"] * 6
    assert [n.rsplit("[", 1)[1] for n in lemmas[3:]] == ["even N, up]", "even N, child 0]", "even N, child 1]", "odd N, up]", "odd N, child 0]",
                                                         "otherwise]"]


def test_tree_1_label_bug_from_17_fails_the_channel_1_lemma(monkeypatch):
    monkeypatch.setattr(nccl_tree, "to_rank", tree_1_mirrored_for_odd_n_from_17)
    outcome = _decide_only("two-channels", "channel 1", "[odd N, up]")
    assert outcome.status == FAILED and outcome.reason == "counterexample"
    assert outcome.counterexample["N"] >= 17 and outcome.counterexample["N"] % 2 == 1


def channel_0_copies_into_channel_1_from_17(**options):
    """nccl-tree's program whose channel-0 copies down (slots 1 and 2) land
    in channel 1's cells (one part on) when N >= 17."""
    made = ORIGINAL_PROGRAM(**options)

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        bad = ix.both(n >= 17, j >= 1, j < nccl_tree.ROLES)
        return dataclasses.replace(t, src_chunk=ix.where(bad, t.src_chunk + 2, t.src_chunk), dst_chunk=ix.where(bad, t.dst_chunk + 2, t.dst_chunk))

    return dataclasses.replace(made, transfer=transfer)


def test_a_copy_into_the_other_channel_from_17_fails_the_channels_lemma(monkeypatch):
    monkeypatch.setattr(nccl_tree, "tree_program", channel_0_copies_into_channel_1_from_17)
    outcome = _decide_only("two-channels", "channels", "")
    assert outcome.status == FAILED and outcome.reason == "counterexample"
    assert outcome.counterexample["N"] >= 17 and outcome.counterexample["j"] in (1, 2)
