"""The bug zoo: hand-broken schedules under tests/zoo/, each rejected with
the exact violation kinds and locations.

Each row: file, the exact set of error kinds, and violations that must be
present as (kind, step, src, dst, words in the message).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collspec.models.checker import check
from collspec.models.schedule_json import ScheduleFormatError, load

ZOO = Path(__file__).parent / "zoo"

CASES = [
    (
        "ring4-wrong-column",
        {"wrong-column", "missing-contribution"},
        [("wrong-column", 2, 1, 2, "rank 2 added rank 1's chunk 2 into its chunk 1"),
         ("missing-contribution", 4, None, 0, "rank 0's chunk 2 is missing rank 0's chunk 2, rank 1's chunk 2, rank 3's chunk 2")],
    ),
    (
        "ring4-duplicated-transfer",
        {"link-overload", "link-repeat"},
        [("link-overload", 1, 0, 1, "link 0->1 carries 2 chunks in step 1 (chunks 2, 3)"),
         ("link-repeat", 1, 0, 1, "chunk 3 crosses link 0->1 twice in phase 'reduce-scatter': in step 0 and again in step 1")],
    ),
    (
        "ring4-dropped-hop",
        {"missing-contribution"},
        [("missing-contribution", None, None, 0, "rank 0's chunk 0 is missing rank 1's chunk 0, rank 2's chunk 0, rank 3's chunk 0 (holds 0, expected 0·1·2·3)")],
    ),
    (
        "ring4-copy-instead-of-reduce",
        {"missing-contribution"},
        [("missing-contribution", 5, None, 1, "rank 1's chunk 2 is missing rank 1's chunk 2 (holds 0·2·3, expected 0·1·2·3)")],
    ),
    (
        "ring4-reduce-in-allgather",
        {"duplicate-contribution"},
        [("duplicate-contribution", 3, None, 1, "rank 1's chunk 0 counts rank 1's chunk 0 2 times (holds 0·1·1·2·3, expected 0·1·2·3)")],
    ),
    (
        "pair2-link-overload",
        {"link-overload"},
        [("link-overload", 0, 0, 1, "link 0->1 carries 2 chunks in step 0 (chunks 0, 1); its capacity is 1 per step"),
         ("link-overload", 1, 1, 0, "link 1->0 carries 2 chunks in step 1")],
    ),
    (
        "ring4-no-steps",
        {"missing-contribution"},
        [("missing-contribution", None, None, 1, "rank 1's chunk 3 is missing rank 0's chunk 3, rank 2's chunk 3, rank 3's chunk 3 (holds 1, expected 0·1·2·3)"),
         ("missing-contribution", None, None, 3, "rank 3's chunk 3")],
    ),
    (
        "ring4-race",
        {"race", "missing-contribution"},
        [("race", 3, None, 1, "rank 1's chunk 0 is written by 2 transfers in step 3 (copy from rank 0, copy from rank 2)"),
         ("missing-contribution", 3, None, 1, "rank 1's chunk 0 is missing rank 0's chunk 0, rank 3's chunk 0 (holds 1·2, expected 0·1·2·3)")],
    ),
    (
        "ring-seed4-reduce-scatter",
        {"postcondition"},
        [("postcondition", None, None, None, 'rank 0 holds chunk 1 where it must own chunk 0; rank 1 holds chunk 2 where it must own chunk 1; rank 2 holds chunk 3 where it must own chunk 2; rank 3 holds chunk 0 where it must own chunk 3. The schedule is a correct reduce_scatter for "owner": [[1], [2], [3], [0]]')],
    ),
    (
        "ring4-allgather-reduce-into-garbage",
        {"postcondition"},
        [("postcondition", 0, None, 1, "rank 1's chunk 0 holds uninitialised data from rank 1's chunk 0")],
    ),
    (
        "direct3-alltoall-misplaced",
        {"missing-contribution", "postcondition"},
        [("missing-contribution", None, None, 1, "rank 1's chunk 0 is missing rank 0's chunk 1 (holds 1[0], expected 0[1])"),
         ("postcondition", 0, None, 1, "rank 1's chunk 1 holds rank 0's chunk 1, which the alltoall puts elsewhere")],
    ),
]


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "fingerprint"])
@pytest.mark.parametrize("name, kinds, expected", CASES, ids=[c[0] for c in CASES])
def test_zoo_schedule_is_rejected_exactly(name, kinds, expected, exact):
    result = check(load(str(ZOO / f"{name}.json")), exact=exact)
    assert not result.ok
    assert {v.kind for v in result.violations if v.is_error} == kinds
    for kind, step, src, dst, words in expected:
        matches = [v for v in result.violations if v.kind == kind and v.step == step and v.src == src and v.dst == dst and words in v.message]
        assert matches, f"no {kind} at step {step} ({src}->{dst}) saying {words!r}; got:\n" + "\n".join(map(str, result.violations))


def test_out_of_range_transfer_is_a_format_error_naming_step_transfer_and_field():
    with pytest.raises(ScheduleFormatError) as caught:
        load(str(ZOO / "ring4-out-of-range.json"))
    assert str(caught.value).endswith("ring4-out-of-range.json: step 1, transfer 2: field 'dst' = 4 is out of range 0..3")


def test_every_zoo_file_is_covered():
    covered = {c[0] for c in CASES} | {"ring4-out-of-range"}
    assert covered == {p.stem for p in ZOO.glob("*.json")}
