"""Hostile and malformed MSCCL++ plans: every one is refused with exit 2,
the file and the JSON path of the field, never a traceback."""

from __future__ import annotations

import copy
import json

import pytest

from collspec.cli import main
from collspec.models.mscclpp import PlanFormatError, loads, verify
from collspec.models.mscclpp import parse
from collspec.models.mscclpp.corpus import DATA

BASE = json.loads((DATA / "plan-reduce.json").read_text())


def mutated(path: str, value):
    """BASE with the field at ``path`` (dots and [k]) set to ``value``; the
    value ``...`` deletes the field."""
    plan = copy.deepcopy(BASE)
    keys = [int(k) if k.isdigit() else k for k in path.replace("[", ".").replace("]", "").split(".")]
    target = plan
    for k in keys[:-1]:
        target = target[k]
    if value is ...:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return json.dumps(plan)


OP = "gpus[0].threadblocks[0].ops"
CASES = [
    ("top level not an object", "[]", "(top level): expected an object, got a list"),
    ("truncated", json.dumps(BASE)[:100], "line 1 column 86: invalid JSON (Unterminated string starting at); is the file truncated?"),
    ("NaN", mutated(f"{OP}[0].src_buff[0].index", 0).replace('"index": 2', '"index": NaN', 1), "invalid JSON: NaN is not a JSON number"),
    ("deep nesting", "[" * 100_000, "JSON nested too deeply"),
    ("missing gpus", mutated("gpus", ...), "gpus: missing"),
    ("wrong type", mutated("inplace", "yes"), 'inplace: expected true or false, got "yes"'),
    ("boolean as a number", mutated("gpus[0].input_chunks", True), "gpus[0].input_chunks: expected an integer, got true"),
    ("huge count", mutated("gpus[0].scratch_chunks", 10**30), f"gpus[0].scratch_chunks: {10**30} is out of range 0..1048576"),
    ("gpu id", mutated("gpus[1].id", 7), "gpus[1].id: 7 but GPUs must be listed by id 0..1 in order"),
    ("peer out of range", mutated("gpus[0].channels[0].connected_to[0]", 2), "gpus[0].channels[0].connected_to[0]: 2 is out of range 0..1"),
    ("chunk index out of range", mutated(f"{OP}[0].src_buff[0].index", 9), f"{OP}[0].src_buff[0].index: chunks 9..10 of i on GPU 0, which has 4 chunk(s) (0..3)"),
    ("negative size", mutated(f"{OP}[0].src_buff[0].size", -1), f"{OP}[0].src_buff[0].size: -1 is out of range 1..1048576"),
    ("channel id", mutated(f"{OP}[2].channel_ids", [3]), f"{OP}[2].channel_ids[0]: 3 is out of range 0..0"),
    ("remote buffer id", mutated(f"{OP}[7].src_buff[0].buffer_id", -1), f"{OP}[7].src_buff[0].buffer_id: -1 is out of range 0..1"),
    ("unknown op", mutated(f"{OP}[1].name", "teleport"), f"{OP}[1].name: unknown operation 'teleport'"),
    ("port channel missing", mutated(f"{OP}[1]", {"name": "flush", "channel_ids": [0], "channel_type": "port"}), f"{OP}[1].channel_ids[0]: 0: there is no port channel in this thread block"),
    ("get over a port channel refused", mutated(f"{OP}[7].channel_type", "port"), f"{OP}[7].channel_type: operation 'get' over a port channel: the executor implements it for memory channels only; refused"),
    ("pws over a memory channel refused", mutated("gpus[1].threadblocks[0].ops[10].name", "pws"), "gpus[1].threadblocks[0].ops[10].channel_type: pws needs channel_type 'port', got \"memory\""),
    ("in-place sendrecv refused", mutated("collective", "sendrecv"), "collective: 'sendrecv' has no postcondition in collspec, and in place its input and output alias in a way only the collective defines"),
    ("too many ops", mutated(OP, BASE["gpus"][0]["threadblocks"][0]["ops"] * 5), f"{OP}[64]: the thread block has more than 64 operations"),
    ("too many channels in an op", mutated(f"{OP}[2].channel_ids", [0] * 9), f"{OP}[2].channel_ids: 9 entries, more than the 8 allowed"),
    # the DSL's multi_node/reducescatter_pkt.py with 8 GPUs per node writes a ppkt of 14 sources and 14
    # destinations; the executor's Operation holds 10 (MAX_LOCAL_BUFFER_PER_OPERATION + MAX_CHANNEL_PER_OPERATION)
    # and setupOperation copies nInputs entries without a check
    ("too many buffers in an op", mutated(f"{OP}[0].src_buff", BASE["gpus"][0]["threadblocks"][0]["ops"][0]["src_buff"] * 11), f"{OP}[0].src_buff: 11 entries, more than the 10 allowed"),
    ("semaphore id", mutated(f"{OP}[1]", {"name": "sem_acquire", "semaphore_ids": [0]}), f"{OP}[1].semaphore_ids[0]: 0: there is no semaphore on GPU 0"),
    ("barrier id", mutated(f"{OP}[1]", {"name": "barrier", "barrier_id": 16, "num_threadblocks": 1}), f"{OP}[1].barrier_id: 16 is out of range 0..15"),
    ("sizes differ", mutated(f"{OP}[6].src_buff[1].size", 2), f"{OP}[6]: rres moves ranges of different sizes ([1, 2] cells)"),
    ("packets outside scratch", mutated(f"{OP}[0]", {"name": "upkt", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}), f"{OP}[0].src_buff[0]: packets live in a scratch buffer"),
    ("cells beyond the limit", mutated("gpus", [dict(BASE["gpus"][0], id=k, input_chunks=1 << 20, output_chunks=1 << 20) for k in range(8)]), "is more cells than the 8388608 this checker holds"),
]


@pytest.mark.parametrize("text, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_plan_is_refused_with_the_path(text, message):
    with pytest.raises(PlanFormatError) as error:
        loads(text, "bad.json")
    assert str(error.value).startswith("bad.json: ")
    assert message in str(error.value)


def test_file_size_is_bounded(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(BASE))
    monkeypatch.setattr(parse, "MAX_FILE_BYTES", 100)
    with pytest.raises(PlanFormatError, match=r"big.json: the file has \d+ bytes, more than the 100 this checker reads"):
        parse.load(str(path))


def test_wait_cycle_is_a_deadlock_not_a_crash():
    plan = copy.deepcopy(BASE)
    for gpu in plan["gpus"]:  # both GPUs wait before they signal
        ops = gpu["threadblocks"][0]["ops"]
        ops[2], ops[4] = ops[4], ops[2]
    verdict = verify(loads(json.dumps(plan), "cycle.json"))
    assert verdict.kinds() == {"deadlock"}
    cycle = [v for v in verdict.violations if "a cycle of" in v.message]
    assert cycle and "GPU 0 tb 0 op 2 (wait) waits for GPU 1 tb 0 op 4 (signal)" in cycle[0].message


def test_cli_refuses_with_exit_2_and_one_line(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(mutated(f"{OP}[0].src_buff[0].index", 9))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"collspec check: error: {path}: {OP}[0].src_buff[0].index: chunks 9..10 of i on GPU 0, which has 4 chunk(s) (0..3)"


def test_cli_tells_a_truncated_plan_from_a_schedule(tmp_path, capsys):
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(BASE)[:400])
    assert main(["check", str(path)]) == 2
    assert "cut.json: line 1 column 401: invalid JSON (Expecting ',' delimiter); is the file truncated?" in capsys.readouterr().err


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            yield from _paths(v, prefix + (k,))


@pytest.mark.parametrize("name", ["plan-transfer_pack.json", "exec-allreduce_packet.json"])
def test_every_field_replaced_by_junk_is_a_verdict_or_a_clean_refusal(name):
    """Each field of a real plan, replaced in turn by null, a string, -1, a
    huge number, a list or an object, or deleted: the verifier answers with
    a verdict or a PlanFormatError (exit 2), never another exception."""
    base = json.loads((DATA / name).read_text())
    outcomes = {"verdict": 0, "refused": 0}
    for path in list(_paths(base))[1:]:
        for junk in (None, "x", -1, 10**12, [], {}, ...):
            plan = copy.deepcopy(base)
            target = plan
            for k in path[:-1]:
                target = target[k]
            if junk is ...:
                if isinstance(target, list):
                    continue
                del target[path[-1]]
            else:
                target[path[-1]] = junk
            try:
                verify(loads(json.dumps(plan), "junk.json"))
                outcomes["verdict"] += 1
            except PlanFormatError as error:
                assert str(error).startswith("junk.json: ")
                outcomes["refused"] += 1
    assert outcomes["refused"] > 100 and outcomes["verdict"] > 0


@pytest.mark.parametrize("field, value, message", [
    ("name", "glre", "name: unknown operation 'glre' (execution_plan.cc getOpType knows nop, barrier,"),
    ("channel_type", "port", "channel_type: operation 'rres' over a port channel: the executor implements it for memory channels only; refused"),
])
def test_cli_refuses_an_op_it_cannot_model_with_exit_2_naming_it(tmp_path, capsys, field, value, message):
    path = tmp_path / "op.json"
    path.write_text(mutated(f"{OP}[6].{field}", value))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"collspec check: error: {path}: {OP}[6].{message}")
