"""Write a synchronous schedule (a built-in algorithm) as an MSCCL++
execution plan that the executor loads, in place, LL protocol.

Every transfer of step t goes through a scratch slot of its receiver that
no other transfer uses, in LL packets, so a receive waits for exactly its
data and no signal/wait is needed:

- send phase of step t, on the sender: ``ppkt`` of the source chunk into
  the receiver's slot (``cpkt`` into its own slot for a transfer inside a
  rank); this reads the value at the start of the step, as the schedule
  format defines;
- receive phase of step t, on the receiver: ``upkt`` (copy) or ``repkt``
  (reduce: chunk := chunk + packets) from the slot into the chunk.

The phases of a rank run in one thread block, separated by ``nop``
(``__syncthreads``); a ``nop`` also separates two receives of one phase
that write the same chunk. Where a rank needs more than the executor's 64
operations per thread block, or more than 16 peers in one, its sequence
continues in the next thread block, chained by a device semaphore
(``nop, sem_release`` ends a block, ``sem_acquire, nop`` starts the next).

Buffers follow the executor's in-place conventions (:mod:`.cells`): an
allreduce, reducescatter or alltoall works in ``i`` (for reducescatter
the output is block r of the input), an allgather in ``o`` (its input is
block r of the output). Chunk k of the schedule is chunk k of that buffer.
"""

from __future__ import annotations

import json
from collections import defaultdict

from ...spec.errors import CollspecError
from ..schedule import REDUCE, Schedule
from .plan import MAX_CHANNEL, MAX_OPERATION

PLAN_COLLECTIVES = {"allreduce": "allreduce", "allgather": "allgather", "reduce_scatter": "reducescatter", "alltoall": "alltoall"}


class ExportError(CollspecError):
    """A schedule that cannot be written as a plan (exit 2)."""


def to_plan(schedule: Schedule, name: str | None = None) -> str:
    """The plan of ``schedule`` as JSON text (see the module text)."""
    if schedule.collective not in PLAN_COLLECTIVES:
        raise ExportError(f"an MSCCL++ plan for {schedule.collective!r} is not written; export allreduce, allgather, reduce_scatter or alltoall")
    if schedule.layout_override is not None or schedule.owner is not None:
        raise ExportError("only schedules with the default layout and ownership can be written as a plan")
    n, c = schedule.ranks, schedule.chunks
    if c % n and schedule.collective != "allreduce":
        raise ExportError(f"a {schedule.collective} plan needs chunks divisible by ranks (got {c} for {n})")
    buf = "o" if schedule.collective == "allgather" else "i"
    sizes = {
        "allreduce": (c, c), "alltoall": (c, c), "allgather": (c // n, c), "reduce_scatter": (c, c // n),
    }[schedule.collective]
    slots = [0] * n
    sequence: list[list[dict]] = [[] for _ in range(n)]  # per rank, the ops in order
    sends_to: list[set] = [set() for _ in range(n)]
    for step in schedule.steps:
        send_phase, recv_phase = defaultdict(list), defaultdict(list)
        for i in range(len(step)):
            s, d = int(step.src[i]), int(step.dst[i])
            sc, dc, op = int(step.src_chunk[i]), int(step.dst_chunk[i]), int(step.op[i])
            slot = slots[d]
            slots[d] += 1
            src = {"type": buf, "index": sc, "size": 1}
            if s == d:
                send_phase[s].append({"name": "cpkt", "src_buff": [src], "dst_buff": [{"type": "s", "index": slot, "size": 1}]})
            else:
                sends_to[s].add(d)
                send_phase[s].append({"name": "ppkt", "src_buff": [src], "dst_buff": [{"peer": d, "index": slot, "size": 1}], "channel_type": "memory"})
            chunk = {"type": buf, "index": dc, "size": 1}
            packets = {"type": "s", "index": slot, "size": 1}
            if op == REDUCE:
                recv_phase[d].append({"name": "repkt", "src_buff": [chunk, packets], "dst_buff": [chunk], "reduce_op": "sum"})
            else:
                recv_phase[d].append({"name": "upkt", "src_buff": [packets], "dst_buff": [chunk]})
        for r in range(n):
            sequence[r] += send_phase[r]
            read = {o["src_buff"][0]["index"] for o in send_phase[r]}
            if send_phase[r] and any(o["dst_buff"][0]["index"] in read for o in recv_phase[r]):
                sequence[r].append({"name": "nop"})  # a receive overwrites what a send of this step reads
            written: set[int] = set()
            for o in recv_phase[r]:
                target = o["dst_buff"][0]["index"]
                if target in written:
                    sequence[r].append({"name": "nop"})
                    written = set()
                written.add(target)
                sequence[r].append(o)
            if recv_phase[r]:
                sequence[r].append({"name": "nop"})
    gpus = []
    for r in range(n):
        peers = sorted(sends_to[r] | {s for s in range(n) if r in sends_to[s]})
        remote = sorted(sends_to[r])
        remote_index = {p: k for k, p in enumerate(remote)}
        tbs, semaphores = _threadblocks(sequence[r], remote_index, peers)
        gpus.append(
            {
                "id": r,
                "input_chunks": sizes[0],
                "output_chunks": sizes[1],
                "scratch_chunks": slots[r],
                "threadblocks": tbs,
                "channels": [{"channel_type": "memory", "connected_to": peers}] if peers else [],
                "remote_buffers": [{"rank": p, "type": "s", "access_channel_types": ["memory"]} for p in remote],
                "semaphores": [{"init_value": 0} for _ in range(semaphores)],
            }
        )
    plan = {
        "name": name or schedule.name or f"{schedule.collective}-{n}",
        "collective": PLAN_COLLECTIVES[schedule.collective],
        "protocol": "LL",
        "inplace": True,
        "reuse_resources": False,
        "gpus": gpus,
        "num_threads_per_block": 1024,
        "use_double_scratch_buffer": True,
        "buffer_alignment": 16,
        "min_message_size": 0,
        "max_message_size": (1 << 64) - 1,
    }
    return json.dumps(plan, separators=(",", ":")) + "\n"


def _threadblocks(ops: list[dict], remote_index: dict[int, int], channels: list[int]) -> tuple[list[dict], int]:
    """Cut one rank's op sequence into thread blocks of at most 64 ops and
    16 peers, chained by semaphores. Returns the blocks and the semaphore count."""
    blocks: list[list[dict]] = []
    current: list[dict] = []
    peers: list[int] = []
    budget = MAX_OPERATION - 4  # room for the chain: sem_acquire, nop ... nop, sem_release
    for op in ops:
        peer = op["dst_buff"][0].get("peer") if op["name"] == "ppkt" else None
        new_peer = peer is not None and peer not in peers
        if current and (len(current) >= budget or (new_peer and len(peers) >= MAX_CHANNEL)):
            blocks.append(current)
            current, peers = [], []
        if op["name"] == "nop" and (not current or current[-1]["name"] == "nop"):
            continue
        if new_peer:
            peers.append(peer)
        current.append(op)
    if current:
        blocks.append(current)
    out = []
    for t, block in enumerate(blocks):
        listed = sorted({o["dst_buff"][0]["peer"] for o in block if o["name"] == "ppkt"})
        local = {p: k for k, p in enumerate(listed)}
        body = []
        for o in block:
            if o["name"] == "ppkt":
                d = o["dst_buff"][0]
                o = {**o, "dst_buff": [{"buffer_id": local[d["peer"]], "index": d["index"], "size": d["size"]}]}
            body.append(o)
        if t > 0:
            body = [{"name": "sem_acquire", "semaphore_ids": [t - 1]}, {"name": "nop"}] + body
        if t < len(blocks) - 1:
            body = body + ([{"name": "nop"}] if body[-1]["name"] != "nop" else []) + [{"name": "sem_release", "semaphore_ids": [t]}]
        tb = {"id": t, "ops": body, "channels": [], "remote_buffer_refs": []}
        if listed:
            tb["channels"] = [{"channel_type": "memory", "channel_ids": [channels.index(p) for p in listed]}]
            tb["remote_buffer_refs"] = [{"access_channel_type": "memory", "remote_buffer_ids": [remote_index[p] for p in listed]}]
        out.append(tb)
    return out, max(0, len(blocks) - 1)
