"""The bundled MSCCL++ plans (real files from microsoft/mscclpp) get
exactly the verdicts recorded in collspec.models.mscclpp.corpus, and
`collspec verify` checks them; exported plans verify and keep the
executor's limits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collspec.cli import main
from collspec.commands.verify import PARTS
from collspec.models.generators import generate
from collspec.models.mscclpp import load, loads, verify
from collspec.models.mscclpp.corpus import DATA, EXPECTED, files
from collspec.models.mscclpp.export import ExportError, to_plan

SHARED = Path("/work/shared/data/mscclpp")


def test_every_bundled_plan_has_an_expected_verdict():
    assert {p.name for p in files()} == set(EXPECTED)
    assert len(EXPECTED) == 11
    assert (DATA / "SOURCES.md").exists()


@pytest.mark.skipif(not SHARED.exists(), reason="the shared data folder is not on this machine")
def test_bundled_plans_are_the_shared_files_unchanged():
    for path in SHARED.glob("*.json"):
        assert (DATA / path.name).read_bytes() == path.read_bytes()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_plan_gets_its_recorded_verdict(name):
    verdict = verify(load(str(DATA / name)))
    expected = EXPECTED[name]
    assert verdict.kinds() == expected.errors, [str(v) for v in verdict.violations]
    assert {v.details["rule"] for v in verdict.violations if v.kind == "lint"} == expected.lint


def test_the_tbg_race_is_the_slicing_mismatch():
    """plan-reduce_tbg.json: a real bug. GPU 1 splits its copy of i[0:2] over
    two blocks (tb 1 copies chunk 1), GPU 0 splits each chunk over two blocks
    (tb 0 reads the first half of chunk 1) but tb 0 waits only for GPU 1's
    tb 0. The same plan without thread block groups (plan-reduce.json) is right."""
    verdict = verify(load(str(DATA / "plan-reduce_tbg.json")))
    races = [v.message for v in verdict.violations if v.kind == "race"]
    assert races[0].startswith("GPU 0 tb 0 op 7 (get) and GPU 1 tb 1 op 0 (copy) both touch GPU 1's s[1.0]")
    assert len(races) == 3
    assert verify(load(str(DATA / "plan-reduce.json"))).ok


def test_verify_has_a_part_for_the_plans():
    (part,) = [f for name, f in PARTS if name == "check MSCCL++ plans"]
    ok, detail = part()
    assert ok, detail
    assert detail.startswith("11 plans as expected")


CASES = [("ring", "allreduce", 5), ("ring", "allgather", 4), ("ring", "reduce_scatter", 4), ("direct", "alltoall", 4),
         ("recursive-doubling", "allreduce", 8), ("binary-tree", "allreduce", 6), ("hub", "allreduce", 5), ("halving-doubling", "allreduce", 8),
         # more than 16 peers or 64 ops: a rank's sequence continues in further thread blocks
         ("direct", "alltoall", 24), ("direct", "allgather", 20), ("hub", "allreduce", 40), ("halving-doubling", "reduce_scatter", 16),
         ("recursive-doubling", "allgather", 16), ("ring", "allreduce", 3)]


def executor_limit_breaches(plan: dict) -> list[str]:
    """What in ``plan`` the executor cannot hold, read off the JSON
    (execution_common.hpp): 64 ops per thread block with a pipeline's inner
    ops counted, 16 channels and 16 remote buffers of a type per thread
    block, 8 channels, 10 buffers and 16 semaphores per op, barrier ids
    below 16; and the references must fit the lists they index."""
    out = []
    for gpu in plan["gpus"]:
        for tb in gpu["threadblocks"]:
            where = f"GPU {gpu['id']} tb {tb['id']}"
            if sum(1 + len(o.get("ops", [])) for o in tb["ops"]) > 64:
                out.append(f"{where}: more than 64 ops")
            listed: dict[str, list] = {}
            for c in tb["channels"]:
                listed.setdefault(c["channel_type"], []).extend(c["channel_ids"])
            refs: dict[str, list] = {}
            for ref in tb["remote_buffer_refs"]:
                refs.setdefault(ref["access_channel_type"], []).extend(ref["remote_buffer_ids"])
            for kind, ids in listed.items():
                if len(ids) > 16 or not all(0 <= i < len(gpu["channels"][0]["connected_to"]) for i in ids):
                    out.append(f"{where}: {kind} channels {ids}")
            for kind, ids in refs.items():
                if len(ids) > 16 or not all(0 <= i < len(gpu["remote_buffers"]) for i in ids):
                    out.append(f"{where}: {kind} remote buffers {ids}")
            for k, op in enumerate(tb["ops"]):
                if len(op.get("channel_ids", [])) > 8 or len(op.get("src_buff", [])) > 10 or len(op.get("dst_buff", [])) > 10:
                    out.append(f"{where} op {k}: too many channels or buffers")
                if len(op.get("semaphore_ids", [])) > 16 or not all(0 <= i < len(gpu["semaphores"]) for i in op.get("semaphore_ids", [])):
                    out.append(f"{where} op {k}: semaphores {op.get('semaphore_ids')}")
                if op.get("barrier_id", 0) >= 16:
                    out.append(f"{where} op {k}: barrier id")
                for b in op.get("dst_buff", []) + op.get("src_buff", []):
                    if "buffer_id" in b and not 0 <= b["buffer_id"] < len(refs.get(op.get("channel_type"), [])):
                        out.append(f"{where} op {k}: buffer_id {b['buffer_id']}")
    return out


def test_the_limit_reader_sees_a_breach():
    plan = json.loads(to_plan(generate("ring", "allreduce", 3)))
    assert executor_limit_breaches(plan) == []
    tb = plan["gpus"][0]["threadblocks"][0]
    tb["ops"] = tb["ops"] * 10
    tb["channels"] = [{"channel_type": "memory", "channel_ids": [0] * 17}]
    assert executor_limit_breaches(plan) == ["GPU 0 tb 0: more than 64 ops", "GPU 0 tb 0: memory channels " + str([0] * 17)]


@pytest.mark.parametrize("algorithm, collective, n", CASES)
def test_exported_plan_verifies_and_keeps_the_executor_limits(algorithm, collective, n):
    text = to_plan(generate(algorithm, collective, n))
    plan = json.loads(text)
    assert plan["collective"] == collective.replace("_", "")
    assert executor_limit_breaches(plan) == []
    verdict = verify(loads(text, "exported.json"))
    assert verdict.ok, [str(v) for v in verdict.violations[:3]]


def test_a_long_ring_is_chained_over_thread_blocks_by_semaphores():
    plan = json.loads(to_plan(generate("ring", "allreduce", 24)))
    tbs = plan["gpus"][0]["threadblocks"]
    assert len(tbs) > 1
    assert tbs[1]["ops"][0] == {"name": "sem_acquire", "semaphore_ids": [0]}
    assert tbs[0]["ops"][-1] == {"name": "sem_release", "semaphore_ids": [0]}
    assert verify(loads(json.dumps(plan), "ring24.json")).ok


def test_an_exported_bug_is_caught():
    text = to_plan(generate("ring-seed", "reduce_scatter", 4))
    assert not verify(loads(text, "seed.json")).ok


def test_export_refuses_what_a_plan_cannot_say():
    with pytest.raises(ExportError, match="an MSCCL\\+\\+ plan for 'broadcast' is not written"):
        to_plan(generate("ring", "broadcast", 4))


def test_cli_export_mscclpp_then_check(tmp_path, capsys):
    out = tmp_path / "ring.json"
    assert main(["export", "-a", "ring", "-c", "allreduce", "-n", "4", "--format", "mscclpp", "-o", str(out)]) == 0
    assert main(["check", str(out), "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] and report["stats"]["gpus"] == 4
    assert main(["export", "-a", "ring", "-c", "allreduce", "-n", "4", "-o", str(tmp_path / "ring.xml")]) == 0
    assert (tmp_path / "ring.xml").read_text().startswith("<algo")
    capsys.readouterr()


def test_cli_check_reports_a_real_plan_bug_with_exit_1(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    shutil.copy(DATA / "plan-reduce_tbg.json", plan)
    assert main(["check", str(plan), "--json", str(tmp_path / "r.json")]) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    race = report["violations"][0]
    assert race["kind"] == "race" and race["gpu"] == 0 and race["tb"] == 0 and race["op"] == 7
    assert race["path"] == "gpus[0].threadblocks[0].ops[7]"
    capsys.readouterr()
