"""The executors' semantics as collspec models them: what each step type
computes, when a step may run, what a wait waits for, deadlocks, races
(in place and out of place) and lint."""

from __future__ import annotations

import numpy as np
import pytest

from collspec.models.algebras import contributions
from collspec.models.interpreter import run
from collspec.models.msccl import loads, verify
from collspec.models.msccl.cells import IN_PLACE, OUT_OF_PLACE
from collspec.models.msccl.executor import resolve_waits, transmission_starts
from collspec.models.msccl.lower import lower
from collspec.models.msccl.order import analyse
from msccl_programs import PAIR, nop, pair_steps, program, step


def final_values(text: str, mode: str = IN_PLACE):
    """Contributor multisets of every cell after the program, as strings
    ``rank[input index]`` joined by '·', by (gpu, cell name)."""
    p = loads(text)
    lowered = lower(analyse(p), mode)
    state = run(lowered.schedule, contributions()).state
    names = lowered.cells.names()
    return {(g, names[c]): state[g, c].format(True) for g in range(p.ngpus) for c in range(lowered.cells.message_base)}


# -- what each step type computes -------------------------------------------------------------


def test_a_chain_through_every_receive_type():
    """GPU 0 sends its chunk; GPU 1 adds its own and forwards without
    storing (rrs); GPU 2 adds its own, stores and forwards (rrcs); GPU 3
    stores and forwards (rcs); GPU 0 adds its own into a scratch copy (rrc)."""
    gpus = [
        (0, [(1, 3, 0, [step(0, "s"), step(1, "rrc", srcoff=0, dstbuf="s", dstoff=0)])]),
        (1, [(2, 0, 0, [step(0, "rrs")])]),
        (2, [(3, 1, 0, [step(0, "rrcs")])]),
        (3, [(0, 2, 0, [step(0, "rcs")])]),
    ]
    values = final_values(program(gpus, chunks=1, sizes=(1, 0, 1)))
    assert values[(1, "i[0]")] == "1[0]"  # rrs stores nothing
    assert values[(2, "i[0]")] == "0[0]·1[0]·2[0]"
    assert values[(3, "i[0]")] == "0[0]·1[0]·2[0]"  # rcs stores what it received
    assert values[(0, "s[0]")] == "0[0]·0[0]·1[0]·2[0]"  # rrc: received + its source
    assert values[(0, "i[0]")] == "0[0]"


def test_local_copy_and_reduce():
    steps = [step(0, "cpy", srcoff=0, dstbuf="s", dstoff=0), step(1, "re", srcbuf="s", srcoff=0, dstoff=1), step(2, "re", srcoff=1, dstbuf="s", dstoff=0, cnt=1)]
    values = final_values(program([(0, [(-1, -1, 0, steps)]), (1, [])], sizes=(2, 0, 1)))
    assert values[(0, "s[0]")] == "0[0]·0[0]·0[1]"  # s0 = i0; i1 += s0; s0 += i1
    assert values[(0, "i[1]")] == "0[0]·0[1]"


def test_a_send_sends_its_source_as_it_was_when_the_send_ran():
    """GPU 0 overwrites i[0] right after sending it; GPU 1 receives later
    (after a dependency on its own slow step) and must still get the old value."""
    gpu0 = [(1, -1, 0, [step(0, "s", hasdep=1)]), (-1, -1, 0, [step(0, "cpy", srcoff=1, dstoff=0, depid=0, deps=0)])]
    gpu1 = [(-1, 0, 0, [step(0, "r", dstbuf="s", dstoff=0)])]
    values = final_values(program([(0, gpu0), (1, gpu1)], sizes=(2, 0, 1)))
    assert values[(0, "i[0]")] == "0[1]"
    assert values[(1, "s[0]")] == "0[0]"


def test_counts_move_consecutive_chunks():
    gpus = [(0, [(1, -1, 0, [step(0, "s", srcoff=0, cnt=2)])]), (1, [(-1, 0, 0, [step(0, "r", dstbuf="s", dstoff=1, cnt=2)])])]
    values = final_values(program(gpus, sizes=(2, 0, 3)))
    assert (values[(1, "s[1]")], values[(1, "s[2]")]) == ("0[0]", "0[1]")


def test_out_of_place_buffers_are_separate_cells_and_in_place_ones_alias():
    # copy i[0] to o[0], then reduce o[0] into i[1]: in place o[0] is i[0]
    steps = [step(0, "cpy", srcoff=0, dstbuf="o", dstoff=0), step(1, "re", srcbuf="o", srcoff=0, dstoff=1)]
    text = program([(0, [(-1, -1, 0, steps)]), (1, [])], sizes=(2, 2, 0), inplace=1, outofplace=1)
    assert final_values(text, OUT_OF_PLACE)[(0, "i[1]")] == "0[0]·0[1]"
    assert final_values(text, IN_PLACE)[(0, "o[1]")] == "0[0]·0[1]"


@pytest.mark.parametrize(
    "coll, chunks, sizes, buffer, offset, rank, cell",
    [
        ("allgather", 4, (2, 4, 0), "i", 1, 1, 3),  # i[k] is o[r*C/N + k]
        ("reduce_scatter", 4, (4, 2, 0), "o", 1, 1, 3),  # o[k] is i[r*C/N + k]
        ("allreduce", 4, (4, 4, 0), "o", 2, 1, 2),
        ("alltoall", 4, (4, 4, 0), "i", 3, 0, 3),
    ],
)
def test_in_place_aliasing_follows_the_executors(coll, chunks, sizes, buffer, offset, rank, cell):
    from collspec.models.msccl.cells import cell_map

    text = program([(0, []), (1, [])], chunks=chunks, coll=coll, sizes=sizes)
    cells = cell_map(loads(text), IN_PLACE, 0)
    assert int(cells.cell(rank, "ios".index(buffer), offset)) == cell


# -- waits: nops, flags, fused reductions ------------------------------------------------------


def test_a_nop_wait_is_attached_to_the_next_transmission():
    gpu0 = [
        (-1, -1, 0, [step(0, "cpy", srcoff=0, dstoff=1, hasdep=1), step(1, "cpy", srcoff=1, dstoff=0, hasdep=1)]),
        (-1, -1, 0, [nop(0, 0, 0), nop(1, 0, 1), step(2, "re", srcoff=0, dstoff=1, depid=0, deps=0), nop(3, 0, 1)]),
    ]
    p = loads(program([(0, gpu0), (1, [])]))
    waits = resolve_waits(p)
    pairs = sorted(zip(waits.src.tolist(), waits.dst.tolist(), waits.declared.tolist()))
    # tb 1's steps are 2..5; its step 2 (global 4) absorbs both nops and its own wait
    assert pairs == [(0, 4, 2), (0, 4, 4), (1, 4, 3)]
    assert waits.ignored.tolist() == [5]  # the trailing nop waits for nothing
    assert waits.flag[[0, 1]].tolist() == [0, 1]


def test_a_wait_on_a_step_without_hasdep_ends_at_the_next_step_that_stores_its_flag():
    gpu0 = [
        (-1, -1, 0, [step(0, "cpy", srcoff=0, dstoff=1), step(1, "cpy", srcoff=1, dstoff=0, hasdep=1)]),
        (-1, -1, 0, [step(0, "re", srcoff=0, dstoff=1, depid=0, deps=0)]),
    ]
    p = loads(program([(0, gpu0), (1, [])]))
    waits = resolve_waits(p)
    assert (waits.src.tolist(), waits.dst.tolist()) == ([1], [2])
    verdict = verify(p)
    late = [v for v in verdict.violations if v.details.get("rule") == "missing-hasdep"]
    assert len(late) == 1 and late[0].severity == "warning"
    assert late[0].details["where"][0]["ends_at"]["step"] == 1


def test_fused_reductions_are_one_transmission_and_keep_nop_waits_for_later():
    steps = [step(0, "re", srcbuf="s", srcoff=0, dstoff=0), nop(1, 1, 0), step(2, "re", srcbuf="s", srcoff=1, dstoff=0), step(3, "re", srcbuf="s", srcoff=2, dstoff=0, depid=1, deps=0)]
    gpu0 = [(-1, -1, 0, steps), (-1, -1, 0, [step(0, "cpy", srcoff=1, dstbuf="s", dstoff=2, hasdep=1)])]
    p = loads(program([(0, gpu0), (1, [])], sizes=(2, 0, 3)))
    assert transmission_starts(p)[:4].tolist() == [True, False, False, True]
    waits = resolve_waits(p)
    # the nop's wait is absorbed by step 3, the next transmission, not by the continuation step 2
    assert sorted(zip(waits.dst.tolist(), waits.declared.tolist())) == [(3, 1), (3, 3)]


def test_the_executor_step_counter_skips_a_nop_without_dependency():
    """A nop without a dependency is dropped by the parser and does not
    advance the counter, so later flags are one lower than their s."""
    gpu0 = [(-1, -1, 0, [nop(0), step(1, "cpy", srcoff=0, dstoff=1, hasdep=1)]), (-1, -1, 0, [step(0, "re", srcoff=1, dstoff=0, depid=0, deps=1)])]
    p = loads(program([(0, gpu0), (1, [])]))
    waits = resolve_waits(p)
    assert waits.flag[1] == 0
    assert waits.forever == [(2, 2)]  # flag 0 never reaches 1: the wait never ends


# -- deadlocks, unmatched, races -------------------------------------------------------------------


def test_two_thread_blocks_waiting_on_each_other_deadlock():
    gpu0 = [(-1, -1, 0, [step(0, "cpy", srcoff=0, dstoff=1, depid=1, deps=0, hasdep=1)]), (-1, -1, 0, [step(0, "cpy", srcoff=1, dstoff=0, depid=0, deps=0, hasdep=1)])]
    verdict = verify(loads(program([(0, gpu0), (1, [])])))
    (dead,) = [v for v in verdict.violations if v.kind == "deadlock"]
    assert [(c["gpu"], c["tb"], c["step"]) for c in dead.details["cycle"]] == [(0, 0, 0), (0, 1, 0)]
    assert "GPU 0 tb 0 step 0 (cpy) waits for GPU 0 tb 1 step 0 (cpy), which waits for GPU 0 tb 0 step 0 (cpy)" in dead.message
    assert verdict.stats["result"].startswith("not checked: 2 of 2 steps never run")


def test_a_receive_without_a_send_is_unmatched_and_blocks():
    gpu1_sends_once = [step(0, "s", srcoff=0, dstoff=0), step(1, "rrc", srcoff=1, dstoff=1), nop(2)]
    text = program([(0, [(1, 1, 0, pair_steps(0))]), (1, [(0, 0, 0, gpu1_sends_once)])])
    verdict = verify(loads(text))
    unmatched = [v for v in verdict.violations if v.kind == "unmatched"]
    # GPU 1 now sends once and receives once: GPU 0's second send and second receive have no partner
    assert [(v.details["gpu"], v.details["tb"], v.details["step"]) for v in unmatched] == [(0, 0, 2), (0, 0, 3)]
    assert "send number 2 to GPU 1 on channel 0, but GPU 1 receives only 1 time(s)" in unmatched[0].message
    assert "receive number 2 from GPU 1 on channel 0, but GPU 1 sends only 1 time(s)" in unmatched[1].message
    assert verdict.kinds() == {"unmatched"}
    assert verdict.stats["result"].startswith("not checked: 1 of 7 steps never run")


def test_a_race_that_exists_only_in_place():
    """tb 0 sends i[0] while tb 1 receives into o[0], unordered: the same
    memory in place, different buffers out of place."""
    gpu0 = [(1, -1, 0, [step(0, "s", srcoff=0)]), (-1, 1, 0, [step(0, "r", dstbuf="o", dstoff=0)])]
    gpu1 = [(0, -1, 0, [step(0, "s", srcoff=0)]), (-1, 0, 0, [step(0, "r", dstbuf="o", dstoff=0)])]
    verdict = verify(loads(program([(0, gpu0), (1, gpu1)], sizes=(2, 2, 0), inplace=1, outofplace=1)))
    races = [v for v in verdict.violations if v.kind == "race"]
    assert [(v.details["gpu"], v.details["tb"], v.details["step"], v.details["other"]["tb"], v.details["modes"]) for v in races] == [
        (0, 0, 0, 1, ["in-place"]),
        (1, 0, 0, 1, ["in-place"]),
    ]
    assert "GPU 0 tb 0 step 0 (s) and GPU 0 tb 1 step 0 (r) both touch o[0]" in races[0].message


def test_ordering_through_another_gpu_prevents_a_race():
    """GPU 0's tb 0 writes s[0], then sends to GPU 1, which answers; GPU 0's
    tb 1 reads s[0] only after receiving the answer: ordered, no race."""
    gpu0 = [(1, -1, 0, [step(0, "cpy", srcoff=0, dstbuf="s", dstoff=0), step(1, "s", srcoff=1)]), (-1, 1, 0, [step(0, "r", dstoff=1), step(1, "cpy", srcbuf="s", srcoff=0, dstoff=0)])]
    gpu1 = [(0, 0, 0, [step(0, "r", dstbuf="s", dstoff=0), step(1, "s", srcbuf="s", srcoff=0)])]
    bad_gpu1 = [(0, 0, 0, [step(0, "s", srcbuf="s", srcoff=0), step(1, "r", dstbuf="s", dstoff=0)])]
    assert "race" not in verify(loads(program([(0, gpu0), (1, gpu1)], sizes=(2, 0, 1)))).kinds(errors_only=False)
    assert "race" in verify(loads(program([(0, gpu0), (1, bad_gpu1)], sizes=(2, 0, 1)))).kinds()


def test_the_pair_program_is_right():
    verdict = verify(loads(PAIR))
    assert verdict.ok and not verdict.violations
    assert verdict.stats["traffic"]["busiest_rank_traffic"] == verdict.stats["traffic"]["lower_bound_traffic"] == 1.0
    assert verdict.stats["traffic"]["links_used"] == 2 and verdict.stats["levels"] == 4


def test_a_reduce_into_scratch_nobody_wrote_is_a_postcondition_violation():
    text = PAIR.replace('type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0"', 'type="rrc" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0"').replace('s_chunks="0"', 's_chunks="1"')
    verdict = verify(loads(text))
    post = [v for v in verdict.violations if v.kind == "postcondition"]
    assert post and "holds uninitialised data from rank 0's s[0]" in post[0].message
    assert (post[0].details["gpu"], post[0].details["tb"], post[0].details["step"]) == (0, 0, 1)


# -- lint -----------------------------------------------------------------------------------------


def lint_rules(text: str) -> dict[str, list]:
    verdict = verify(loads(text))
    rules: dict[str, list] = {}
    for v in verdict.violations:
        if v.kind == "lint":
            assert v.severity == "warning"
            rules.setdefault(v.details["rule"], []).extend(v.details["where"])
    return rules


def test_lint_rules():
    assert lint_rules(PAIR) == {}
    bare = PAIR.replace(' inplace="1" outofplace="0" minBytes="0" maxBytes="0"', ' inplace="1"')
    assert lint_rules(bare) == {"missing-attribute": [{"line": 1}]}
    assert "collective-name" in lint_rules(PAIR.replace('coll="allreduce"', 'coll="reduce_scatter"').replace('i_chunks="2" o_chunks="0"', 'i_chunks="2" o_chunks="1"'))
    assert lint_rules(PAIR.replace('coll="allreduce"', 'coll="broadcast"'))["root"] == [{"line": 1}]
    unused = lint_rules(PAIR.replace('<step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"', '<step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"'))
    assert [(w["gpu"], w["tb"], w["step"]) for w in unused["unused-hasdep"]] == [(0, 0, 0)]
    extras = lint_rules(PAIR.replace('maxBytes="0"', 'maxBytes="0" maxcount="0" nthreadblocks="3" colour="red"'))
    assert len(extras["rccl-attribute"]) == 2 and extras["unknown-attribute"] == [{"element": "algo", "attribute": "colour", "line": 1}]
    long = [step(k, "cpy", srcoff=0, dstoff=1) for k in range(65)] + [step(65, "res", srcoff=0, dstoff=1, cnt=1)]
    rules = lint_rules(program([(0, [(-1, -1, 0, long)]), (1, [])]))
    assert rules["executor-limit"] == [{"gpu": 0, "tb": 0, "steps": 66, "line": 3}]
    assert [(w["tb"], w["step"]) for w in rules["residual-add"]] == [(0, 65)]


def test_lint_never_fails_a_verdict():
    bare = PAIR.replace(' inplace="1" outofplace="0" minBytes="0" maxBytes="0"', ' inplace="1"').replace('coll="allreduce"', 'coll="all_reduce"')
    verdict = verify(loads(bare))
    assert verdict.ok and {v.kind for v in verdict.violations} == {"lint"}
    assert np.all([not v.is_error for v in verdict.violations])


def test_races_are_the_same_with_tiny_memory_budgets(monkeypatch):
    """Clocks computed GPU batch by GPU batch and candidate pairs examined
    slice by slice give the same races as all at once."""
    from pathlib import Path

    from collspec.models.msccl import races as races_module

    gpu0 = [(1, -1, 0, [step(0, "s", srcoff=0, cnt=2)]), (-1, 1, 0, [step(0, "r", dstbuf="o", dstoff=0, cnt=2)]), (-1, -1, 0, [step(0, "cpy", srcoff=1, dstbuf="o", dstoff=1)])]
    gpu1 = [(0, -1, 0, [step(0, "s", srcoff=0, cnt=2)]), (-1, 0, 0, [step(0, "r", dstbuf="o", dstoff=0, cnt=2)])]
    texts = [program([(0, gpu0), (1, gpu1)], sizes=(2, 2, 0), inplace=1, outofplace=1), (Path(__file__).parent / "zoo_msccl" / "allreduce1step4-removed-dependency-race.xml").read_text()]

    def found(text):
        return sorted((v.details["gpu"], v.details["tb"], v.details["step"], v.details["other"]["tb"], tuple(v.details["cells"]), tuple(v.details["modes"])) for v in verify(loads(text)).violations if v.kind == "race")

    before = [found(t) for t in texts]
    assert all(before) and len(before[0]) == 4
    monkeypatch.setattr(races_module, "PAIR_SLICE", 1)
    monkeypatch.setattr(races_module, "CLOCK_BUDGET", 1)
    assert [found(t) for t in texts] == before
