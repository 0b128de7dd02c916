"""The command line: subcommands, exit codes and one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from collspec.cli import COMMANDS, main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collspec", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_subcommand_of_the_contract():
    result = run("--help")
    assert result.returncode == 0
    for name in ("verify", "prove", "check", "explain", "cost", "conform", "bench", "export"):
        assert name in result.stdout


@pytest.mark.parametrize("name", [name for name, _ in COMMANDS])
def test_every_subcommand_has_help(name):
    result = run(name, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: collspec " + name in result.stdout


def test_usage_error_is_one_line_and_exit_2():
    result = run("check", "--no-such-option")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "unrecognized arguments: --no-such-option" in result.stderr


def test_no_subcommand_prints_help_and_exit_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


ZOO = __import__("pathlib").Path(__file__).parent / "zoo"


def test_check_exit_codes_and_json(tmp_path):
    import json

    ok = run("check", "--algorithm", "ring", "--collective", "allreduce", "--ranks", "2:8", "--json", str(tmp_path / "ok.json"))
    assert ok.returncode == 0, ok.stderr
    report = json.loads((tmp_path / "ok.json").read_text())
    assert report["ok"] is True and report["command"] == "check" and len(report["stats"]["schedules"]) == 7

    bad = run("check", str(ZOO / "ring4-wrong-column.json"), "--json", "-")
    assert bad.returncode == 1
    report = json.loads(bad.stdout)
    first = report["violations"][0]
    assert (first["kind"], first["step"], first["src"], first["dst"]) == ("wrong-column", 2, 1, 2)
    assert set(report) >= {"ok", "command", "subject", "violations", "stats"}


def test_check_bad_input_is_exit_2_with_one_line(tmp_path):
    for args, words in [
        (("check", str(ZOO / "ring4-out-of-range.json")), "step 1, transfer 2: field 'dst' = 4 is out of range 0..3"),
        (("check", str(tmp_path / "none.json")), "cannot read"),
        (("check", "--algorithm", "ring", "--ranks", "x"), "--ranks 'x': write a count (4), a list (2,4,8) or a range (2:64)"),
        (("check",), "give a schedule FILE, or --algorithm A --collective C --ranks N"),
        (("check", "--algorithm", "ring", "--collective", "alltoall", "--ranks", "4"), "ring has no alltoall schedule"),
        (("cost", "--algorithm", "ring", "--ranks", "4", "--bytes", "lots"), "size 'lots' is not a byte count"),
        (("explain", "ring", "--ranks", "5", "--example", "seed"), "use --example random"),
    ]:
        result = run(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_malformed_input_still_writes_a_json_report(tmp_path):
    import json

    out = tmp_path / "r.json"
    result = run("check", str(ZOO / "ring4-out-of-range.json"), "--json", str(out))
    assert result.returncode == 2
    report = json.loads(out.read_text())
    assert report["ok"] is False and report["violations"][0]["kind"] == "malformed"


def test_cost_reproduces_the_reference_table():
    result = run("cost", "--algorithm", "direct,ring", "--ranks", "4,8,32", "--bytes", "60GB")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert any(line.split()[:5] == ["direct", "32", "1", "31P", "="] for line in lines)
    assert sum("2P = 120 GB" in line for line in lines) == 3
    hub = run("cost", "--algorithm", "hub", "--ranks", "4,100", "--dedicated-hub")
    assert "8P" in hub.stdout and "200P" in hub.stdout


def test_check_passes_generator_options_and_refuses_bad_ones(tmp_path):
    import json

    steps = {}
    for size in (4, 2):
        result = run("check", "-a", "hierarchical-ring", "-n", "16", "--option", f"group_size={size}", "--json", str(tmp_path / f"{size}.json"))
        assert result.returncode == 0, result.stderr
        steps[size] = json.loads((tmp_path / f"{size}.json").read_text())["stats"]["steps"]
    assert steps == {4: 2 * 3 + 2 * 3, 2: 2 * 1 + 2 * 7}  # 2(L - 1) + 2(G - 1) hops
    nccl = run("check", "-a", "nccl-ring", "-n", "2:5", "--option", "channels=3", "--option", "chunk=2", "--option", "rings=0,1,2,3,4/4,3,2,1,0", "--json", str(tmp_path / "n.json"))
    assert nccl.returncode == 2 and "ring 0 [0, 1, 2, 3, 4] is not a permutation of the ranks 0..1" in nccl.stderr
    nccl = run("check", "-a", "nccl-ring", "-c", "reduce", "-n", "5", "--option", "channels=3", "--option", "root=2", "--option", "rings=0,1,2,3,4/4,3,2,1,0", "--json", str(tmp_path / "n.json"))
    assert nccl.returncode == 0, nccl.stderr
    assert json.loads((tmp_path / "n.json").read_text())["stats"]["steps"] == 1 + 5 - 2  # 12 float32: one channel in NCCL's split, one chunk, then the chain
    for args, words in [
        (("-a", "hierarchical-ring", "-n", "16", "--option", "group_size=5"), "hierarchical-ring allreduce: group size 5 does not divide 16 ranks"),
        (("-a", "hierarchical-ring", "-n", "16", "--option", "group_size=0"), "--option 'group_size=0': group_size must be at least 1 for 16 ranks"),
        (("-a", "hierarchical-ring", "-n", "16", "--option", "group_size=x"), "--option 'group_size=x': group_size must be an integer"),
        (("-a", "hierarchical-ring", "-n", "16", "--option", "size=4"), "--option 'size=4': write NAME=VALUE with NAME one of group_size, root, chunks, channels, chunk, align, dtype, protocol, count, aggregation, post, parts, rings"),
        (("-a", "nccl-ring", "-n", "4", "--option", "channels=0"), "--option 'channels=0': channels must be at least 1 for 4 ranks"),
        (("-a", "nccl-ring", "-n", "4", "--option", "channels=65"), "nccl-ring: option channels must be an integer from 1 to 64, got 65"),
        (("-a", "nccl-ring", "-n", "4", "--option", "rings=0,1,1,3"), "nccl-ring: option rings: ring 0 [0, 1, 1, 3] is not a permutation of the ranks 0..3"),
        (("-a", "nccl-ring", "-n", "4", "--option", "rings=0,1;2"), "--option rings='0,1;2': write ring orders as ranks separated by commas, rings separated by '/'"),
        (("-a", "nccl-ring", "-n", "4", "--option", "root=1"), "--option root: nccl-ring allreduce takes only channels, chunk, align, count, rings"),
        (("-a", "ring", "-n", "16", "--option", "group_size=4"), "--option group_size: ring allreduce takes no options"),
        (("-a", "ring", "-c", "broadcast", "-n", "8", "--option", "root=8"), "--option 'root=8': root must be 0..7 for 8 ranks"),
        ((str(ZOO / "ring4-wrong-column.json"), "--option", "root=1"), "--option is for --algorithm, not a FILE"),
    ]:
        result = run("check", *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr
