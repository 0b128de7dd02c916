"""Generator bugs planted in the algorithms the induction covers beyond the
ring all-reduce: the ring's pipelined chains (broadcast, reduce) and the
rooted binary trees. Each bug is in the transfer function the generator
enumerates; the row's all-N proof must fail with a counterexample that
names N (and the root where the bug needs one). The per-N check up to 16
misses the N >= 17 ones, which is why the all-N rows exist."""

from __future__ import annotations

import dataclasses

import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.generators import tree as tree_gen
from collspec.proofs import invariants
from collspec.proofs.solver import FAILED, PROVED
from collspec.proofs.suite import run_proof, select, suite

ORIGINAL_NEXT = ix.ring_next
ORIGINAL_CHAIN_CHUNK = ix.chain_chunk
ORIGINAL_UP = tree_gen._up
ORIGINAL_DOWN = tree_gen._down
ORIGINAL_RANK = tree_gen._rank


def row(name):
    """The default suite's row called exactly ``name`` (select() matches
    substrings: "ring.reduce" is also in "nccl-ring.reduce"), run."""
    (proof,) = [p for p in suite() if p.name == name]
    return run_proof(proof)


def wrong_neighbour_from_17(r, n):
    """ring_next, except that rank N - 2 sends to rank 1 when N >= 17 (to
    rank 0 a reduce would still be right: any in-tree to the root is)."""
    return ix.where(ix.both(n >= 17, r == n - 2), (r + 3) % n, ORIGINAL_NEXT(r, n))


def drops_chunk_0_at_position_1(position, t):
    """The second sender of a chain never forwards chunk 0."""
    chunk = ORIGINAL_CHAIN_CHUNK(position, t)
    return ix.where(ix.both(position == 1, chunk == 0), -1, chunk)


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_ring_chain_wrong_neighbour_from_17_fails_the_all_n_row(monkeypatch, collective):
    monkeypatch.setattr(ix, "ring_next", wrong_neighbour_from_17)
    for n in (2, 5, 16):
        assert check(generate("ring", collective, n)).ok  # the per-N check cannot see it
    assert not check(generate("ring", collective, 17)).ok
    result = row(f"ring.{collective}-exactly-once")
    assert result.status == FAILED and result.counterexample["N"] >= 17
    assert "root" in result.counterexample


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_ring_chain_dropped_hop_fails_the_all_n_row(monkeypatch, collective):
    monkeypatch.setattr(ix, "chain_chunk", drops_chunk_0_at_position_1)
    assert not check(generate("ring", collective, 4)).ok
    result = row(f"ring.{collective}-exactly-once")
    assert result.status == FAILED and result.counterexample["N"] >= 3


def tree_up_misdirected_from_17(n, t, r, j, root):
    """The last position reduces into the position before it (a leaf that
    sends in the same step, so the sum is lost) when N >= 17. (Into an
    ancestor it would still be right: any in-tree to the root is.)"""
    up = ORIGINAL_UP(n, t, r, j, root)
    p = tree_gen._position(r, root, n)
    wrong = tree_gen._rank(p - 1, root, n)
    return dataclasses.replace(up, dst=ix.where(ix.both(n >= 17, p == n - 1), wrong, up.dst))


def tree_down_drops_the_roots_second_child(n, t, r, j, root):
    down = ORIGINAL_DOWN(n, t, r, j, root)
    p = tree_gen._position(r, root, n)
    return dataclasses.replace(down, active=ix.both(down.active, ix.either(p != 0, j == 0)))


def rank_off_by_one_at_root_5(p, root, n):
    """A renaming that is wrong only for root 5: the induction at root 0
    cannot see it; the rotation query must."""
    right = ORIGINAL_RANK(p, root, n)
    if isinstance(root, int):
        return right
    return ix.where(ix.both(root == 5, p == 1), ix.where(right + 1 < n, right + 1, 0), right)


def test_tree_reduce_wrong_parent_from_17_fails_the_all_n_row(monkeypatch):
    monkeypatch.setattr(tree_gen, "_up", tree_up_misdirected_from_17)
    for n in (2, 7, 16):
        assert check(generate("binary-tree", "reduce", n)).ok
    assert not check(generate("binary-tree", "reduce", 17)).ok
    result = row("binary-tree.reduce-exactly-once")
    assert result.status == FAILED and result.counterexample["N"] >= 17


def test_tree_broadcast_dropped_hop_fails_the_all_n_row(monkeypatch):
    monkeypatch.setattr(tree_gen, "_down", tree_down_drops_the_roots_second_child)
    assert not check(generate("binary-tree", "broadcast", 3)).ok
    result = row("binary-tree.broadcast-exactly-once")
    assert result.status == FAILED and result.counterexample["N"] >= 3


@pytest.mark.parametrize("collective", ["reduce", "broadcast"])
def test_tree_renaming_bug_at_one_root_fails_the_rotation_query(monkeypatch, collective):
    monkeypatch.setattr(tree_gen, "_rank", rank_off_by_one_at_root_5)
    result = row(f"binary-tree.{collective}-exactly-once")
    assert result.status == FAILED
    assert result.counterexample["root"] == 5
    assert result.queries[-1][0].startswith("rotation:")


#: the built-in algorithms issue 10 names (the NCCL models, added later, have their own rows)
ISSUE_10 = ("ring", "ring-seed", "direct", "hub", "binary-tree", "hierarchical-ring", "recursive-doubling", "halving-doubling")


def test_every_builtin_collective_has_an_all_n_row():
    from collspec.models.generators import ALGORITHMS

    rows = {p.name: p.scope for p in suite()}
    for algorithm in ISSUE_10:
        for collective in ALGORITHMS[algorithm]:
            assert rows[f"{algorithm}.{collective}-exactly-once"].startswith("all N"), (algorithm, collective)
    assert rows["hierarchical-ring.allreduce-exactly-once"] == "all N>=2, G in 1..65536, L in 1..65536, N = G L (G nodes of L ranks)"


@pytest.mark.parametrize("name", ["ring.broadcast", "ring.reduce", "binary-tree.reduce", "binary-tree.broadcast", "hub.broadcast", "hub.reduce"])
def test_new_rows_prove_for_every_root(name):
    result = row(f"{name}-exactly-once")
    assert result.status == PROVED and "all roots" in result.scope


def test_ring_seed_reduce_scatter_is_proved_only_against_its_declared_ownership():
    from collspec.models.generators import program
    from collspec.proofs import induction
    from collspec.proofs.solver import run_queries

    default = run_queries(induction.queries(program("ring-seed", "reduce_scatter"), invariants.ring_allreduce(1, phases=1)))
    assert default.status == FAILED and default.queries[-1][0].startswith("end:")
    declared = row("ring-seed.reduce_scatter-exactly-once")
    assert declared.status == PROVED and "rank r owns chunk r + 1" in declared.scope


def test_docs_table_names_exactly_the_all_n_rows_with_their_scopes():
    """docs/proofs.md's "Proved for all N" table lists every -exactly-once row of
    the full suite, and no other, with the scope the suite gives it."""
    import itertools
    import re
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("docs", "proofs.md").read_text()
    table = text[text.index("## Proved for all N"): text.index("Every `-exactly-once` row is one induction")]
    listed = {}
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or "exactly-once" not in cells[1]:
            continue
        scope = cells[2].strip().strip("`")
        for name in re.findall(r"`([^`]*exactly-once)`", cells[1]):
            parts = re.split(r"\{([^}]*)\}", name)
            options = [p.split(",") if i % 2 else [p] for i, p in enumerate(parts)]
            for combo in itertools.product(*options):
                listed["".join(combo)] = scope
    rows = {p.name: p.scope for p in suite(full=True) if "-exactly-once" in p.name}
    assert listed == rows


def test_tree_allreduce_with_its_phases_swapped_fails_the_all_n_row(monkeypatch):
    """Broadcast first, reduce after: every step is a legal transfer, the
    result is wrong."""
    monkeypatch.setattr(tree_gen, "_up", lambda n, t, r, j, root: ORIGINAL_DOWN(n, t, r, j, root))
    monkeypatch.setattr(tree_gen, "_down", lambda n, t, r, j, root: ORIGINAL_UP(n, t, r, j, root))
    result = row("binary-tree.allreduce-exactly-once")
    assert result.status == FAILED and "N" in result.counterexample


def _pair_mutation(change):
    from collspec.models.generators import hierarchical as gen

    original = gen.pair_transfer

    def mutated(groups, size, s, g, l, j):
        return change(groups, size, s, g, l, j, *original(groups, size, s, g, l, j))

    return gen, mutated


def test_hierarchical_ring_with_a_wrong_inter_group_neighbour_from_17_groups_fails_its_all_n_row(monkeypatch):
    """Group G - 2 sends its inter-group hops to group 1 instead of G - 1,
    only with 17 groups or more."""

    def change(groups, size, s, g, l, j, active, dst, read, written, op):
        inter = ix.both(s >= size - 1, s < size - 1 + 2 * (groups - 1))
        bad = ix.both(groups >= 17, inter, g == groups - 2)
        return active, (ix.where(bad, 1, dst[0]), dst[1]), read, written, op

    gen, mutated = _pair_mutation(change)
    monkeypatch.setattr(gen, "pair_transfer", mutated)
    for n, size in ((16, 1), (32, 2)):
        assert check(generate("hierarchical-ring", "allreduce", n, group_size=size)).ok  # 16 groups: unseen
    assert not check(generate("hierarchical-ring", "allreduce", 17, group_size=1)).ok
    result = row("hierarchical-ring.allreduce-exactly-once")
    assert result.status == FAILED and result.counterexample["groups"] >= 17


def test_hierarchical_ring_with_a_dropped_inter_group_hop_fails_its_all_n_row(monkeypatch):
    """Group 0 skips the first hop of the inter-group reduce-scatter."""

    def change(groups, size, s, g, l, j, active, dst, read, written, op):
        return ix.both(active, ix.either(s != size - 1, g != 0)), dst, read, written, op

    gen, mutated = _pair_mutation(change)
    monkeypatch.setattr(gen, "pair_transfer", mutated)
    assert not check(generate("hierarchical-ring", "allreduce", 4, group_size=2)).ok
    result = row("hierarchical-ring.allreduce-exactly-once")
    assert result.status == FAILED and result.counterexample["groups"] >= 2


def test_hierarchical_ring_formulas_are_the_ring_formulas_on_every_hop():
    """pair_transfer writes ring_next, ring_rs_send and ag_send with wrap()
    instead of %: the same value on every hop of its phase."""
    for n in range(1, 12):
        for r in range(n):
            assert int(ix.wrap(r + 1, n)) == ix.ring_next(r, n)
            assert int(ix.wrap(r - 1, n)) == ix.ring_prev(r, n)
            for s in range(n - 1):
                assert int(ix.wrap(r - 1 - s, n)) == ix.ring_rs_send(r, s, n)
                assert int(ix.wrap(r - s, n)) == ix.ag_send(ix.ring_owner, r, s, n)


# -- the NCCL models' bounded rows (builtin.nccl-*) ------------------------------------------

NCCL = {"nccl-ring": ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"), "nccl-tree": ("allreduce",), "nccl-pat": ("reduce_scatter", "allgather")}


def test_nccl_models_have_bounded_rows_in_the_default_suite_with_their_option_sets():
    from collspec.proofs.suite import BUILTIN_OPTIONS, _options

    rows = {p.name: p for p in suite()}
    for algorithm, collectives in NCCL.items():
        proof = rows[f"builtin.{algorithm}"]
        assert proof.scope == "N<=6" and ", ".join(collectives) in proof.statement
        assert algorithm in BUILTIN_OPTIONS
    assert "reversed ring" in rows["builtin.nccl-ring"].statement
    assert _options("nccl-ring", "allreduce", False, 4)[1]["rings"] == [[0, 1, 2, 3], [3, 2, 1, 0]]
    # every aggregation with every postFreq up to it: messages of 1 .. A blocks (NCCL's default chunk alone gives postFreq = A)
    assert [(o["aggregation"], o["post"]) for o in _options("nccl-pat", "allgather", False, 6)] == [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4)]
    assert {p.name: p.scope for p in suite(full=True)}["builtin.nccl-tree"] == "N<=16"


def _defaults_prove(algorithm, collective):
    from collspec.proofs.schedules import prove_schedule

    return all(prove_schedule(generate(algorithm, collective, n)).status == PROVED for n in range(1, 7))


def test_nccl_ring_ignoring_the_second_channels_ring_fails_its_bounded_row(monkeypatch):
    """Channel 1 forwards along the identity ring whatever ``rings`` says:
    invisible with the default (identity) rings, caught by the row's
    reversed-ring option set with a concrete input and wrong output."""
    from collspec.models.generators import nccl_ring

    original = nccl_ring.Layout.rank_at
    monkeypatch.setattr(nccl_ring.Layout, "rank_at", lambda self, c, i, n: ix.where(c == 1, i, original(self, c, i, n)))
    assert _defaults_prove("nccl-ring", "allreduce")
    result = row("builtin.nccl-ring")
    assert result.status == FAILED and result.counterexample["wrong_outputs"]
    assert result.queries[-1][0] == "every output of nccl-ring allreduce, 2 ranks, 2 channels, chunk 1, 5 elements is its allreduce"
    ((name, value),) = result.counterexample["inputs"].items()
    assert value == 1 and int(name.split(",")[1].rstrip("]")) >= 3  # elements 3 and 4 are channel 1's (per = 3)


def test_nccl_tree_dropping_a_copy_on_the_fourth_channel_fails_its_bounded_row(monkeypatch):
    """The broadcast down to child 1 is skipped on channel 3 (tree 1): the
    default options (one channel, as NCCL splits 12 elements) never use
    channel 3; the option set of 4 channels with parts given does."""
    from collspec.models.generators import nccl_tree

    original = nccl_tree.tree_program

    def mutated(**options):
        made = original(**options)
        width = nccl_tree.layout_of(**options).width(2)  # element slots per channel

        def transfer(n, s, r, j):
            t = made.transfer(n, s, r, j)
            dropped = ix.both(ix.floordiv(j, width * nccl_tree.ROLES) == 3, j % nccl_tree.ROLES == 2)
            return dataclasses.replace(t, active=ix.both(t.active, ix.negate(dropped)))

        return dataclasses.replace(made, transfer=transfer)

    monkeypatch.setattr(nccl_tree, "tree_program", mutated)
    assert _defaults_prove("nccl-tree", "allreduce")
    result = row("builtin.nccl-tree")
    assert result.status == FAILED and result.counterexample["wrong_outputs"]


def test_nccl_pat_dropping_a_step_at_aggregation_1_fails_its_bounded_row(monkeypatch):
    """Without aggregation (A = 1) and N >= 4, the first step's message is
    lost. NCCL's default aggregation at N = 4..6 is 2 or 4, so only the
    row's every-aggregation option sets see it."""
    from collspec.models.generators import nccl_pat

    original = nccl_pat.hop

    def mutated(n, t, i, aggregation, post, reduce):
        s, b, used = original(n, t, i, aggregation, post, reduce)
        return s, b, ix.both(used, ix.either(aggregation != 1, n < 4, t != 0))

    monkeypatch.setattr(nccl_pat, "hop", mutated)
    for collective in NCCL["nccl-pat"]:
        assert _defaults_prove("nccl-pat", collective)
    result = row("builtin.nccl-pat")
    assert result.status == FAILED and result.counterexample["wrong_outputs"]


# -- nccl-ring's all-N rows (every chunk, align and count; collspec.proofs.nccl_ring_loops) --------


def test_options_program_is_the_generators_schedule():
    """What the nccl-ring rows prove (options_program, chunk, align and
    count its parameters) is the generator's schedule on 1 channel, step for
    step, at every option value tried, roots included."""
    import numpy as np

    from collspec.models.generators import nccl_ring

    for collective in NCCL["nccl-ring"]:
        for n in range(1, 6):
            for chunk, align in ((1, 1), (2, 2), (3, 1), (4, 2)):
                for count in (0, 1, 4, 9, 13):
                    for root in range(n) if collective in ("broadcast", "reduce") else [0]:
                        options = {"root": root} if collective in ("broadcast", "reduce") else {}
                        proved = nccl_ring.options_program(collective, chunk, align, count, root).schedule(n)
                        built = generate("nccl-ring", collective, n, channels=1, chunk=chunk, align=align, count=count, **options)
                        assert (proved.chunks, len(proved.steps), proved.root, proved.link_capacity) == (built.chunks, len(built.steps), built.root, built.link_capacity)
                        for a, b in zip(proved.steps, built.steps):
                            assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("src", "dst", "src_chunk", "dst_chunk", "op")), (collective, n)


def test_nccl_ring_rows_are_all_n_with_their_options_in_the_scope():
    rows = {p.name: p.scope for p in suite()}
    options = "chunk in 1..4194304, align>=1, count>=0, align divides chunk, 1 channel on the identity ring, any number of loops"
    for collective in ("allreduce", "reduce_scatter", "allgather"):
        assert rows[f"nccl-ring.{collective}-exactly-once"] == f"all N>=2, {options}"
    for collective in ("broadcast", "reduce"):
        assert rows[f"nccl-ring.{collective}-exactly-once"] == f"all N>=2, all roots, {options}"


@pytest.mark.parametrize("collective", NCCL["nccl-ring"])
def test_nccl_ring_wrong_neighbour_from_17_fails_the_all_n_row(monkeypatch, collective):
    """Ring index N - 2 sends to N + 1 mod N instead of N - 1, only for N >= 17."""
    from collspec.models.generators import nccl_ring

    original = nccl_ring.Layout.next
    monkeypatch.setattr(nccl_ring.Layout, "next", lambda self, c, r, n: ix.where(ix.both(n >= 17, r == n - 2), (r + 3) % n, original(self, c, r, n)))
    count = nccl_ring.ONE_LOOP_COUNT[collective]
    for n in (2, 5, 16):
        assert check(generate("nccl-ring", collective, n, channels=1, chunk=1, count=count(n))).ok
    assert not check(generate("nccl-ring", collective, 17, channels=1, chunk=1, count=count(17))).ok
    result = row(f"nccl-ring.{collective}-exactly-once")
    assert result.status == FAILED and result.counterexample["N"] >= 17


def test_nccl_ring_allreduce_with_the_all_gather_chunk_off_by_one_fails_the_all_n_row(monkeypatch):
    """In the all-gather half every rank sends the chunk after the one it
    should (cell + 1 mod N, one loop of N one-element chunks): it forwards
    a chunk it has not finished."""
    from collspec.models.generators import nccl_ring

    original = nccl_ring._allreduce

    def mutated(layout):
        steps, transfer, label = original(layout)

        def shifted(n, s, r, j):
            t = transfer(n, s, r, j)
            cell = ix.where(s >= n - 1, (t.src_chunk + 1) % n, t.src_chunk)
            return dataclasses.replace(t, src_chunk=cell, dst_chunk=cell)

        return steps, shifted, label

    monkeypatch.setitem(nccl_ring.BUILDERS, "allreduce", mutated)
    assert not check(generate("nccl-ring", "allreduce", 4, channels=1, chunk=1, count=4)).ok
    result = row("nccl-ring.allreduce-exactly-once")
    assert result.status == FAILED and "N" in result.counterexample


def test_nccl_ring_channels_rows_prove_the_generators_channel_schedules():
    """The channels rows prove the program the generator's Layout builds
    with its parts and rings as solver functions (every channel count
    1..64): the generator's schedules with NCCL 2.30's own split of the
    count use parts >= 0 that add up to the count, the split those rows
    cover, and their channel table lists those parts and rings."""
    from collspec.models.generators import nccl_host, nccl_ring

    rows = {p.name: p.scope for p in suite()}
    for collective in NCCL["nccl-ring"]:
        rooted = "all roots, " if collective in ("broadcast", "reduce") else ""
        assert rows[f"nccl-ring.{collective}-channels-exactly-once"] == (
            f"all N>=2, {rooted}chunk in 1..4194304, align>=1, count>=0, channels in 1..64, align divides chunk, "
            "part(h)>=0 and most>=part(h) for every channel h, off(0)=0, off(h)=off(h-1)+part(h-1), off(channels-1)+part(channels-1)=count, "
            "every channel's ring a permutation of the ranks (pos(h, .), rank(h, .) inverse bijections of 0..N-1)")
        for n in range(2, 6):
            big = 60000 if collective not in ("reduce_scatter", "allgather") else 9000
            for channels in (2, 5, 64):
                parts = nccl_host.split_terms(collective, n, channels * big, 2, "simple", channels)
                assert sum(parts) == channels * big and min(parts) >= 0
                options = {"channels": channels, "count": channels * big, "dtype": "float16", "rings": [list(range(n)), list(range(n))[::-1]]}
                nccl_ring._check_for(nccl_ring.layout_of(collective, **options), n)  # what generate checks before it builds (the schedule is large)
                table = nccl_ring.channel_table(collective, n, **options)
                assert [c["count"] for c in table] == [int(p) for p in parts if int(p)]
                assert [c["ring"] for c in table[1:2]] in ([list(range(n))[::-1]], [])


def test_nccl_ring_wrong_neighbour_on_channel_1_from_17_fails_only_the_channels_row(monkeypatch):
    from collspec.models.generators import nccl_ring
    from collspec.proofs.suite import CHANNELS_ROW

    original = nccl_ring.Layout.next
    bad = lambda self, c, r, n: ix.where(ix.both(c == 1, n >= 17, r == n - 2), (r + 3) % n, original(self, c, r, n))  # noqa: E731
    monkeypatch.setattr(nccl_ring.Layout, "next", bad)
    assert check(generate("nccl-ring", "allreduce", 16, channels=2, chunk=1, parts=[16, 16])).ok
    assert not check(generate("nccl-ring", "allreduce", 17, channels=2, chunk=1, parts=[17, 17])).ok
    assert row("nccl-ring.allreduce-exactly-once").status == PROVED  # one channel: channel 1 unused
    result = row(CHANNELS_ROW)
    assert result.status == FAILED and result.counterexample["N"] >= 17
    assert result.queries[-1][0].startswith("channel h: rank r's element e is the 1-channel program's element e on part h")
    assert row("nccl-ring.allgather-channels-exactly-once").status == FAILED


def test_nccl_ring_channel_1_one_element_late_fails_only_the_channels_row(monkeypatch):
    """Channel 1's part starts one element after channel 0's ends: only
    several channels show it."""
    from collspec.models.generators import nccl_ring
    from collspec.proofs.suite import CHANNELS_ROW

    original = nccl_ring.Layout.off
    monkeypatch.setattr(nccl_ring.Layout, "off", lambda self, c, n: original(self, c, n) + ix.where(c >= 1, 1, 0))
    assert check(generate("nccl-ring", "allreduce", 4, channels=1, chunk=1, count=9)).ok
    from collspec.models.layout import ScheduleError

    with pytest.raises(ScheduleError, match="out of range"):  # channel 1's last cell is past the vector
        check(generate("nccl-ring", "allreduce", 4, channels=2, chunk=1, parts=[5, 4]))
    assert row("nccl-ring.allreduce-exactly-once").status == PROVED
    result = row(CHANNELS_ROW)
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0] == ("offsets: channel 0 starts at 0, channel h + 1 where channel h ends, "
                                     "and the last channel ends the vector (each block)")
