"""The NCCL model zoo (tests/zoo_nccl/): each file is correct, so `check`
passes it, and differs from NCCL 2.30's messages in one rule, which the
message-by-message comparison with the model reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.schedule_json import load

ZOO = Path(__file__).parent / "zoo_nccl"

#: file -> (algorithm, collective, ranks, options of the model NCCL agrees with,
#:          a connection whose messages differ, its first messages in the file, in the model)
CASES = {
    "nccl-ring3-allreduce-ring-index-from-list-start.json": (
        "nccl-ring", "allreduce", 3, {"channels": 1, "chunk": 1, "count": 3, "rings": [[1, 2, 0]]},
        (0, 1), [[1], [0]], [[2], [1]]),  # rank 0 has ring index 0: it first sends chunk 2, not 1
    "nccl-ring2-allreduce-even-channel-split.json": (
        "nccl-ring", "allreduce", 2, {"channels": 2, "count": 513, "dtype": "float64", "protocol": "ll"},
        (0, 1), [list(range(130, 258)) + list(range(386, 513))], [list(range(256, 512))]),  # parts 258 + 255, not 512 + 1
    "nccl-tree2-allreduce-even-channel-split.json": (
        "nccl-tree", "allreduce", 2, {"channels": 2, "count": 513, "dtype": "float64", "protocol": "ll"},
        (0, 1), [list(range(257, 513)), list(range(257))], [[512], list(range(512))]),  # parts 257 + 256, not 512 + 1
    "nccl-pat9-allgather-reduce-scatter-order-backwards.json": (
        "nccl-pat", "allgather", 9, {"chunk": 1, "count": 1},
        (0, 8), [[0, 4], [2, 6]], [[2], [6], [0], [4]]),  # as 3 before as 1, one block a message
    "nccl-pat16-reduce-scatter-one-message-per-step.json": (
        "nccl-pat", "reduce_scatter", 16, {"chunk": 2, "count": 1},
        (0, 1), [[1, 3, 5, 7, 9, 11, 13, 15]], [[15, 7], [11, 3], [13, 5], [9, 1]]),  # postFreq 2, in mirrorInvert order
    "nccl-pat8-reduce-scatter-blocks-in-slot-number-order.json": (
        "nccl-pat", "reduce_scatter", 8, {"chunk": 4, "count": 1},
        (0, 1), [[1, 3, 5, 7]], [[7, 3, 5, 1]]),  # the same blocks; position a holds block mirrorInvert(a) x 2 + 1
}


def connections(schedule) -> dict[tuple[int, int], list[list[int]]]:
    """(src, dst) -> the cells of each message on that connection, in order
    (a step's transfers between two ranks are one message, its cells in the
    order the step lists them: their places in the message)."""
    out: dict[tuple[int, int], list[list[int]]] = {}
    for step in schedule.steps:
        per: dict[tuple[int, int], list[int]] = {}
        for src, dst, cell in zip(step.src.tolist(), step.dst.tolist(), step.src_chunk.tolist()):
            per.setdefault((src, dst), []).append(cell)
        for link, cells in per.items():
            out.setdefault(link, []).append(cells)
    return out


def test_every_zoo_file_has_a_case():
    assert sorted(p.name for p in ZOO.glob("*.json")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_zoo_file_is_correct_but_not_nccls_messages(name):
    algorithm, collective, n, options, link, in_file, in_model = CASES[name]
    old = load(str(ZOO / name))
    assert check(old).ok  # a correct collective: no checker can tell
    model = generate(algorithm, collective, n, **options)
    ours, theirs = connections(old), connections(model)
    assert ours != theirs
    assert ours[link][: len(in_file)] == in_file and theirs[link][: len(in_model)] == in_model
