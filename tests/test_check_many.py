"""`collspec check FILE...` and `prove --schedule FILE...`: files, folders and
globs in one run, one summary line per file, the worst exit status, --jobs
with the output in the order of the files, and the several-file JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collspec.cli import main
from collspec.commands import batch, check
from collspec.models.generators import generate
from collspec.models.schedule_json import dumps

HERE = Path(__file__).parent
ZOO = HERE / "zoo"
BROKEN = ZOO / "ring4-wrong-column.json"  # exit 1
MALFORMED = ZOO / "ring4-out-of-range.json"  # exit 2
MSCCL_BROKEN = HERE / "zoo_msccl" / "ring4-reduce-wrong-offset.xml"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A folder of files: good/ring4.json, good/deep/ring3.xml... as relative paths."""
    from collspec.models.msccl import to_xml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "good" / "deep").mkdir(parents=True)
    (tmp_path / "good" / ".hidden").mkdir()
    (tmp_path / "good" / "ring4.json").write_text(dumps(generate("ring", "allreduce", 4)))
    (tmp_path / "good" / "deep" / "ring3.xml").write_text(to_xml(generate("ring", "allreduce", 3)))
    (tmp_path / "good" / "notes.md").write_text("not a schedule")
    (tmp_path / "good" / ".hidden" / "skip.json").write_text("{")
    shutil.copy(BROKEN, tmp_path / "broken.json")
    shutil.copy(MALFORMED, tmp_path / "malformed.json")
    return tmp_path


def test_folders_are_searched_recursively_and_globs_expand_in_order(tree):
    assert batch.expand(["good"]) == ["good/deep/ring3.xml", "good/ring4.json"]
    assert batch.expand(["*.json", "good", "broken.json"]) == ["broken.json", "malformed.json", "good/deep/ring3.xml", "good/ring4.json"]
    assert batch.expand(["good/**/*.xml"]) == ["good/deep/ring3.xml"]


@pytest.mark.parametrize("argument, message", [("nothing*.json", "nothing*.json: no file matches this pattern"), ("empty", "empty: no *.json or *.xml file in this folder")])
def test_a_pattern_or_folder_naming_no_file_is_bad_input(tree, capsys, argument, message):
    (tree / "empty").mkdir()
    assert main(["check", argument]) == 2
    assert capsys.readouterr().err == f"collspec check: error: {message}\n"


def test_one_summary_line_per_file_and_the_worst_status_wins(tree, capsys):
    assert main(["check", "good"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "check good/deep/ring3.xml: ok (0 errors, 0 warnings)",
        "check good/ring4.json: ok (0 errors, 0 warnings)",
        "check: 2 files: 2 ok",
    ]
    assert main(["check", "good", "broken.json"]) == 1
    assert capsys.readouterr().out.splitlines()[-2:] == ["check broken.json: FAILED (5 errors, 0 warnings)", "check: 3 files: 2 ok, 1 FAILED"]
    assert main(["check", "malformed.json", "good", "broken.json"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "check malformed.json: malformed: malformed.json: step 1, transfer 2: field 'dst' = 4 is out of range 0..3"
    assert lines[-1] == "check: 4 files: 2 ok, 1 FAILED, 1 malformed"


def test_an_internal_error_is_status_3_and_the_run_goes_on(tree, capsys, monkeypatch):
    real = check._check_file

    def failing(path, options):
        if path == "good/ring4.json":
            raise RuntimeError("boom")
        return real(path, options)

    monkeypatch.setattr(check, "_check_file", failing)
    assert main(["check", "malformed.json", "good", "broken.json"]) == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("check good/ring4.json: internal error: RuntimeError: boom (traceback in ")
    assert lines[-1] == "check: 4 files: 1 ok, 1 FAILED, 1 malformed, 1 internal error"
    assert main(["check", "good/ring4.json"]) == 3
    assert capsys.readouterr().err.count("\n") == 1


def test_jobs_give_the_same_output_in_the_order_of_the_files(tree, capsys):
    arguments = ["check", "broken.json", "good", "malformed.json", str(MSCCL_BROKEN), "--json", "-"]
    assert main(arguments) == 2
    serial = capsys.readouterr()
    assert main([*arguments, "--jobs", "3"]) == 2
    parallel = capsys.readouterr()
    assert parallel.err == serial.err
    assert _timeless(json.loads(parallel.out)) == _timeless(json.loads(serial.out))
    assert [f["subject"] for f in json.loads(parallel.out)["files"]] == ["broken.json", "good/deep/ring3.xml", "good/ring4.json", "malformed.json", str(MSCCL_BROKEN)]


def _timeless(data):
    """A report without its measured times (the one part that may differ)."""
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k != "seconds"}
    if isinstance(data, list):
        return [_timeless(v) for v in data]
    return data


def test_jobs_below_one_is_bad_input(tree, capsys):
    assert main(["check", "good", "--jobs", "0"]) == 2
    assert capsys.readouterr().err == "collspec check: error: --jobs 0: give at least 1\n"


def test_several_files_json_holds_the_contract_keys_and_each_files_report(tree, capsys):
    assert main(["check", "good/ring4.json", "broken.json", "malformed.json", "--json", "-"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert {"ok", "command", "subject", "violations", "stats"} <= set(report)
    assert (report["ok"], report["command"], report["subject"], report["status"]) == (False, "check", "3 files", 2)
    assert report["stats"] == {"files": 3, "ok": 1, "failed": 1, "malformed": 1, "internal_error": 0}
    assert [(f["subject"], f["status"], f["ok"]) for f in report["files"]] == [("good/ring4.json", 0, True), ("broken.json", 1, False), ("malformed.json", 2, False)]
    # each file's entry is the report one file gets on its own
    assert main(["check", "broken.json", "--json", "-"]) == 1
    alone = json.loads(capsys.readouterr().out)
    assert report["files"][1]["violations"] == alone["violations"]
    assert [v["file"] for v in report["violations"]] == ["broken.json"] * 5 + ["malformed.json"]
    assert report["violations"][-1]["kind"] == "malformed"


def test_one_file_reads_as_before(tree, capsys):
    assert main(["check", "broken.json"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("  error wrong-column (step 2): step 2: rank 2 added rank 1's chunk 2 into its chunk 1")
    assert out.endswith("check broken.json: FAILED (5 errors, 0 warnings)\n")
    assert main(["check", "malformed.json", "--json", "r.json"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "collspec check: error: malformed.json: step 1, transfer 2: field 'dst' = 4 is out of range 0..3\n")
    written = json.loads((tree / "r.json").read_text())
    assert (written["subject"], [v["kind"] for v in written["violations"]]) == ("malformed.json", ["malformed"])


def test_check_refuses_files_with_an_algorithm(tree, capsys):
    assert main(["check", "broken.json", "--algorithm", "ring", "--ranks", "4"]) == 2
    assert "give FILEs or --algorithm, not both" in capsys.readouterr().err


def test_prove_schedule_takes_several_files(tree, capsys):
    assert main(["prove", "--schedule", "good/ring4.json", "broken.json", "malformed.json", "--jobs", "2", "--json", "-"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "prove good/ring4.json: ok (0 errors, 0 warnings)",
        "prove broken.json: FAILED (1 error, 0 warnings)",
        "prove malformed.json: malformed: malformed.json: step 1, transfer 2: field 'dst' = 4 is out of range 0..3",
        "prove: 3 files: 1 ok, 1 FAILED, 1 malformed",
    ]
    report = json.loads(captured.out)
    assert [(f["subject"], f["status"], f["stats"]["proofs"][0]["result"] if f["stats"] else None) for f in report["files"]] == [
        ("good/ring4.json", 0, "proved"), ("broken.json", 1, "FAILED"), ("malformed.json", 2, None)]
    assert main(["prove", "--schedule", "good"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "prove: 2 files: 2 ok"


def test_a_worker_that_dies_is_an_internal_error_of_its_file(tree, capsys, monkeypatch):
    """A worker process killed mid-file (out of memory, a signal) is status 3
    for the files it left; the command still reports every file."""
    import os
    import signal

    real = check._check_file

    def dying(path, options):
        if path == "broken.json":
            os.kill(os.getpid(), signal.SIGKILL)
        return real(path, options)

    monkeypatch.setattr(check, "_check_file", dying)
    assert main(["check", "broken.json", "good/ring4.json", "--jobs", "2"]) == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("check broken.json: internal error: its worker process failed (BrokenProcessPool")
    assert lines[-1].startswith("check: 2 files:") and "internal error" in lines[-1]
