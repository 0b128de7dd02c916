"""nccl-ring's channels rows (:func:`collspec.proofs.nccl_ring_loops.channel_lemmas`):
the channel index, the channel count (1..64), the parts and every channel's
ring are solver terms. Bugs that only a fifth channel or a ring other than
0 -> 1 -> ... -> N-1 shows must fail the row with a counterexample at the
lemma that covers them; the 1-channel row (and, on main before these rows,
the 2- and 4-channel rows on the identity ring) pass with the same bugs."""

from __future__ import annotations

import pytest
import z3

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate, nccl_ring
from collspec.proofs import nccl_ring_loops
from collspec.proofs.solver import FAILED, NARROWS, PROVED, Query, Row, decide, within
from collspec.proofs.suite import CHANNELS_ROW, run_proof, suite


def row(name):
    (proof,) = [p for p in suite() if p.name == name]
    return run_proof(proof)


def test_the_scope_names_every_channel_count_part_and_ring():
    scope = nccl_ring_loops.channels_scope("allreduce").text()
    assert "channels in 1..64" in scope and "off(h)=off(h-1)+part(h-1)" in scope
    assert "every channel's ring a permutation of the ranks" in scope
    assert nccl_ring_loops.MAX_CHANNELS == nccl_ring.MAX_CHANNELS == 64


def test_channel_4_one_element_early_fails_the_channels_row(monkeypatch):
    """Channel 4's part starts one element early, overlapping channel 3's:
    only 5 or more channels show it (the old rows had 2 and 4)."""
    original = nccl_ring.Layout.off
    monkeypatch.setattr(nccl_ring.Layout, "off", lambda self, c, n: original(self, c, n) - ix.where(c == 4, 1, 0))
    assert check(generate("nccl-ring", "allreduce", 3, channels=4, chunk=1, parts=[2, 2, 2, 2])).ok
    assert not check(generate("nccl-ring", "allreduce", 3, channels=5, chunk=1, parts=[2, 2, 2, 2, 2])).ok
    assert row("nccl-ring.allreduce-exactly-once").status == PROVED
    result = row(CHANNELS_ROW)
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0] == ("offsets: channel 0 starts at 0, channel h + 1 where channel h ends, "
                                     "and the last channel ends the vector (each block)")
    assert result.counterexample["h"] in (3, 4) and result.counterexample["channels"] >= 5


def test_a_generator_prefix_sum_wrong_from_channel_4_fails_the_generators_parts(monkeypatch):
    """The bug in the generator's own list of offsets (PartList), which
    the proof's functions stand for: the lemma on the generator's parts
    fails at 5 channels."""
    original = nccl_ring.PartList.off
    monkeypatch.setattr(nccl_ring.PartList, "off", lambda self, c: original(self, c) + ix.where(c == 4, 1, 0))
    assert check(generate("nccl-ring", "reduce", 3, channels=4, chunk=1, parts=[2, 2, 2, 2])).ok
    result = row("nccl-ring.reduce-channels-exactly-once")
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0] == "the generator's parts: 5 channels"


def test_identity_successor_fails_the_channels_row_on_other_rings(monkeypatch):
    """Every rank sends to rank r + 1 whatever its channel's ring: right on
    the identity ring (every row before these proved only that ring), wrong
    on any other."""
    monkeypatch.setattr(nccl_ring.Layout, "next", lambda self, c, r, n: ix.wrap(r + 1, n))
    assert check(generate("nccl-ring", "allreduce", 5, channels=2, chunk=1, parts=[5, 5])).ok
    assert not check(generate("nccl-ring", "allreduce", 5, channels=2, chunk=1, parts=[5, 5], rings=[[0, 1, 2, 3, 4], [0, 2, 1, 3, 4]])).ok
    assert row("nccl-ring.allreduce-exactly-once").status == PROVED
    result = row(CHANNELS_ROW)
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0].startswith("channel h: rank r's element e is the 1-channel program's element e on part h, at rank sigma^-1(r)")


def test_a_ring_index_measured_from_the_lists_first_entry_fails_the_ring_lemma(monkeypatch):
    """NCCL measures a rank's ring index from rank 0 (setupChannel); taking
    its place in the ring list instead only rotates which chunk each rank
    finishes, so that schedule is still an all-reduce (the checker passes
    it), but it is not NCCL's: the row's renaming of ranks is NCCL's, and
    the ring lemma fails with a counterexample rather than prove a program
    the model no longer describes."""
    monkeypatch.setattr(nccl_ring.Layout, "index", lambda self, c, r, n: self.position(c, r, n))
    assert check(generate("nccl-ring", "allreduce", 4, channels=1, chunk=1, count=9, rings=[[2, 0, 3, 1]])).ok
    result = decide_row_lemmas("allreduce")
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0].startswith("ring: sigma, channel h's renaming of the 1-channel program's ranks")


def decide_row_lemmas(collective):
    from collspec.proofs.solver import run_queries

    with within(Row("channels", nccl_ring_loops.channels_scope(collective), 75_000_000)):
        return run_queries(nccl_ring_loops.channel_lemmas(collective))


def test_ground_instantiates_the_scope_premise_and_nothing_more():
    """A quantified premise is replaced by its instances at the query's
    terms: a claim that follows from it is proved, one that does not fails."""
    part, h, c = z3.Function("part", z3.IntSort(), z3.IntSort()), z3.Int("h"), z3.Int("channels")
    x = z3.Int("x")
    every = z3.ForAll([x], z3.Implies(z3.And(0 <= x, x < c), part(x) >= 0), patterns=[part(x)])
    follows = nccl_ring_loops.ground(Query("follows", [every, 0 <= h, h < c], part(h) + part(h + 1) >= part(h + 1) - 0, when=[h + 1 < c]))
    assert not any(z3.is_quantifier(p) for p in follows.premises)
    assert decide(follows).status == PROVED
    outside = nccl_ring_loops.ground(Query("outside", [every, 0 <= h, h < c], part(h + 1) >= 0))
    assert decide(outside).status == FAILED


def test_a_premise_on_the_parts_outside_the_scope_narrows_it():
    """A query premise over the scope's functions alone (here channel 0
    starting at 1) must follow from the scope, or the row fails."""
    layout, v = nccl_ring_loops.channels_layout("allreduce")
    domain = nccl_ring_loops.channels_scope("allreduce").assertions(v)
    with within(Row("channels", nccl_ring_loops.channels_scope("allreduce"), 10_000_000)):
        narrowed = decide(Query("narrowed", domain + [v["off"](0) == 1], v["count"] >= 0))
        allowed = decide(Query("allowed", domain + [v["off"](0) == 0], v["off"](0) + v["part"](0) >= 0 - v["count"] * 0 - 10))
    assert narrowed.status == FAILED and narrowed.reason == NARROWS
    assert allowed.status != FAILED


def test_the_generator_refuses_ring_lookups_that_are_not_inverse(monkeypatch):
    """The rows assume position and rank_at inverse bijections on every
    channel; the generator checks that of its own tables on every schedule
    (here a lookup that ignores the ring list)."""
    from collspec.models.layout import ScheduleError

    assert check(generate("nccl-ring", "allreduce", 5, channels=2, chunk=1, parts=[3, 2], rings=[[2, 0, 3, 1, 4], [4, 3, 2, 1, 0]])).ok
    monkeypatch.setattr(nccl_ring.RingTable, "position", lambda self, c, r: r)
    with pytest.raises(ScheduleError, match=r"nccl-ring: option rings: channel 0's ring lookups are not inverse permutations of 0..4"):
        generate("nccl-ring", "allreduce", 5, channels=2, chunk=1, parts=[3, 2], rings=[[2, 0, 3, 1, 4], [4, 3, 2, 1, 0]])


def test_a_channel_lookup_that_stops_at_32_channels_fails_the_generators_parts(monkeypatch):
    """The generator reads its parts and offsets at a channel index that is
    a solver term (its transfer is evaluated on Z3 terms, then compiled to
    numpy), through the chain of ``where`` in ``_pick``: a chain cut at 32
    channels gives channel 32 no part. The lemma on the generator's parts
    reads the same chain, so it fails at 33 channels (read at plain
    indices, it would pass)."""
    original = nccl_ring._pick

    def cut(values, c):
        return original(values[:32], c) if nccl_ring._is_z3(c) else original(values, c)

    monkeypatch.setattr(nccl_ring, "_pick", cut)
    assert not check(generate("nccl-ring", "reduce", 3, channels=33, chunk=1, parts=[1] * 33)).ok
    result = row("nccl-ring.reduce-channels-exactly-once")
    assert result.status == FAILED and result.reason == "counterexample"
    assert result.queries[-1][0] == "the generator's parts: 33 channels"


def test_a_largest_part_taken_from_channel_0_is_refused_by_the_generator(monkeypatch):
    """The rows assume ``most`` at least every part (width and loops read
    it); the generator checks that of the value it computes on every
    schedule, so a largest part read from channel 0 alone is refused rather
    than built into a schedule that drops channel 1's elements."""
    from collspec.models.layout import ScheduleError

    monkeypatch.setattr(nccl_ring.PartList, "most", lambda self: self.parts[0])
    with pytest.raises(ScheduleError, match=r"nccl-ring: the largest channel part at N=3 is computed as 1, below the part 30 of \[1, 30\]"):
        generate("nccl-ring", "allreduce", 3, channels=2, chunk=4, parts=[1, 30])


def test_a_split_with_a_part_beyond_the_channels_is_refused_by_the_generator(monkeypatch):
    """The rows cover one part per channel; a split with one more part (its
    elements on no channel's slots) is refused by name."""
    from collspec.models.layout import ScheduleError

    original = nccl_ring.Layout.parts
    monkeypatch.setattr(nccl_ring.Layout, "parts", lambda self, n: original(self, n)[:-1] + [1, original(self, n)[-1] - 1])
    with pytest.raises(ScheduleError, match=r"nccl-ring: the channel split of 6 elements at N=3 is \[3, 1, 2\], not 2 parts >= 0 that add up to the count"):
        generate("nccl-ring", "allreduce", 3, channels=2, chunk=1, parts=[3, 3])


def test_the_generator_checks_the_ring_lookups_the_schedule_evaluates(monkeypatch):
    """The schedule reads its rings through the solver-term lookup (a chain
    of ``where``); a chain cut at 32 channels leaves channel 32 without a
    ring while plain-index lookups stay right. The generator's check of the
    rows' premise evaluates the same terms, so it refuses the schedule."""
    from collspec.models.layout import ScheduleError

    original = nccl_ring.RingTable._lookup

    def cut(self, rows, c, k):
        if not (nccl_ring._is_z3(c) or nccl_ring._is_z3(k)):
            return original(self, rows, c, k)
        return original(nccl_ring.RingTable(self.rings, min(self.channels, 32)), rows, c, k)

    monkeypatch.setattr(nccl_ring.RingTable, "_lookup", cut)
    with pytest.raises(ScheduleError, match=r"nccl-ring: option rings: channel 32's ring lookups are not inverse permutations of 0..2"):
        generate("nccl-ring", "reduce", 3, channels=33, chunk=1, parts=[1] * 33, rings=[[0, 2, 1]])


@pytest.mark.parametrize("collective", ["allreduce", "reduce_scatter", "broadcast"])
def test_the_channels_scope_with_its_quantifiers_holds_somewhere(collective):
    """The row's queries carry the scope's quantified premises only as
    ground instances, so their vacuity check need not see a scope that
    contradicts itself only through an induction over the channels. The
    scope itself, quantifiers in, has a model at 2 channels and 3 ranks;
    the same check finds a scope made empty by such an induction (parts
    >= 1 with the last channel starting below 0) empty."""
    layout, v = nccl_ring_loops.channels_layout(collective)
    domain = nccl_ring_loops.channels_scope(collective).assertions(v)
    h = z3.Int("h")
    point = [v["channels"] == 2, v["N"] == 3, v["count"] == 5, v["chunk"] == 1, v["align"] == 1]
    inductively_empty = [z3.ForAll([h], z3.Implies(z3.And(0 <= h, h < v["channels"]), v["part"](h) >= 1), patterns=[v["part"](h)]),
                         v["off"](v["channels"] - 1) < 0]
    for extra, expected in (([], z3.sat), (inductively_empty, z3.unsat)):
        solver = z3.Solver()
        solver.set("rlimit", 10_000_000)
        solver.add(*domain, *point, *extra)
        assert solver.check() == expected


def test_a_channel_past_the_ring_list_runs_the_ring_the_channel_table_names():
    """Which ring a channel runs is not what the rows prove (they cover
    every ring on every channel): with fewer rings than channels, channel c
    reuses ring c mod len(rings), and the schedule's sends are the ones the
    exported channel table names (a lookup reusing the last ring instead
    still computes the all-gather and still proves)."""
    schedule = generate("nccl-ring", "allgather", 4, channels=3, chunk=1, parts=[1, 1, 1], rings=[[0, 1, 2, 3], [3, 1, 2, 0]])
    table = schedule.meta["channel_table"]
    assert [entry["ring"] for entry in table] == [[0, 1, 2, 3], [3, 1, 2, 0], [0, 1, 2, 3]]
    step = schedule.steps[0]
    for c, entry in enumerate(table):
        ring = entry["ring"]
        following = {(ring[i], ring[(i + 1) % 4]) for i in range(4)}
        sends = {(int(a), int(b)) for a, b, cell in zip(step.src, step.dst, step.src_chunk) if int(cell) % 3 == c}
        assert sends and sends <= following, c
