"""Nothing a run starts or creates outlives it: no process, no entry of /dev/shm,
no MPI library file, whether the run ends, crashes, hangs or is ended by a signal.

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

from collspec.conformance import mpi_libs
from collspec.conformance.conform import conform
from conformance_support import ZOO, leftover_processes, left_behind, session_members, shared_entries

pytestmark = pytest.mark.slow


def helper_alive(pid: int) -> bool:
    """Whether ``pid`` is still a zoo backend's sleeping helper (not a zombie, not a reused id)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"time.sleep(600)" in handle.read()
    except (OSError, IndexError):
        return False


def installed(library: str):
    return pytest.mark.skipif(not mpi_libs.library(library).available(), reason=f"{library} not installed (make install)")


#: backend, conform() options, the statuses expected: one clean run per kind of backend, and
#: an MPI algorithm that crashes (MPICH's noncommutative reduce-scatter on unequal counts
#: aborts on an assertion; its segments stay in /dev/shm unless the run removes them).
RUNS = [
    pytest.param("gloo", {}, ["pass", "pass"], id="gloo"),
    pytest.param("shm", {}, ["pass", "pass"], id="shm"),
    pytest.param("openmpi", {}, ["pass", "pass"], id="openmpi", marks=[installed("openmpi"), pytest.mark.mpi]),
    pytest.param("mpich", {"collectives": ["reduce_scatter"], "dtypes": ["int32"], "sizes": [5],
                           "algorithms": ["reduce_scatter:noncommutative"]},
                 ["crash", "unsupported"], id="mpich-crash", marks=[installed("mpich"), pytest.mark.mpi]),
]


@pytest.mark.parametrize("backend, options, statuses", RUNS)
def test_a_run_leaves_nothing_in_shared_memory(backend, options, statuses):
    before = shared_entries()
    chosen = {"collectives": ["allreduce"], "dtypes": ["float32"], "ops": ["sum"], "sizes": [5], **options}
    result = conform(backend, 2, "default", **chosen)
    assert [o.status for o in result.outcomes] == statuses
    assert leftover_processes() == []
    assert left_behind(before) == []


def test_a_hang_ends_the_rank_s_helpers_too(tmp_path, monkeypatch):
    monkeypatch.setenv("COLLSPEC_ZOO_PIDS", str(tmp_path))
    before = shared_entries()
    result = conform(str(ZOO / "hangs_with_children.py:HangsWithChildren"), 2, "default", collectives=["allreduce"],
                     dtypes=["float32"], ops=["sum"], sizes=[0], timeout=3)
    assert [o.status for o in result.outcomes] == ["hang", "hang"]
    helpers = [int(pid) for rank in (0, 1) for pid in (tmp_path / f"helpers.{rank}").read_text().split()]
    assert len(helpers) == 4 and [pid for pid in helpers if helper_alive(pid)] == []
    assert leftover_processes() == []
    assert left_behind(before) == []


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
    before = shared_entries()
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "collspec", "conform", "--backend", f"{ZOO / 'hangs_with_children.py'}:HangsWithChildren",
               "--world-size", "2", "-c", "allreduce", "--dtype", "float32", "--op", "sum", "--sizes", "5,0",
               "--timeout", "600", "--json", str(report)]
    process = subprocess.Popen(command, env=dict(os.environ, COLLSPEC_ZOO_PIDS=str(tmp_path)), start_new_session=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: process.poll() is not None or all((tmp_path / f"hanging.{r}").exists() for r in (0, 1)))
        assert process.poll() is None, process.stderr.read().decode()
        helpers = [int(pid) for rank in (0, 1) for pid in (tmp_path / f"helpers.{rank}").read_text().split()]
        process.send_signal(number)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    name = signal.Signals(number).name
    assert code == 128 + number
    assert process.stderr.read().decode().strip().endswith(f"collspec conform: ended by {name}; "
                                                           "the report holds the cases finished before it")
    cases = json.loads(report.read_text())["cases"]
    assert [c["status"] for c in cases] == ["pass", "pass", "not-run", "not-run"]
    assert {c["reason"] for c in cases[2:]} == {f"not run: the run was ended by {name}"}
    assert [pid for pid in helpers if helper_alive(pid)] == []
    assert session_members(process.pid) == []
    assert leftover_processes() == []
    assert left_behind(before) == []
