"""Plans written by MSCCL++'s own DSL (tests/mscclpp_dsl/, see its README)
verify, and the one the executor would refuse is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import json

from collspec.models.mscclpp import PlanFormatError, load, loads, verify

DSL = Path(__file__).parent / "mscclpp_dsl"
PLANS = sorted(p.name for p in DSL.glob("*.json") if p.name != "switch_reduce_test.json")


def test_the_dsl_plans_cover_every_checked_collective_and_both_modes():
    plans = [load(str(DSL / name)) for name in PLANS]
    assert {p.collective for p in plans} == {"allreduce", "allgather", "alltoall", "reduce_scatter"}
    assert {p.inplace for p in plans} == {True, False}
    ops = {op.name for p in plans for op in p.ops}
    assert {"put", "rres", "ppkt", "rppkt", "upkt", "glres", "gstore", "pipeline", "rlxwait", "copy", "pwsf"} <= ops


@pytest.mark.parametrize("name", PLANS)
def test_dsl_plan_verifies(name):
    verdict = verify(load(str(DSL / name)))
    assert verdict.ok, [str(v) for v in verdict.violations[:3]]


def test_the_dsl_op_the_executor_does_not_know_is_refused():
    path = DSL / "switch_reduce_test.json"
    with pytest.raises(PlanFormatError, match=r"gpus\[0\]\.threadblocks\[0\]\.ops\[0\]\.name: unknown operation 'glre'"):
        load(str(path))
    plan = json.loads(path.read_text())
    plan["collective"] = "allreduce"
    for gpu in plan["gpus"]:
        gpu["output_chunks"] = gpu["input_chunks"]
    with pytest.raises(PlanFormatError, match=r"gpus\[0\]\.threadblocks\[0\]\.ops\[0\]\.name: unknown operation 'glre'"):
        loads(json.dumps(plan), "glre.json")
