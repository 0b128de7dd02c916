"""The plug-in protocol of contracts.md, as a user meets it.

A plain, correct class in the NCCL style (``tests/user_backends/nccl_style.py``:
equal blocks only, no ``_v`` methods, integer avg refused) must conform:
exit 0, its unequal-block cases reported not applicable (``n/a``) in the
table, the JSON report and the JUnit file, never passed and never failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from collspec.conformance.collectives import COLLECTIVES
from conformance_support import leftover_processes

pytestmark = pytest.mark.slow

NCCL_STYLE = Path(__file__).resolve().parent / "user_backends" / "nccl_style.py"


def unequal(case_id: str) -> bool:
    collective, count = case_id.split("/")[0], next(int(p[2:]) for p in case_id.split("/") if p.startswith("n="))
    return COLLECTIVES[collective].unequal(count, 4)


def test_a_plain_nccl_style_class_conforms_with_unequal_blocks_not_applicable(tmp_path):
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    result = subprocess.run(
        [sys.executable, "-m", "collspec", "conform", "--backend", f"{NCCL_STYLE}:NcclStyle", "--world-size", "4", "--quick",
         "--json", str(report), "--junit", str(junit)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert leftover_processes() == []
    data = json.loads(report.read_text())
    statuses = {case["case"]: case["status"] for case in data["cases"]}
    # every unequal-block case (reduce-scatter and all-gather, count % 4 != 0) is n/a, nothing else is
    assert {cid for cid, status in statuses.items() if status == "n/a"} == {cid for cid in statuses if unequal(cid)}
    assert {cid.split("/")[0] for cid in statuses if unequal(cid)} == {"reduce_scatter", "allgather"}
    assert all("reduce_scatter_v" in c["reason"] or "all_gather_v" in c["reason"] for c in data["cases"] if c["status"] == "n/a")
    stats = data["stats"]
    assert stats["not_applicable"] == sum(map(unequal, statuses)) > 0
    assert (stats["fail"], stats["crash"], stats["hang"], stats["not_run"], stats["restarts"]) == (0, 0, 0, 0, 0)
    assert stats["pass"] > 0 and data["ok"] is True
    # integer avg is refused, the missing methods are unsupported: warnings, never errors
    assert {v["kind"] for v in data["violations"]} == {"unsupported"}
    # equal blocks passed, unequal ones n/a: "=" in the matrix, never a plain pass
    assert data["capability"]["reduce_scatter"]["out of place"]["float32"]["sum"] == "equal-only"
    assert data["capability"]["allgather"]["in place"]["int32"]["-"] == "equal-only"
    table = result.stdout.splitlines()
    header = next(line for line in table if line.startswith("collective") and "n/a" in line)
    assert header.split()[header.split().index("n/a")] == "n/a"
    assert f"ok (0 errors; {stats['pass']} pass, {stats['unsupported']} unsupported, {stats['not_applicable']} n/a)" in table[-1]
    skipped = [case for case in ElementTree.parse(junit).iter("testcase") if (s := case.find("skipped")) is not None and s.get("type") == "n/a"]
    assert len(skipped) == stats["not_applicable"]
    assert skipped[0].find("skipped").get("message").startswith("not applicable: a count of ")


def test_unequal_blocks_go_to_the_v_methods_only():
    for name in ("reduce_scatter", "allgather"):
        collective = COLLECTIVES[name]
        assert collective.route(8, 4)[0] == collective.method
        assert collective.route(0, 4)[0] == collective.method
        assert collective.route(9, 4)[0] == collective.method + "_v"
        assert collective.route(9, 1)[0] == collective.method  # one rank: one block, always equal
    for name in ("allreduce", "broadcast", "reduce", "alltoall"):
        assert COLLECTIVES[name].route(9, 4)[0] == COLLECTIVES[name].method
