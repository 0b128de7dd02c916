"""`collspec check FILE.xml` and the verify part: exit codes 0/1/2 and the
JSON report of contracts.md, with MSCCL locations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from collspec.commands.check import load_schedule
from collspec.commands.verify import PARTS
from collspec.models.msccl.corpus import DATA

ZOO = Path(__file__).parent / "zoo_msccl"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collspec", *args], capture_output=True, text=True, timeout=120)


def test_a_right_file_exits_0_and_reports_lint_as_warnings():
    result = run("check", str(DATA / "allreduce-ring-4gpu-mscclang.xml"), "--json", "-")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["command"] == "check"
    (lint,) = report["violations"]
    assert (lint["kind"], lint["severity"], lint["rule"]) == ("lint", "warning", "missing-attribute")
    assert {"steps", "transfers", "seconds", "traffic", "modes"} <= set(report["stats"])


def test_a_broken_file_exits_1_with_located_violations(tmp_path):
    report_path = tmp_path / "report.json"
    result = run("check", str(ZOO / "ring4-reduce-wrong-offset.xml"), "--json", str(report_path))
    assert result.returncode == 1
    report = json.loads(report_path.read_text())
    first = report["violations"][0]
    assert (first["kind"], first["gpu"], first["tb"], first["step"], first["type"], first["modes"]) == ("wrong-column", 1, 0, 1, "rrs", ["in-place"])
    assert first["line"] == 16  # the <step> in the file
    assert "error wrong-column (step 1): GPU 1 tb 0 step 1 (rrs)" in result.stdout


def test_deadlock_and_race_reach_the_report():
    for name, kind in (("ring4-receive-first-deadlock", "deadlock"), ("allreduce1step4-removed-dependency-race", "race")):
        result = run("check", str(ZOO / f"{name}.xml"), "--json", "-")
        assert result.returncode == 1
        kinds = {v["kind"] for v in json.loads(result.stdout)["violations"] if v["severity"] == "error"}
        assert kinds == {kind}


def test_bad_input_exits_2_with_one_line(tmp_path):
    path = tmp_path / "bad.xml"
    path.write_text('<algo ngpus="2"/>')
    result = run("check", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == f"collspec check: error: {path}:1: <algo> has no 'coll' attribute; add coll=\"...\" (every executor requires it)"


def test_load_schedule_gives_the_linearised_program_for_other_commands():
    schedule = load_schedule(str(DATA / "allreduce-ring-4gpu-mscclang.xml"))
    assert schedule.collective == "allreduce" and schedule.ranks == 4 and schedule.chunks == 4
    assert schedule.layout.cell_name(0) == "i[0]"


def test_the_verify_part_checks_the_bundled_corpus():
    part = dict(PARTS)["check MSCCL corpus"]
    ok, detail = part()
    assert ok, detail
    assert detail.startswith("9 files as expected")


def test_the_examples_in_the_msccl_modules_hold():
    import doctest
    import importlib
    import pkgutil

    import collspec.models.msccl as package

    attempted = 0
    for name in ["collspec.models.msccl"] + [f"collspec.models.msccl.{m.name}" for m in pkgutil.iter_modules(package.__path__)]:
        result = doctest.testmod(importlib.import_module(name))
        assert result.failed == 0, name
        attempted += result.attempted
    assert attempted >= 5


def test_a_reduce_scatter_whose_output_blocks_cannot_partition_the_chunks_is_exit_2(tmp_path):
    # rank r's output is block r of nchunksperloop / ngpus chunks: 3 chunks on 2 GPUs cannot be cut so
    path = tmp_path / "rs.xml"
    path.write_text(
        '<algo name="rs" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="2" coll="reducescatter" inplace="1">\n'
        '  <gpu id="0" i_chunks="3" o_chunks="0" s_chunks="0"></gpu>\n'
        '  <gpu id="1" i_chunks="3" o_chunks="0" s_chunks="0"></gpu>\n'
        "</algo>\n"
    )
    for command in (["check"], ["prove", "--schedule"]):
        result = run(*command, str(path))
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"collspec {command[0]}: error: {path}:1: a reduce_scatter needs nchunksperloop divisible by ngpus (got 3 for 2 GPUs)"), line
