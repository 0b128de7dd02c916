"""What each synchronisation of the MSCCL++ executor orders, as the
verifier models it (docs/mscclpp.md): nop and barrier inside a GPU, release
and relaxed signals, semaphores, packets; each rule with a plan that breaks
it and the exact finding."""

from __future__ import annotations

import copy
import json

import pytest

from collspec.models.mscclpp import PlanFormatError, loads, verify
from collspec.models.mscclpp.corpus import DATA


def one_gpu(*tbs, semaphores=(), protocol="Simple"):
    """A 1-GPU in-place allreduce (2 chunks, 2 scratch chunks) with these thread blocks' ops."""
    return json.dumps({
        "name": "t", "collective": "allreduce", "protocol": protocol, "inplace": True,
        "gpus": [{
            "id": 0, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 2, "channels": [], "remote_buffers": [],
            "semaphores": [{"init_value": v} for v in semaphores],
            "threadblocks": [{"id": t, "ops": ops, "channels": []} for t, ops in enumerate(tbs)],
        }],
    })


def copy_op(src, si, dst, di):
    return {"name": "copy", "src_buff": [{"type": src, "index": si, "size": 1}], "dst_buff": [{"type": dst, "index": di, "size": 1}]}


NOP = {"name": "nop"}
TO_SCRATCH, BACK = copy_op("i", 0, "s", 0), copy_op("s", 0, "i", 0)


def messages(text):
    verdict = verify(loads(text, "t.json"))
    return verdict, [v.message for v in verdict.violations if v.is_error]


def test_ops_of_one_thread_block_need_a_nop_between_them():
    verdict, found = messages(one_gpu([TO_SCRATCH, BACK]))
    assert verdict.kinds() == {"race"}
    assert found[0].startswith("GPU 0 tb 0 op 0 (copy) and GPU 0 tb 0 op 1 (copy) both touch GPU 0's i[0], s[0]")
    assert messages(one_gpu([TO_SCRATCH, NOP, BACK]))[0].ok


def test_a_barrier_orders_thread_blocks_and_must_be_reached_by_all():
    barrier = {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2}
    assert messages(one_gpu([TO_SCRATCH, barrier], [barrier, BACK]))[0].ok
    verdict, found = messages(one_gpu([TO_SCRATCH], [BACK]))
    assert "race" in verdict.kinds()
    assert found[0].startswith("GPU 0 tb 0 op 0 (copy) and GPU 0 tb 1 op 0 (copy) both touch GPU 0's i[0], s[0]")
    verdict, found = messages(one_gpu([TO_SCRATCH, barrier], [BACK]))
    assert verdict.kinds() == {"deadlock", "race"}  # tb 1 never waits, so its copy also races with tb 0's
    assert found[0] == "GPU 0: barrier 0 (its instance 1) waits for 2 thread blocks but only 1 reach it (thread blocks 0); it never releases"


def test_semaphores_order_and_must_balance():
    release = {"name": "sem_release", "semaphore_ids": [0]}
    acquire = {"name": "sem_acquire", "semaphore_ids": [0]}
    assert messages(one_gpu([TO_SCRATCH, NOP, release], [acquire, NOP, BACK], semaphores=[0]))[0].ok
    # an initial value of 1 lets the acquire pass at once: the copies race, and the semaphore ends at 1 + 1 - 1 = 1
    verdict, found = messages(one_gpu([TO_SCRATCH, NOP, release], [acquire, NOP, BACK], semaphores=[1]))
    assert verdict.kinds() == {"race"}
    verdict, found = messages(one_gpu([TO_SCRATCH], [acquire, NOP, BACK], semaphores=[0]))
    assert verdict.kinds() == {"deadlock", "unmatched"}
    assert "GPU 0 tb 1 op 0 (sem_acquire) is acquire number 1 of semaphore 0 (initial value 0), but it is released only 0 time(s)" in found[0]
    verdict, found = messages(one_gpu([TO_SCRATCH, NOP, release], [], semaphores=[0]))
    assert found == ["semaphore 0 of GPU 0 is released 1 and acquired 0 time(s), so it ends at 1, not its initial 0; the next launch starts from 1"]


def test_relaxed_signals_order_execution_not_memory():
    plan = json.loads((DATA / "plan-reduce.json").read_text())
    for gpu in plan["gpus"]:  # the first signal/wait pair guards the copies into scratch
        ops = gpu["threadblocks"][0]["ops"]
        ops[2]["name"], ops[4]["name"] = "rlxsignal", "rlxwait"
    verdict, found = messages(json.dumps(plan))
    assert verdict.kinds() == {"race"}
    assert any(m.startswith("GPU 0 tb 0 op 6 (rres) and GPU 1 tb 0 op 0 (copy) both touch GPU 1's i[0], s[0]") for m in found)


def test_packets_order_and_a_read_of_unwritten_packets_hangs():
    put = {"name": "cpkt", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "s", "index": 0, "size": 1}]}
    unpack = {"name": "upkt", "src_buff": [{"type": "s", "index": 0, "size": 1}], "dst_buff": [{"type": "i", "index": 1, "size": 1}]}
    verdict, found = messages(one_gpu([put], [unpack], protocol="LL"))
    # the packets order the two, and the plan copies chunk 0 over chunk 1: the result check names it
    assert verdict.kinds() == {"missing-contribution", "postcondition"}
    assert "GPU 0 tb 1 op 0 (upkt) [in-place]: rank 0's i[1] holds rank 0's chunk 0, which the allreduce puts elsewhere" in " ".join(found)
    verdict, found = messages(one_gpu([unpack], protocol="LL"))
    assert found == ["GPU 0 tb 0 op 0 (upkt) reads packets of s[0] on GPU 0 that no op writes; it spins on their flags forever"]


def test_get_follows_the_executor_which_swaps_its_offsets():
    plan = json.loads((DATA / "plan-reduce.json").read_text())
    get = plan["gpus"][0]["threadblocks"][0]["ops"][7]
    assert get["name"] == "get"
    get["dst_buff"][0]["index"] = 2  # the DSL means: GPU 1's s[1] -> GPU 0's s[2]
    verdict = verify(loads(json.dumps(plan), "get.json"))
    lint = [v for v in verdict.violations if v.kind == "lint"]
    assert [v.details["rule"] for v in lint] == ["get-offsets-swapped"]
    # the executor reads GPU 1's s[2] (unset) into GPU 0's s[1]: the sum res computes from s[1] is wrong
    assert "missing-contribution" in verdict.kinds()


def test_one_channel_signalled_from_two_thread_blocks_is_refused():
    plan = json.loads((DATA / "plan-reduce_tbg.json").read_text())
    plan["gpus"][0]["threadblocks"][1]["channels"][0]["channel_ids"] = [0, 0]
    with pytest.raises(PlanFormatError, match=r"memory channel 0 of GPU 0 is signalled from thread blocks 0 and 1 of GPU 0"):
        loads(json.dumps(plan), "two.json") and verify(loads(json.dumps(plan), "two.json"))


def test_thread_block_groups_split_chunks_into_parts():
    plan = loads((DATA / "plan-reduce_pack_tbg.json").read_text(), "tbg.json")
    assert plan.parts == 2
    moved = sorted((op.gpu, op.srcs[0][2], op.srcs[0][3]) for op in plan.ops if op.name == "ppkt")
    assert {size for _, _, size in moved} == {1}  # each block of a group moves half a chunk (one cell of two)
    assert len(set(moved)) == len(moved)  # and the halves differ


def _port_plan():
    """multi_node_allgather (DSL, 8 GPUs over 2 nodes): GPU 0 tb 0 op 11 is a pwsf to GPU 4."""
    from pathlib import Path

    plan = json.loads((Path(__file__).parent / "mscclpp_dsl" / "multi_node_allgather.json").read_text())
    ops = plan["gpus"][0]["threadblocks"][0]["ops"]
    assert ops[11]["name"] == "pwsf" and ops[11]["channel_type"] == "port"
    return plan, ops


def test_a_port_put_is_copied_later_by_the_proxy():
    plan, ops = _port_plan()
    ops[11]["name"] = "pws"  # put with signal, no flush: the source may be read after the op
    rewrite = copy_op("o", 0, "o", 0)
    ops[12:12] = [NOP, rewrite]
    verdict, found = messages(json.dumps(plan))
    assert verdict.kinds() == {"race"}
    assert found[0].startswith("GPU 0 tb 0 op 11 (pws, by the proxy) and GPU 0 tb 0 op 13 (copy) both touch GPU 0's o[0]")
    flush = {"name": "flush", "channel_ids": ops[11]["channel_ids"], "channel_type": "port", "dst_buff": ops[11]["dst_buff"]}
    ops[12:12] = [flush]  # a flush returns after the proxy's copy
    assert messages(json.dumps(plan))[0].ok


def test_a_flush_without_dst_buff_flushes_nothing():
    plan, ops = _port_plan()
    ops[11]["name"] = "pws"
    ops[12:12] = [{"name": "flush", "channel_ids": ops[11]["channel_ids"], "channel_type": "port"}, NOP, copy_op("o", 0, "o", 0)]
    verdict = verify(loads(json.dumps(plan), "flush.json"))
    assert verdict.kinds() == {"race"}
    (lint,) = [v for v in verdict.violations if v.kind == "lint"]
    assert lint.details["rule"] == "flush-noop"


def test_a_port_put_without_signal_leaves_the_peer_waiting():
    plan, ops = _port_plan()
    ops[11]["name"] = "put"
    verdict, found = messages(json.dumps(plan))
    assert verdict.kinds() == {"deadlock"}
    assert found == ["GPU 4 tb 0 op 12 (wait) is wait number 2 on its port channel 0 (to GPU 0), but channel 0 of GPU 0 is signalled only 1 time(s); the wait never returns"]
    ops[12:12] = [{"name": "signal", "channel_ids": ops[11]["channel_ids"], "channel_type": "port"}]  # the FIFO delivers it after the copy
    assert messages(json.dumps(plan))[0].ok


def test_each_channel_to_itself_is_its_own_pair():
    """A GPU's port channels to itself: Communicator::connect makes each a
    connection of its own (its self case) and the semaphores are exchanged
    tag by tag, so channel k is paired with channel k. A signal on one and a
    wait on the other never meet (what the DSL's multi_node/allgather_tbg.py
    writes when its GPUs form one node)."""

    def plan(signal, wait):
        ops = [{"name": "signal", "channel_ids": [signal], "channel_type": "port"}, {"name": "wait", "channel_ids": [wait], "channel_type": "port"}, NOP, TO_SCRATCH]
        text = json.loads(one_gpu(ops))
        text["gpus"][0]["channels"] = [{"channel_type": "port", "connected_to": [0, 0]}]
        text["gpus"][0]["threadblocks"][0]["channels"] = [{"channel_type": "port", "channel_ids": [0, 1]}]
        return json.dumps(text)

    assert messages(plan(1, 1))[1] == []
    assert messages(plan(0, 1))[1] == [
        "GPU 0 tb 0 op 0 (signal) is signal number 1 on its port channel 0 to GPU 0, but GPU 0 waits on the paired channel only 0 time(s); the leftover signal lets a wait of the next launch return early",
        "GPU 0 tb 0 op 1 (wait) is wait number 1 on its port channel 1 (to GPU 0), but channel 1 of GPU 0 is signalled only 0 time(s); the wait never returns",
    ]
