"""Bounded proofs of any schedule: `collspec prove --schedule FILE` and
`collspec check FILE --prove`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collspec.cli import main
from collspec.models.algebras import Symbols
from collspec.models.checker import check
from collspec.models.generators import ALGORITHMS, generate
from collspec.models.generators import ring as ring_gen
from collspec.models.interpreter import run
from collspec.models.layout import ScheduleError, expected_outputs
from collspec.models.schedule_json import load
from collspec.proofs import schedules
from collspec.proofs.solver import FAILED, PROVED

ZOO = Path(__file__).parent / "zoo"
LOADABLE = sorted(p for p in ZOO.glob("*.json") if p.name != "ring4-out-of-range.json")
VALUE_KINDS = {"missing-contribution", "duplicate-contribution", "postcondition", "wrong-column"}


def replay(schedule, example: dict) -> list[tuple[int, int, int, int]]:
    """Run the counterexample's integers through the interpreter and the
    spec; return (rank, cell, got, expected) for every wrong output."""
    inputs, garbage = example["inputs"], example["uninitialised"]
    algebra = Symbols(lambda r, k: inputs.get(f"x[{r},{k}]", 0), lambda r, c: garbage.get(f"uninit[{r},{c}]", 0))
    final = run(schedule, algebra).state
    layout = schedule.layout
    leaves = [algebra.leaves(r, layout.inputs[r]) for r in range(schedule.ranks)]
    want = expected_outputs(schedule, leaves)
    return [
        (r, int(cell), final[r, int(cell)], want[r][k])
        for r in range(schedule.ranks)
        for k, cell in enumerate(layout.outputs[r])
        if final[r, int(cell)] != want[r][k]
    ]


@pytest.mark.parametrize("path", LOADABLE, ids=[p.name for p in LOADABLE])
def test_zoo_proof_fails_exactly_when_the_checker_finds_wrong_outputs(path):
    schedule = load(str(path))
    outcome = schedules.prove_schedule(schedule)
    wrong_values = bool({v.kind for v in check(schedule).violations} & VALUE_KINDS)
    assert outcome.status == (FAILED if wrong_values else PROVED), outcome.message
    if wrong_values:
        example = outcome.counterexample
        assert sum(example["inputs"].values()) + sum(example["uninitialised"].values()) == 1  # one input 1, the rest 0
        replayed = replay(schedule, example)
        assert replayed, "the counterexample does not reproduce with plain integers"
        first = example["wrong_outputs"][0]
        assert (first["rank"], first["cell"], first["got"], first["expected"]) in replayed
        assert len(replayed) == example["wrong_count"]


@pytest.mark.parametrize(
    "name, got, expected, uninitialised",
    [
        ("ring4-reduce-in-allgather.json", 2, 1, False),  # a contribution counted twice
        ("ring4-copy-instead-of-reduce.json", 0, 1, False),  # a contribution lost
        ("ring4-allgather-reduce-into-garbage.json", 1, 0, True),  # uninitialised data read
    ],
)
def test_counterexample_shows_the_kind_of_bug(name, got, expected, uninitialised):
    outcome = schedules.prove_schedule(load(str(ZOO / name)))
    first = outcome.counterexample["wrong_outputs"][0]
    assert (first["got"], first["expected"]) == (got, expected)
    assert bool(outcome.counterexample["uninitialised"]) == uninitialised
    assert f"is {got}, the " in outcome.message and f"defines {expected}" in outcome.message


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_builtin_schedule_is_proved_for_small_n(algorithm):
    for collective in ALGORITHMS[algorithm]:
        for n in (1, 2, 3, 5):
            schedule = generate(algorithm, collective, n)
            if algorithm == "ring-seed" and collective == "reduce_scatter":
                schedule = schedules.declared_owner(schedule, ring_gen.OWNERS["ring-seed"])
            assert schedules.prove_schedule(schedule).ok, (algorithm, collective, n)


def test_ring_seed_reduce_scatter_fails_the_default_ownership():
    outcome = schedules.prove_schedule(generate("ring-seed", "reduce_scatter", 4))
    assert outcome.status == FAILED
    first = outcome.counterexample["wrong_outputs"][0]
    assert first["cell"] == first["rank"] and (first["got"], first["expected"]) == (0, 1)


def test_a_schedule_too_large_for_a_bounded_proof_is_refused(monkeypatch):
    monkeypatch.setattr(schedules, "MAX_WORK", 100)
    with pytest.raises(ScheduleError, match="too large for a bounded proof"):
        schedules.prove_schedule(generate("ring", "allreduce", 8))


def test_prove_schedule_command(tmp_path, capsys):
    report = tmp_path / "r.json"
    assert main(["prove", "--schedule", str(ZOO / "ring4-wrong-column.json"), "--json", str(report)]) == 1
    out = capsys.readouterr().out
    assert "N=4  FAILED" in out and "every other input 0" in out
    data = json.loads(report.read_text())
    assert data["ok"] is False and data["command"] == "prove"
    (violation,) = data["violations"]
    assert violation["kind"] == "postcondition" and violation["scope"] == "N=4"
    assert violation["counterexample"]["wrong_outputs"][0]["expected"] == 1
    assert main(["prove", "--schedule", str(ZOO / "pair2-link-overload.json")]) == 0


def test_check_prove_adds_the_bounded_proof(tmp_path):
    report = tmp_path / "c.json"
    assert main(["check", str(ZOO / "ring4-reduce-in-allgather.json"), "--prove", "--json", str(report)]) == 1
    data = json.loads(report.read_text())
    assert data["stats"]["bounded_proof"] == FAILED
    assert any(v["kind"] == "postcondition" and v.get("proof") == "schedule" for v in data["violations"])
    assert main(["check", "--algorithm", "ring", "--ranks", "2:4", "--prove"]) == 0


def test_prove_schedule_bad_input_is_exit_2_with_one_line(tmp_path):
    for args, words in [
        (["--schedule", str(tmp_path / "none.json")], "cannot read"),
        (["--schedule", str(ZOO / "ring4-out-of-range.json")], "field 'dst' = 4 is out of range"),
        (["--schedule", str(ZOO / "ring4-race.json"), "--only", "ring"], "give it without --only"),
    ]:
        result = subprocess.run([sys.executable, "-m", "collspec", "prove", *args], capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr


def test_replay_helper_agrees_with_numbers_on_a_correct_ring():
    schedule = generate("ring", "allreduce", 3)
    assert replay(schedule, {"inputs": {"x[0,1]": 5, "x[2,1]": 7}, "uninitialised": {}}) == []
    assert np.array_equal(run(schedule, Symbols(lambda r, k: 1, lambda r, c: 0)).state.astype(int), np.full((3, 3), 3))
