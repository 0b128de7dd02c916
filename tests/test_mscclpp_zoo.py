"""The MSCCL++ plan bug zoo (tests/zoo_mscclpp/, see its README): real plans
with one bug planted each, rejected with the exact findings, located to the
GPU, thread block and op; broken files are refused with exit 2 and the JSON
path."""

from __future__ import annotations

from pathlib import Path

import pytest

from collspec.models.mscclpp import PlanFormatError, load, verify

ZOO = Path(__file__).parent / "zoo_mscclpp"

RACE = "at least one of them writing, and nothing orders them"

CASES = [
    (
        "allreduce-packet-dropped-reduce-source",
        {"missing-contribution"},
        [
            ("missing-contribution", 0, 0, 1, "GPU 0 tb 0 op 1 (respkt) [in-place]: rank 0's i[0] is missing rank 1's chunk 0 (holds 0, expected 0·1)"),
            ("missing-contribution", 1, 0, 2, "GPU 1 tb 0 op 2 (upkt) [in-place]: rank 1's i[0] is missing rank 1's chunk 0 (holds 0, expected 0·1)"),
        ],
    ),
    (
        "reduce-put-wrong-index",
        {"race", "missing-contribution", "postcondition"},
        [
            ("race", 0, 0, 6, f"GPU 0 tb 0 op 6 (rres) and GPU 1 tb 0 op 10 (put) both touch GPU 0's i[0], {RACE}"),
            ("race", 0, 0, 9, f"GPU 0 tb 0 op 9 (res) and GPU 1 tb 0 op 10 (put) both touch GPU 0's i[1], {RACE}"),
            ("postcondition", 1, 0, 10, "GPU 1 tb 0 op 10 (put) [in-place]: rank 0's i[0] holds rank 0's chunk 2, rank 1's chunk 2, which the allreduce puts elsewhere"),
            ("missing-contribution", None, None, None, "GPU 0 [in-place]: rank 0's i[2] is missing rank 1's chunk 2 (holds 0, expected 0·1)"),
        ],
    ),
    (
        "reduce-missing-signal",
        {"deadlock"},
        [("deadlock", 0, 0, 13, "GPU 0 tb 0 op 13 (wait) is wait number 2 on its memory channel 0 (to GPU 1), but channel 0 of GPU 1 is signalled only 1 time(s); the wait never returns")],
    ),
    (
        "reduce-missing-wait",
        {"race", "unmatched"},
        [
            ("unmatched", 1, 0, 12, "GPU 1 tb 0 op 12 (signal) is signal number 2 on its memory channel 0 to GPU 0, but GPU 0 waits on the paired channel only 1 time(s)"),
            ("race", 0, 0, 5, f"GPU 0 tb 0 op 5 (rres) and GPU 1 tb 0 op 0 (copy) both touch GPU 1's i[0], s[0], {RACE}"),
            ("race", 0, 0, 6, f"GPU 0 tb 0 op 6 (get) and GPU 1 tb 0 op 0 (copy) both touch GPU 1's s[1], {RACE}"),
            ("race", 0, 0, 8, f"GPU 0 tb 0 op 8 (res) and GPU 1 tb 0 op 0 (copy) both touch GPU 1's i[1], {RACE}"),
        ],
    ),
    (
        "reduce-missing-nop-after-wait",
        {"race"},
        [
            ("race", 0, 0, 5, f"GPU 0 tb 0 op 5 (rres) and GPU 1 tb 0 op 0 (copy) both touch GPU 1's i[0], s[0], {RACE}"),
            ("race", 0, 0, 6, f"GPU 0 tb 0 op 6 (get) and GPU 1 tb 0 op 0 (copy) both touch GPU 1's s[1], {RACE}"),
        ],
    ),
    (
        "allreduce-pipeline-wrong-channel",
        {"deadlock", "unmatched"},
        [
            ("deadlock", 3, 0, 9, "GPU 3 tb 0 op 9 (wait) is wait number 1 on its memory channel 0 (to GPU 0), but channel 2 of GPU 0 is signalled only 0 time(s)"),
            ("unmatched", 0, 0, 8, "GPU 0 tb 0 op 8 (signal) is signal number 2 on its memory channel 1 to GPU 2, but GPU 2 waits on the paired channel only 1 time(s)"),
        ],
    ),
]


@pytest.mark.parametrize("name, kinds, expected", CASES, ids=[c[0] for c in CASES])
def test_zoo_plan_is_rejected_exactly(name, kinds, expected):
    verdict = verify(load(str(ZOO / f"{name}.json")))
    assert not verdict.ok
    assert verdict.kinds() == kinds
    for kind, gpu, tb, op, words in expected:
        hits = [
            v
            for v in verdict.violations
            if v.kind == kind and v.details.get("gpu") == gpu and v.details.get("tb") == tb and v.details.get("op") == op and words in v.message
        ]
        assert hits, f"no {kind} at GPU {gpu} tb {tb} op {op} saying {words!r}; got:\n" + "\n".join(str(v) for v in verdict.violations)


BROKEN = [
    ("reduce-truncated", "reduce-truncated.json: line 192 column 5: invalid JSON (Expecting property name enclosed in double quotes); is the file truncated?"),
    ("reduce-buffer-id-out-of-range", "reduce-buffer-id-out-of-range.json: gpus[0].threadblocks[0].ops[6].dst_buff[1].buffer_id: 5 is out of range 0..1"),
]


@pytest.mark.parametrize("name, message", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_zoo_file_is_refused_with_its_path(name, message):
    with pytest.raises(PlanFormatError) as error:
        load(str(ZOO / f"{name}.json"))
    assert str(error.value).endswith(message)


def test_zoo_readme_lists_every_file():
    text = (ZOO / "README.md").read_text()
    for path in ZOO.glob("*.json"):
        assert path.name in text
    assert {c[0] for c in CASES} | {b[0] for b in BROKEN} == {p.stem for p in ZOO.glob("*.json")}
