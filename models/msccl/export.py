"""Write a synchronous models schedule as an MSCCL program (XML).

The program runs in place (``inplace="1"``) on one buffer per GPU, cell c of
the schedule being chunk c of it: ``o`` for allgather (rank r's input is
block r of its output), ``i`` for everything else (for reduce_scatter rank
r's output is block r of its input). How it is built:

1. Each transfer becomes a send on the sending GPU and a receive on the
   receiving one (``r``, or ``rrc`` for a reduce, source and destination
   the receiving cell); a transfer inside one GPU becomes ``cpy`` or ``re``.
2. Thread blocks: a GPU's send peers and receive peers are paired into
   thread blocks, first the pairs that forward the most chunks (a chunk
   received from q and sent to p on the next step), then a peer with itself,
   then the rest. Local steps get a thread block of their own. All use
   channel 0, so each connection belongs to one thread block.
3. Inside a thread block, steps follow the schedule: step t's sends, then
   its local steps, then its receives. A receive of a chunk immediately
   followed in its thread block by the send of that chunk on the next step
   fuses into one step, as MSCCLang does: ``rcs`` after a copy, ``rrcs``
   after a reduce whose result is used later, ``rrs`` when nothing reads the
   reduced value before it is overwritten.
4. Every conflict between steps of different thread blocks of a GPU (one
   writes a cell the other reads or writes, in schedule order) becomes a
   dependency; dependencies already implied by thread-block order or by an
   earlier dependency of the same thread block are dropped, the first one
   left goes on the step (``depid``/``deps``) and the others on ``nop``
   steps just before it; ``hasdep="1"`` marks every step depended on.

Sends and receives pair up in order on each connection because both sides
list them in schedule order. For a ring all-reduce this gives one thread
block per GPU with ``s``, ``rrs`` x (N-2), ``rrcs``, ``rcs`` x (N-2), ``r``:
the program MSCCLang writes for the same ring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

import numpy as np

from ..layout import ScheduleError, default_owner, owner_of
from ..schedule import REDUCE, Schedule

SEND, LOCAL, RECV = 0, 1, 2  # phase of an operation inside a synchronous step
EXECUTOR_NAMES = {"reduce_scatter": "reducescatter"}


class ExportError(ScheduleError):
    """A schedule that cannot be written as MSCCL XML (exit 2)."""


@dataclass(eq=False)
class _Op:
    """One operation of one GPU before thread blocks are laid out."""

    phase: int
    time: tuple[int, int, int]  # (synchronous step, phase, listing index)
    peer: int  # the other GPU (-1 for local)
    cell: int  # the local cell: sent, received into, or (local) written
    other: int  # the remote cell (network) or the local source (local)
    reduce: bool
    tb: int = -1
    fused_send: "_Op | None" = None  # a send fused into this receive
    store: bool = True  # for a fused reduce: does it keep the result (rrcs) or not (rrs)
    deps: list = field(default_factory=list)
    index: int = -1  # XML step number
    hasdep: bool = False

    @property
    def kind(self) -> str:
        if self.phase == LOCAL:
            return "re" if self.reduce else "cpy"
        if self.phase == SEND:
            return "s"
        if self.fused_send is not None:
            return ("rrcs" if self.store else "rrs") if self.reduce else "rcs"
        return "rrc" if self.reduce else "r"


def to_xml(schedule: Schedule, *, name: str | None = None, proto: str = "Simple") -> str:
    """The MSCCL XML of ``schedule`` (see the module text)."""
    if schedule.layout_override is not None:
        raise ExportError(f"{schedule.label()}: export writes schedules in the default layout only")
    if schedule.collective == "reduce_scatter" and owner_of(schedule) != default_owner(schedule):
        raise ExportError(
            f"{schedule.label()}: field 'owner' = {[list(o) for o in schedule.owner]}: MSCCL's reducescatter gives "
            f"rank r block r of the input ({[list(o) for o in default_owner(schedule)]}); export writes only that ownership"
        )
    n, chunks = schedule.ranks, schedule.chunks
    buffer = "o" if schedule.collective == "allgather" else "i"
    ops = _operations(schedule)
    outputs = [set(np.asarray(schedule.layout.outputs[r]).tolist()) for r in range(n)]
    gpus = []
    for rank in range(n):
        blocks = _threadblocks(ops[rank])
        _fuse(ops[rank], blocks, outputs[rank])
        _dependencies(ops[rank], blocks)
        _number(blocks)
        gpus.append(blocks)
    lines = [
        f'<algo name={quoteattr(name or schedule.label())} proto="{proto}" nchannels="1" nchunksperloop="{chunks}" ngpus="{n}" '
        f'coll="{EXECUTOR_NAMES.get(schedule.collective, schedule.collective)}" inplace="1" outofplace="0" minBytes="0" maxBytes="0"'
        + (f' root="{schedule.root}"' if schedule.collective in ("broadcast", "reduce") else "")
        + ">"
    ]
    sizes = (0, chunks) if buffer == "o" else (chunks, 0)
    for rank, blocks in enumerate(gpus):
        lines.append(f'  <gpu id="{rank}" i_chunks="{sizes[0]}" o_chunks="{sizes[1]}" s_chunks="0">')
        for tb_id, (send, recv, steps) in enumerate(blocks):
            lines.append(f'    <tb id="{tb_id}" send="{send}" recv="{recv}" chan="0">')
            lines.extend(_step_lines(steps, buffer))
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def _operations(schedule: Schedule) -> list[list[_Op]]:
    """Each GPU's operations, in schedule order (step, phase, listing)."""
    ops: list[list[_Op]] = [[] for _ in range(schedule.ranks)]
    for t, step in enumerate(schedule.steps):
        src, dst = step.src.tolist(), step.dst.tolist()
        sc, dc, op = step.src_chunk.tolist(), step.dst_chunk.tolist(), step.op.tolist()
        for k in range(len(src)):
            reduce = op[k] == REDUCE
            if src[k] == dst[k]:
                ops[src[k]].append(_Op(LOCAL, (t, LOCAL, k), -1, dc[k], sc[k], reduce))
                continue
            ops[src[k]].append(_Op(SEND, (t, SEND, k), dst[k], sc[k], dc[k], False))
            ops[dst[k]].append(_Op(RECV, (t, RECV, k), src[k], dc[k], sc[k], reduce))
    for rank_ops in ops:
        rank_ops.sort(key=lambda o: o.time)
        _refuse_local_conflicts(rank_ops)
    return ops


def _refuse_local_conflicts(ops: list[_Op]) -> None:
    """Local steps run one after another; refuse a step whose local copies
    read what an earlier local copy of the same step wrote (the synchronous
    schedule reads every source at the start of the step)."""
    written: dict[int, set[int]] = {}
    for o in ops:
        if o.phase != LOCAL:
            continue
        t = o.time[0]
        if o.other in written.get(t, set()):
            raise ExportError(f"step {t}: a local transfer reads cell {o.other} after another local transfer of the same step wrote it; split the step")
        written.setdefault(t, set()).add(o.cell)


def _threadblocks(ops: list[_Op]) -> list[tuple[int, int, list[_Op]]]:
    """Pair send and receive peers into thread blocks; assign every op."""
    sends = sorted({o.peer for o in ops if o.phase == SEND})
    recvs = sorted({o.peer for o in ops if o.phase == RECV})
    forwards: dict[tuple[int, int], int] = {}
    last_recv: dict[int, _Op] = {}
    for o in ops:
        if o.phase == RECV:
            last_recv[o.cell] = o
        elif o.phase == SEND:
            r = last_recv.get(o.cell)
            if r is not None and r.time[0] == o.time[0] - 1:
                forwards[(r.peer, o.peer)] = forwards.get((r.peer, o.peer), 0) + 1
    pairs: list[tuple[int, int]] = []
    free_send, free_recv = set(sends), set(recvs)
    for (q, p), _ in sorted(forwards.items(), key=lambda kv: (-kv[1], kv[0])):
        if q in free_recv and p in free_send:
            pairs.append((p, q))
            free_recv.discard(q)
            free_send.discard(p)
    for q in sorted(free_recv & free_send):
        pairs.append((q, q))
        free_recv.discard(q)
        free_send.discard(q)
    rest_s, rest_r = sorted(free_send), sorted(free_recv)
    for k in range(max(len(rest_s), len(rest_r))):
        pairs.append((rest_s[k] if k < len(rest_s) else -1, rest_r[k] if k < len(rest_r) else -1))
    pairs.sort()
    blocks: list[tuple[int, int, list[_Op]]] = [(p, q, []) for p, q in pairs]
    by_send = {p: i for i, (p, _, _) in enumerate(blocks) if p >= 0}
    by_recv = {q: i for i, (_, q, _) in enumerate(blocks) if q >= 0}
    local_tb = None
    for o in ops:
        if o.phase == SEND:
            o.tb = by_send[o.peer]
        elif o.phase == RECV:
            o.tb = by_recv[o.peer]
        else:
            if local_tb is None:
                local_tb = len(blocks)
                blocks.append((-1, -1, []))
            o.tb = local_tb
        blocks[o.tb][2].append(o)
    return blocks


def _fuse(ops: list[_Op], blocks, outputs: set[int]) -> None:
    """Fuse a receive with the send of the same cell right after it in its
    thread block on the next step (see the module text)."""
    # the accesses of every cell in schedule order, to decide what is live
    events: dict[int, list[tuple[tuple, _Op, str]]] = {}
    for o in ops:
        if o.phase == SEND:
            events.setdefault(o.cell, []).append((o.time, o, "read"))
        elif o.phase == RECV:
            events.setdefault(o.cell, []).append((o.time, o, "update" if o.reduce else "write"))
        else:
            events.setdefault(o.other, []).append((o.time, o, "read"))
            events.setdefault(o.cell, []).append((o.time, o, "update" if o.reduce else "write"))
    position = {cell: {id(e[1]): k for k, e in enumerate(evs)} for cell, evs in events.items()}
    for _, _, steps in blocks:
        fused: list[_Op] = []
        k = 0
        while k < len(steps):
            o = steps[k]
            nxt = steps[k + 1] if k + 1 < len(steps) else None
            if (
                o.phase == RECV
                and nxt is not None
                and nxt.phase == SEND
                and nxt.cell == o.cell
                and nxt.time[0] == o.time[0] + 1
                and _adjacent(events[o.cell], position[o.cell], o, nxt)
            ):
                o.fused_send = nxt
                o.store = not o.reduce or _live(events[o.cell], position[o.cell][id(o)], position[o.cell][id(nxt)], o.cell in outputs)
                fused.append(o)
                k += 2
                continue
            fused.append(o)
            k += 1
        steps[:] = fused
    ops[:] = [o for _, _, steps in blocks for o in steps]


def _adjacent(evs, pos, receive: _Op, send: _Op) -> bool:
    """Nothing writes the cell between the receive and the send (reads are fine)."""
    lo, hi = pos[id(receive)], pos[id(send)]
    return all(kind == "read" for _, _, kind in evs[lo + 1 : hi])


def _live(evs, pos_receive: int, pos_send: int, is_output: bool) -> bool:
    """Is the received (reduced) value read by anything but the fused send
    before the cell is overwritten? At the end, an output cell is live."""
    if any(kind == "read" for _, _, kind in evs[pos_receive + 1 : pos_send]):
        return True
    for _, _, kind in evs[pos_send + 1 :]:
        return kind != "write"  # a read, or a reduce into it, reads the value
    return is_output


def _dependencies(ops: list[_Op], blocks) -> None:
    """Dependencies between thread blocks of one GPU (module text, item 4)."""
    accesses = []  # (time, op, cell, writes?)
    for o in ops:
        if o.phase == SEND:
            accesses.append((o.time, o, o.cell, False))
        elif o.phase == RECV:
            writes = o.fused_send is None or o.store or not o.reduce
            if o.reduce:
                accesses.append((o.time, o, o.cell, False))
            if writes:
                accesses.append((o.time, o, o.cell, True))
        else:
            accesses.append((o.time, o, o.other, False))
            accesses.append((o.time, o, o.cell, True))
    accesses.sort(key=lambda a: (a[0], a[3]))
    last_write: dict[int, _Op] = {}
    readers: dict[int, list[_Op]] = {}
    needs: dict[int, set[int]] = {}
    for _, o, cell, writes in accesses:
        before = [last_write[cell]] if cell in last_write else []
        if writes:
            before += readers.get(cell, [])
        for b in before:
            if b is not o and b.tb != o.tb:
                needs.setdefault(id(o), set()).add(id(b))
        if writes:
            last_write[cell] = o
            readers[cell] = []
        else:
            readers.setdefault(cell, []).append(o)
    by_id = {id(o): o for o in ops}
    position = {id(o): k for _, _, steps in blocks for k, o in enumerate(steps)}
    for _, _, steps in blocks:
        waited: dict[int, int] = {}  # other tb -> latest position already waited for
        for o in steps:
            latest: dict[int, _Op] = {}
            for b in (by_id[i] for i in needs.get(id(o), ())):
                if b.tb not in latest or position[id(b)] > position[id(latest[b.tb])]:
                    latest[b.tb] = b
            chosen = [b for tb, b in sorted(latest.items()) if position[id(b)] > waited.get(tb, -1)]
            for b in chosen:
                waited[b.tb] = position[id(b)]
                b.hasdep = True
            o.deps = chosen


def _number(blocks) -> None:
    """XML step numbers: each op comes after one nop per extra dependency."""
    for _, _, steps in blocks:
        index = 0
        for o in steps:
            index += max(len(o.deps) - 1, 0)
            o.index = index
            index += 1


def _step_lines(steps: list[_Op], buffer: str) -> list[str]:
    """XML lines of one thread block: each op, preceded by a nop per extra dependency."""
    out = []
    for o in steps:
        extra = o.deps[1:]
        for k, b in enumerate(extra):
            out.append(_line(o.index - len(extra) + k, "nop", "i", -1, "o", -1, 0, b.tb, b.index, False))
        src, dst = _offsets(o)
        first = o.deps[0] if o.deps else None
        out.append(_line(o.index, o.kind, buffer, src, buffer, dst, 1, first.tb if first else -1, first.index if first else -1, o.hasdep))
    return out


def _offsets(o: _Op) -> tuple[int, int]:
    if o.phase == SEND:
        return o.cell, o.other
    if o.phase == LOCAL:
        return o.other, o.cell
    if o.kind == "r":
        return o.other, o.cell
    return o.cell, o.cell


def _line(s: int, kind: str, srcbuf: str, srcoff: int, dstbuf: str, dstoff: int, cnt: int, depid: int, deps: int, hasdep: bool) -> str:
    return (
        f'      <step s="{s}" type="{kind}" srcbuf="{srcbuf}" srcoff="{srcoff}" dstbuf="{dstbuf}" dstoff="{dstoff}" '
        f'cnt="{cnt}" depid="{depid}" deps="{deps}" hasdep="{int(hasdep)}"/>'
    )
