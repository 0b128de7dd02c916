"""collspec conform and collspec bench on the command line: exit codes, reports, plots."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import pytest

from collspec.cli import main
from collspec.conformance import resolve
from collspec.spec import bus_factor
from collspec.spec.errors import CollspecError
from conformance_support import ZOO, leftover_processes


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--backend", "nosuch.py:X"], "no such file nosuch.py"),
        (["--backend", f"{ZOO}/drops_rank.py:Nope"], "drops_rank.py has no class Nope"),
        (["--backend", "gloo", "--world-size", "0"], "--world-size 0"),
        (["--backend", "nosuchmodule:X"], "no module named nosuchmodule"),
        (["--backend", ":X"], "use a built-in name"),
        (["--backend", "gloo", "--dtype", "int3"], "unknown dtype 'int3'"),
        (["--backend", "gloo", "--collective", "allreduce,scan"], "unknown collective 'scan'"),
        (["--backend", "mpi", "--launcher", "local"], "runs under mpiexec"),
        (["--backend", "gloo", "--timeout", "0"], "--timeout"),
        (["--backend", "gloo", "--repeat", "0"], "--repeat 0"),
        (["--backend", "gloo", "--sizes", "4X"], "'4X' is not a size"),
        (["--backend", "gloo", "--device", "cuda"], "runs on cpu only"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(["conform", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message where there is no GPU")
def test_cuda_without_a_gpu_is_bad_input(capsys):
    assert main(["conform", "--backend", f"{ZOO}/drops_rank.py:DropsRank", "--device", "cuda"]) == 2
    assert "on cuda needs a CUDA GPU and none is visible" in capsys.readouterr().err


def test_a_backend_file_with_a_syntax_error_is_bad_input(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("class Broken:\n    def all_reduce(self, tensor, op='sum')\n")
    assert main(["conform", "--backend", f"{broken}:Broken"]) == 2
    assert "line 2: syntax error" in capsys.readouterr().err


def test_algorithm_names_resolve_through_impl_once_it_defines_them(tmp_path, monkeypatch):
    (tmp_path / "fakeimpl.py").write_text("class Ring:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(resolve.BUILTIN, "ring", "fakeimpl:Ring")
    monkeypatch.setitem(resolve.BUILTIN, "shm", "fakeimpl:SharedMemory")
    assert resolve.parse("ring").target == "fakeimpl:Ring"
    with pytest.raises(CollspecError, match="backend 'shm' is not available: fakeimpl has no SharedMemory yet"):
        resolve.parse("shm")
    assert resolve.BUILTIN["direct"] == "collspec.impl.backends:Direct"


def test_a_module_in_the_working_directory_is_found(tmp_path, monkeypatch):
    (tmp_path / "my_kernels.py").write_text("class Mine:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    assert resolve.parse("my_kernels:Mine").target == "my_kernels:Mine"
    with pytest.raises(CollspecError, match="my_kernels has no class Yours"):
        resolve.parse("my_kernels:Yours")


@pytest.mark.slow
def test_an_import_error_in_the_ranks_is_bad_input(tmp_path, capsys):
    failing = tmp_path / "failing.py"
    failing.write_text("import no_such_dependency\n\nclass Mine:\n    pass\n")
    assert main(["conform", "--backend", f"{failing}:Mine", "--world-size", "2", "--quick"]) == 2
    assert "No module named 'no_such_dependency'" in capsys.readouterr().err
    assert leftover_processes() == []


@pytest.mark.slow
def test_a_constructor_that_raises_is_a_set_up_crash(tmp_path, capsys):
    angry = tmp_path / "angry.py"
    angry.write_text("class Angry:\n    def __init__(self, rank, world_size):\n        raise RuntimeError('no GPU for rank %d' % rank)\n")
    report = tmp_path / "report.json"
    assert main(["conform", "--backend", f"{angry}:Angry", "--world-size", "2", "--sizes", "1",
                 "-c", "broadcast", "--dtype", "int8", "--json", str(report)]) == 1
    data = json.loads(report.read_text())
    (violation,) = data["violations"]
    assert violation["kind"] == "crash" and violation["phase"] == "setup" and "RuntimeError: no GPU for rank" in violation["message"]
    assert data["stats"]["not_run"] == data["stats"]["cases"] == 2
    assert leftover_processes() == []


@pytest.mark.slow
def test_json_and_junit_reports_of_a_failing_backend(tmp_path, capsys):
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    code = main(["conform", "--backend", f"{ZOO}/ignores_op.py:IgnoresOp", "--world-size", "2", "-c", "allreduce,broadcast",
                 "--dtype", "int32", "--op", "sum,max", "--sizes", "4", "--repeat", "2", "--json", str(report), "--junit", str(junit)])
    assert code == 1
    data = json.loads(report.read_text())
    assert set(data) >= {"ok", "command", "subject", "violations", "stats", "capability", "cases"}
    assert data["ok"] is False and data["command"] == "conform"
    kinds = sorted((v["kind"], v["severity"], v.get("op")) for v in data["violations"])
    # broadcast is missing: unsupported (a warning), per root and seed; max is wrong, for both seeds;
    # --repeat 2 also calls seed 0's inputs a second time (call=1), which is checked like any case
    assert kinds == [("unsupported", "warning", None)] * 6 + [("wrong-value", "error", "max")] * 3
    assert sorted((v["seed"], v["case"].endswith("/call=1")) for v in data["violations"] if v["kind"] == "wrong-value") == [(0, False), (0, True), (1, False)]
    assert data["capability"]["allreduce"]["in place"]["int32"] == {"sum": "pass", "max": "fail"}
    assert data["capability"]["broadcast"]["in place"]["int32"] == {"-": "unsupported"}
    root = ElementTree.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("12", "3", "6", "0")
    failure = root.find(".//testcase[@name='allreduce/int32/max/n=4/inplace/spread/seed=1']/failure")
    assert failure is not None and failure.get("type") == "wrong-value"
    out = capsys.readouterr().out
    assert "capability matrix" in out and "conform " in out and "FAILED" in out


@pytest.mark.slow
def test_bench_prints_nccl_tests_bandwidths_and_plots(tmp_path, capsys):
    report, plot = tmp_path / "bench.json", tmp_path / "busbw.png"
    code = main(["bench", "--backend", "gloo", "--world-size", "2", "-c", "reduce_scatter", "--sizes", "1K:4K",
                 "--iters", "2", "--warmup", "1", "--json", str(report), "--plot", str(plot)])
    assert code == 0
    rows = json.loads(report.read_text())["stats"]["rows"]
    assert [r["bytes"] for r in rows] == [1024, 2048, 4096]
    for row in rows:
        assert row["algbw_GBps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9)
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * bus_factor("reduce_scatter", 2))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "busbw (GB/s)" in capsys.readouterr().out
    assert leftover_processes() == []


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "4K:1K"], "--sizes 4K:1K"),
    (["--collective", "scan"], "unknown collective 'scan'"),
    (["--dtype", "float8"], "--dtype float8"),
    (["--world-size", "1"], "--world-size >= 2"),
])
def test_bench_bad_input_is_exit_2(argv, message, capsys):
    assert main(["bench", "--backend", "gloo", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_a_backend_that_supports_nothing_does_not_pass(tmp_path, capsys):
    empty = tmp_path / "empty.py"
    empty.write_text("class Empty:\n    def __init__(self, rank, world_size):\n        pass\n")
    assert main(["conform", "--backend", f"{empty}:Empty", "--world-size", "2", "-c", "allreduce", "--dtype", "int8",
                 "--op", "sum", "--sizes", "3"]) == 1
    out = capsys.readouterr().out
    assert "no case passed (1 unsupported)" in out and "FAILED" in out


@pytest.mark.slow
def test_strict_makes_a_known_finding_an_error(capsys):
    argv = ["conform", "--backend", "gloo", "--world-size", "2", "-c", "reduce", "--dtype", "int32", "--op", "sum", "--sizes", "5"]
    assert main(argv) == 0
    assert main([*argv, "--strict"]) == 1
    assert "error postcondition" in capsys.readouterr().out
