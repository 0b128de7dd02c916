"""Nothing a run starts or creates outlives it: no process, no entry of /dev/shm,
no MPI library file, whether the run ends, crashes, hangs or is ended by a signal.

Each run is ``collspec conform`` in a mount namespace with a /dev/shm and a /tmp
of its own (:mod:`private_shm`), so what is left there is the run's and nothing
else's, however many other programs share the machine; where namespaces cannot
be made, /dev/shm and the libraries' files in /tmp are compared before and after.
Two ranks, a few all-reduce cases each: the point is what is left, not the cases.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import private_shm
from collspec.conformance import mpi_libs
from conformance_support import ZOO, helper_alive, leftover_processes, left_behind, session_members, shared_entries

pytestmark = pytest.mark.slow
PRIVATE = private_shm.available()


def installed(library: str):
    return pytest.mark.skipif(not mpi_libs.library(library).available(), reason=f"{library} not installed (make install)")


def conform_command(tmp_path, *options: str) -> list[str]:
    return [sys.executable, "-m", "collspec", "conform", "--world-size", "2", "-c", "allreduce", "--dtype", "float32",
            "--op", "sum", *options, "--json", str(tmp_path / "report.json")]


def start(tmp_path, argv: list[str]) -> tuple[subprocess.Popen, set[str] | None]:
    """Start ``argv`` (in its private /dev/shm and /tmp where possible); the entries before it, where not."""
    env = dict(os.environ, COLLSPEC_ZOO_PIDS=str(tmp_path))
    before = None if PRIVATE else shared_entries()
    command = private_shm.command(str(tmp_path), argv) if PRIVATE else argv
    process = subprocess.Popen(command, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return process, before


def finish(process: subprocess.Popen, before: set[str] | None, timeout: float = 600) -> tuple[int, int, list[str], str]:
    """(exit status, process id of collspec, what it left, its stderr) once ``process`` ends."""
    try:
        _, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if before is None:
        found = private_shm.result(stderr)
        return found["code"], found["pid"], found["left"], stderr
    return process.returncode, process.pid, left_behind(before), stderr


#: backend options, the statuses expected: one clean run per kind of backend, and an MPI
#: algorithm that crashes (MPICH's noncommutative reduce-scatter on unequal counts aborts on
#: an assertion; its segment stays in /dev/shm unless the run removes it).
RUNS = [
    pytest.param(["--backend", "gloo", "--sizes", "5"], ["pass", "pass"], id="gloo"),
    pytest.param(["--backend", "shm", "--sizes", "5"], ["pass", "pass"], id="shm"),
    pytest.param(["--backend", "openmpi", "--sizes", "5"], ["pass", "pass"], id="openmpi",
                 marks=[installed("openmpi"), pytest.mark.mpi]),
    pytest.param(["--backend", "mpich", "-c", "reduce_scatter", "--dtype", "int32", "--sizes", "5",
                  "--algorithm", "reduce_scatter:noncommutative"], ["crash", "unsupported"], id="mpich-crash",
                 marks=[installed("mpich"), pytest.mark.mpi]),
]


@pytest.mark.parametrize("options, statuses", RUNS)
def test_a_run_leaves_nothing_in_shared_memory(tmp_path, options, statuses):
    code, _, left, stderr = finish(*start(tmp_path, conform_command(tmp_path, *options)))
    assert code == (1 if "crash" in statuses else 0), stderr[-2000:]
    assert [c["status"] for c in json.loads((tmp_path / "report.json").read_text())["cases"]] == statuses
    assert leftover_processes() == []
    assert left == []


def test_a_hang_ends_the_rank_s_helpers_too(tmp_path):
    backend = f"{ZOO / 'hangs_with_children.py'}:HangsWithChildren"
    code, _, left, stderr = finish(*start(tmp_path, conform_command(tmp_path, "--backend", backend, "--sizes", "0",
                                                                    "--timeout", "3")))
    assert code == 1, stderr[-2000:]
    assert [c["status"] for c in json.loads((tmp_path / "report.json").read_text())["cases"]] == ["hang", "hang"]
    helpers = [int(pid) for rank in (0, 1) for pid in (tmp_path / f"helpers.{rank}").read_text().split()]
    assert len(helpers) == 4 and [pid for pid in helpers if helper_alive(pid)] == []
    assert leftover_processes() == []
    assert left == []


def wait_for(condition, limit: float = 300.0) -> None:
    """Poll ``condition`` until it holds (readiness, not a timed assert: ``limit`` only bounds a broken run)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "the run never got to the hanging case"
        time.sleep(0.1)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_run_as_its_end_does(tmp_path, number):
    """SIGTERM (timeout, job schedulers) and SIGHUP: the report holds the finished cases,
    the status is 128 + the signal, no process of the run is left (its helpers, one of
    them in a session of its own, included) and nothing in /dev/shm."""
    backend = f"{ZOO / 'hangs_with_children.py'}:HangsWithChildren"
    process, before = start(tmp_path, conform_command(tmp_path, "--backend", backend, "--sizes", "5,0", "--timeout", "600"))
    try:
        wait_for(lambda: process.poll() is not None or all((tmp_path / f"hanging.{r}").exists() for r in (0, 1)))
        assert process.poll() is None, process.stderr.read()
        helpers = [int(pid) for rank in (0, 1) for pid in (tmp_path / f"helpers.{rank}").read_text().split()]
        process.send_signal(number)
    finally:
        code, pid, left, stderr = finish(process, before, timeout=120)
    name = signal.Signals(number).name
    assert code == 128 + number, stderr[-2000:]
    assert f"collspec conform: ended by {name}; the report holds the cases finished before it" in stderr
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["stats"]["interrupted"] == name
    cases = written["cases"]
    assert [c["status"] for c in cases] == ["pass", "pass", "not-run", "not-run"]
    assert {c["reason"] for c in cases[2:]} == {f"not run: the run was ended by {name}"}
    assert [pid for pid in helpers if helper_alive(pid)] == []
    assert session_members(pid) == []
    assert leftover_processes() == []
    assert left == []
