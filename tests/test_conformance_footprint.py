"""collspec.conformance.footprint: which entries of /dev/shm a run removes.

Fed a folder standing for /dev/shm with entries of every kind: older than the
run, made during it and mapped or held open by a process of the run, made
during it by another program, replaced by another file. Only the second kind
goes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from collspec.conformance import footprint

HOLDER = """
import mmap, sys, time
maps = []
for path in sys.argv[1].split(","):
    with open(path, "r+b") as handle:
        maps.append(mmap.mmap(handle.fileno(), 0))
held = open(sys.argv[2], "rb")
print("ready", flush=True)
time.sleep(600)
"""


@pytest.fixture
def shm(tmp_path, monkeypatch):
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setattr(footprint, "SHM", str(folder))
    return folder


def make(folder, *names):
    for name in names:
        (folder / name).write_bytes(b"\0" * 4096)


def test_only_what_appeared_during_the_run_and_its_processes_used_is_removed(shm):
    make(shm, "older")
    seen = footprint.Footprint(str(shm / "collspec-conform-run"))
    (shm / "collspec-conform-run").mkdir()
    (shm / "made-by-a-rank").mkdir()
    make(shm, "mapped", "opened", "another-program", "replaced", "made-by-a-rank/segment")
    maps = ",".join(str(shm / name) for name in ("older", "mapped", "replaced", "made-by-a-rank/segment"))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, maps, str(shm / "opened")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"ready\n"
        seen.observe([holder.pid])
    finally:
        holder.kill()
        holder.wait()
    make(shm, "replacement")
    os.replace(shm / "replacement", shm / "replaced")  # another program's file now, under the same name
    assert seen.remove() == ["made-by-a-rank", "mapped", "opened"]
    assert sorted(os.listdir(shm)) == ["another-program", "collspec-conform-run", "older", "replaced"]
    seen.close()


def test_an_entry_appearing_wakes_the_watcher(shm):
    seen = footprint.Footprint(str(shm / "collspec-conform-run"))
    assert seen._inotify is not None, "inotify is not available here"
    make(shm, "new-segment")
    assert seen.wait(60.0) is True  # the event is already queued: no waiting on the clock
    seen.close()


def test_the_private_folder_goes_to_every_process_and_open_mpi_s_segments():
    assert footprint.variables("/run/x/tmp", None) == {"TMPDIR": "/run/x/tmp"}
    assert footprint.variables("/run/x/tmp", "openmpi") == {"TMPDIR": "/run/x/tmp",
                                                            "OMPI_MCA_btl_sm_backing_directory": "/run/x/tmp"}
