"""The MSCCL bug zoo (tests/zoo_msccl/, see its README): real files with one
bug planted each, rejected with the exact error kinds, located to the GPU,
thread block and step."""

from __future__ import annotations

from pathlib import Path

import pytest

from collspec.models.msccl import load, verify

ZOO = Path(__file__).parent / "zoo_msccl"

CASES = [
    (
        "ring4-reduce-wrong-offset",
        {"wrong-column", "missing-contribution", "postcondition"},
        [
            ("wrong-column", 1, 0, 1, "GPU 1 tb 0 step 1 (rrs) [in-place]: adds its i[1] to the chunk received from GPU 0 tb 0 step 0 (s), which carries a different chunk"),
            ("missing-contribution", 1, 0, 5, "rank 1's i[0] is missing rank 1's chunk 0"),
            ("postcondition", 3, 0, 3, "rank 3's i[0] holds rank 1's chunk 1, which the allreduce puts elsewhere"),
        ],
    ),
    (
        "ring4-reduce-as-copy",
        {"missing-contribution"},
        [("missing-contribution", 1, 0, 3, "GPU 1 tb 0 step 3 (rcs) [in-place]: rank 1's i[2] is missing rank 1's chunk 2 (holds 0·2·3, expected 0·1·2·3)")],
    ),
    (
        "ring4-copy-as-reduce",
        {"duplicate-contribution"},
        [("duplicate-contribution", 1, 0, 4, "GPU 1 tb 0 step 4 (rrcs) [in-place]: rank 1's i[1] counts rank 1's chunk 1 2 times (holds 0·1·1·2·3, expected 0·1·2·3)")],
    ),
    (
        "ring4-receive-first-deadlock",
        {"deadlock"},
        [("deadlock", 0, 0, 0, "GPU 0: a cycle of 4 waits that never ends: GPU 0 tb 0 step 0 (rrs) receives from GPU 3 tb 0 step 0 (rrs), which receives from GPU 2 tb 0 step 0 (rrs)")],
    ),
    (
        "ring4-count-mismatch",
        {"unmatched", "missing-contribution", "postcondition"},
        [("unmatched", 1, 0, 5, "GPU 1 tb 0 step 5 (rcs) sends cnt=1 to GPU 2 but the step it pairs with, GPU 2 tb 0 step 6 (r), receives cnt=2")],
    ),
    (
        "allgather8-deleted-receive",
        {"unmatched", "missing-contribution", "postcondition"},
        [
            ("unmatched", 1, 7, 0, "GPU 1 tb 7 step 0 (s) is send number 1 to GPU 0 on channel 0, but GPU 0 receives only 0 time(s) from GPU 1"),
            ("postcondition", 0, None, None, "GPU 0 [in-place]: rank 0's o[1] holds uninitialised data from rank 0's o[1]"),
        ],
    ),
    (
        "allreduce1step4-removed-dependency-race",
        {"race"},
        [("race", 0, 0, 4, "GPU 0 (in-place): GPU 0 tb 0 step 4 (re) and GPU 0 tb 4 step 1 (r) both touch s[4], at least one of them writing, and nothing orders them")],
    ),
    (
        "allreduce1step4-missing-hasdep",
        {"deadlock"},
        [
            ("deadlock", 0, tb, 4, f"GPU 0 tb {tb} step 4 (re) waits for step 1 of thread block 2 on GPU 0, but no step from 1 on in that thread block sets hasdep=\"1\"")
            for tb in (0, 4, 6)
        ],
    ),
]


@pytest.mark.parametrize("name, kinds, expected", CASES, ids=[c[0] for c in CASES])
def test_zoo_file_is_rejected_exactly(name, kinds, expected):
    verdict = verify(load(str(ZOO / f"{name}.xml")))
    assert not verdict.ok
    assert verdict.kinds() == kinds
    for kind, gpu, tb, step, words in expected:
        hits = [
            v
            for v in verdict.violations
            if v.kind == kind and v.details.get("gpu", v.dst) == gpu and v.details.get("tb") == tb and v.details.get("step") == step and words in v.message
        ]
        assert hits, f"no {kind} at GPU {gpu} tb {tb} step {step} saying {words!r}; got:\n" + "\n".join(str(v) for v in verdict.violations)


def test_the_deadlock_names_every_step_of_its_cycle():
    verdict = verify(load(str(ZOO / "ring4-receive-first-deadlock.xml")))
    (dead,) = [v for v in verdict.violations if v.kind == "deadlock"]
    assert [(c["gpu"], c["tb"], c["step"], c["type"]) for c in dead.details["cycle"]] == [(g, 0, 0, "rrs") for g in range(4)]


def test_the_race_names_both_steps():
    verdict = verify(load(str(ZOO / "allreduce1step4-removed-dependency-race.xml")))
    (race,) = [v for v in verdict.violations if v.kind == "race"]
    assert race.details["other"] == {"tb": 4, "step": 1, "type": "r", "line": race.details["other"]["line"]}
    assert race.details["cells"] == ["s[4]"] and race.details["modes"] == ["in-place"]


def test_every_zoo_file_is_listed_and_tested():
    assert {p.stem for p in ZOO.glob("*.xml")} == {c[0] for c in CASES}
    readme = (ZOO / "README.md").read_text()
    assert all(f"`{c[0]}.xml`" in readme for c in CASES)
