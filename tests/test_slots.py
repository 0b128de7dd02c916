"""Bounded buffer slots (NCCL_STEPS): deadlocks that appear only when a
message does not fit the slots of its connection, for step schedules
(:mod:`collspec.models.slots`) and MSCCL XML (:mod:`collspec.models.msccl.order`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.msccl import loads, verify
from collspec.models.slots import slot_deadlocks
from msccl_programs import program, step


def _ring(chunk, n=4):
    return generate("nccl-ring", "allreduce", n, channels=1, chunk=chunk, count=n * chunk)


@pytest.mark.parametrize("chunk, slots, slot_size, dead", [
    (8, 8, 1, False),   # a chunk of 8 cells fills the 8 slots exactly
    (9, 8, 1, True),    # one cell more: every rank of the ring waits in its first send
    (9, 8, 2, False),   # 2 cells a slot: 5 slots
    (4, 8, 1, False),   # NCCL's own sizing: a chunk is 4 of the 8 slots (ALLREDUCE_CHUNKSTEPS)
])
def test_the_ring_deadlocks_only_when_a_chunk_exceeds_the_slots(chunk, slots, slot_size, dead):
    result = check(_ring(chunk), slots=slots, slot_size=slot_size)
    assert ("deadlock" in result.kinds()) == dead and result.ok != dead


def test_the_ring_deadlock_report_names_the_step_the_cycle_and_the_sizes():
    (v,) = slot_deadlocks(_ring(9), slots=8)
    assert v.kind == "deadlock" and v.step == 0
    assert v.message == ("step 0 (loop 0 step 0: send -> recvReduceSend): ranks 0 -> 1 -> 2 -> 3 -> 0 each send 9 slots to the next "
                         "before receiving, and a connection holds 8 slots (of 1 cell): no send completes")
    assert v.details == {"cycle": [0, 1, 2, 3], "slots": 8, "slot_size": 1, "slots_needed": [9, 9, 9, 9], "ranks_stuck": 4}
    assert check(_ring(9)).ok  # unbounded slots (the default): no deadlock


def test_a_chain_of_oversized_sends_waits_but_does_not_deadlock():
    chain = generate("nccl-ring", "broadcast", 4, channels=1, chunk=32, count=64)
    assert slot_deadlocks(chain, slots=1) == []


def _pair(cnt):
    """Two GPUs, one thread block each: send cnt chunks to the other, then receive; twice."""
    def steps(me):
        o = 1 - me
        return [step(0, "s", srcoff=cnt * o, dstoff=cnt * o, cnt=cnt), step(1, "rrc", srcoff=cnt * me, dstoff=cnt * me, cnt=cnt),
                step(2, "s", srcoff=cnt * me, dstoff=cnt * me, cnt=cnt), step(3, "r", srcoff=cnt * o, dstoff=cnt * o, cnt=cnt)]
    return loads(program([(0, [(1, 1, 0, steps(0))]), (1, [(0, 0, 0, steps(1))])], chunks=2 * cnt, sizes=(2 * cnt, 0, 0)))


def test_msccl_send_before_receive_deadlocks_only_past_the_slots():
    assert verify(_pair(2)).ok and verify(_pair(2), slots=2).ok and verify(_pair(4), slots=8, slot_size=2).ok
    verdict = verify(_pair(2), slots=1)
    dead = [v.message for v in verdict.violations if v.kind == "deadlock"]
    assert dead[-1] == ("GPU 0: a cycle of 2 waits that never ends: GPU 0 tb 0 step 0 (s) sends more than the slots hold, so waits for "
                        "its receiver to pass GPU 1 tb 0 step 0 (s), which sends more than the slots hold, so waits for its receiver "
                        "to pass GPU 0 tb 0 step 0 (s)")
    assert verdict.stats["slots"] == {"slots": 1, "slot_size": 1} and verdict.stats["result"].startswith("not checked")


def test_msccl_messages_queue_until_a_receive_frees_slots():
    # one GPU sends three 1-chunk messages before the other receives any: 2 slots hold two of them,
    # the third waits for the first receive, which runs after the receiver's own send: no cycle, no deadlock
    sender = [step(0, "s", srcoff=0, dstoff=0), step(1, "s", srcoff=1, dstoff=1), step(2, "s", srcoff=2, dstoff=2)]
    receiver = [step(0, "r", srcoff=0, dstoff=0), step(1, "r", srcoff=1, dstoff=1), step(2, "r", srcoff=2, dstoff=2)]
    text = program([(0, [(1, -1, 0, sender)]), (1, [(-1, 0, 0, receiver)])], chunks=3, sizes=(3, 0, 0), coll="broadcast")
    from collspec.models.msccl.order import SLOTS, analyse

    order = analyse(loads(text), slots=2)
    assert order.complete and [(int(a), int(b)) for a, b, k in zip(order.edge_src, order.edge_dst, order.edge_kind) if k == SLOTS] == [(3, 2)]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "collspec", "check", *args], capture_output=True, text=True)


def test_cli_slots_report_and_bad_input():
    ring = ["-a", "nccl-ring", "-n", "4", "--option", "channels=1", "--option", "chunk=16", "--option", "count=64"]
    dead = _cli(*ring, "--slots", "8", "--slot-size", "1")
    assert dead.returncode == 1 and "error deadlock (step 0): step 0 (loop 0 step 0: send -> recvReduceSend): ranks 0 -> 1 -> 2 -> 3 -> 0 each send 16 slots" in dead.stdout
    assert _cli(*ring, "--slots", "8", "--slot-size", "2").returncode == 0
    for option, message in ((["--slots", "0"], "--slots 0: a connection holds at least 1 slot (NCCL_STEPS is 8)"),
                            (["--slots", "8", "--slot-size", "0"], "--slot-size 0: a slot holds at least 1 cell")):
        bad = _cli(*ring, *option)
        assert bad.returncode == 2 and bad.stderr.strip() == f"collspec check: error: {message}"


def test_nccl_pat_messages_of_post_frequency_blocks_fit_nccls_slots():
    # N = 64, count 1, chunk 4: NCCL's PAT aggregates 32 blocks a step but posts them
    # in messages of postFreq = 4, each a slot of the connection's NCCL_STEPS (8):
    # no deadlock at 8 slots; at 2 slots the first message of 4 blocks waits in a cycle
    from collspec.models.generators import generate
    from collspec.models.slots import slot_deadlocks

    for collective in ("reduce_scatter", "allgather"):
        schedule = generate("nccl-pat", collective, 64, count=1, chunk=4)
        assert slot_deadlocks(schedule, slots=8) == []
    found = slot_deadlocks(generate("nccl-pat", "allgather", 64, count=1, chunk=4), slots=2)
    assert [v.kind for v in found] == ["deadlock"]
    assert found[0].message.startswith("step 2 (loop 0 message 2: distance 8, first offset 8): ranks 0 -> 56 -> 48 -> 40 -> 32 -> 24 -> 16 -> 8 -> 0 "
                                       "each send 4 slots to the next before receiving")


def test_nccl_pat_default_messages_are_one_nccl_slot_each():
    # N = 64, count 2 float32: NCCL's 64 KiB chunk gives postFreq 32 = aggFactor, one message a step
    # of up to 32 blocks of 2 elements; a slot of NCCL's (512 KiB, 131072 float32) holds any of them
    from collspec.models.generators import generate
    from collspec.models.slots import slot_deadlocks

    for collective in ("reduce_scatter", "allgather"):
        assert slot_deadlocks(generate("nccl-pat", collective, 64), slots=8, slot_size=131072) == []
    found = slot_deadlocks(generate("nccl-pat", "reduce_scatter", 64), slots=8, slot_size=1)
    assert [v.kind for v in found] == ["deadlock"]
    assert found[0].message.startswith("step 0 (loop 0 message 0: distance 1, first offset 63): ranks 0 -> 1 -> 2")
    assert "each send 64 slots to the next before receiving" in found[0].message


@pytest.mark.parametrize("algorithm, collective, options, cells", [
    ("nccl-ring", "allreduce", ["count=600000"], 131072),            # Simple: 512 KiB of float32
    ("nccl-ring", "allreduce", ["count=600000", "dtype=float16"], 262144),
    ("nccl-ring", "allgather", ["count=300000", "protocol=ll"], 8192),  # LL: 32 KiB of data a slot
    ("nccl-pat", "reduce_scatter", ["count=60000"], 131072),
    ("nccl-tree", "allreduce", ["count=100000", "protocol=ll128"], 144000),
])
def test_nccl_algorithms_default_to_nccls_slot_so_nccls_own_chunks_never_deadlock(algorithm, collective, options, cells):
    from collspec.cli import build_parser as _parser

    # NCCL's ring chunk at its default size is ALLREDUCE_CHUNKSTEPS (4) of the 8 slots, PAT's and the
    # tree's one: with the slot of NCCL's buffer as the default slot size, no false deadlock; with one
    # cell a slot (the default for other algorithms and files) the same schedule deadlocks
    from collspec.commands.check import builtin_slot_size

    args = ["-a", algorithm, "-c", collective, "-n", "4", *[x for o in options for x in ("--option", o)], "--slots", "8"]
    parsed = _parser().parse_args(["check", *args])
    assert builtin_slot_size(parsed) == cells
    assert _cli(*args).returncode == 0
    assert _cli(*args, "--slot-size", "1").returncode == 1


def test_each_nccl_channel_is_its_own_connection():
    # NCCL gives every channel its own connection to a peer (NCCL_STEPS slots each): three
    # channels of 12 elements, chunk 4, send 4 cells each on their own connection at step 0
    # (fits 8 slots of 1 cell, not 3); without the channel table the 12 cells between the
    # same two ranks count as one connection (the conservative reading for files)
    ring = generate("nccl-ring", "allreduce", 3, channels=3, count=36, chunk=4, parts=[12, 12, 12])
    assert slot_deadlocks(ring, slots=8) == []
    (v,) = slot_deadlocks(ring, slots=3)
    assert "ranks 0 -> 1 -> 2 -> 0 each send 4 slots to the next before receiving, and a connection holds 3 slots" in v.message
    del ring.meta["channel_table"]
    (v,) = slot_deadlocks(ring, slots=8)
    assert "each send 12 slots to the next before receiving, and a connection holds 8 slots" in v.message


@pytest.mark.parametrize("options", [
    # LL: 9 channels of 16,384 float32 each send a full 32 KiB chunk (one slot of 8192) at step 0
    ["-a", "nccl-ring", "-n", "2", "--option", "count=147456", "--option", "channels=9", "--option", "protocol=ll"],
    # LL float64 on 18 channels: 9 on each tree, each a 4096-element chunk (one slot) up at step 0
    ["-a", "nccl-tree", "-n", "2", "--option", "count=131072", "--option", "dtype=float64", "--option", "channels=18",
     "--option", "protocol=ll"],
])
def test_nccls_own_chunks_on_many_channels_never_deadlock(options):
    # more than 8 channels, each sending one of NCCL's chunks on its own connection: no deadlock
    # at NCCL's 8 slots (read as one connection per rank pair, 9 slots would not fit)
    result = _cli(*options, "--slots", "8")
    assert result.returncode == 0 and "deadlock" not in result.stdout
