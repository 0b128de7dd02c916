"""What one rank does in each step of a schedule: a plan, computed once.

The executor never decides which chunk goes where: it reads the schedule's
transfers. This module turns them into one rank's part of every step:

- **messages**: all transfers from this rank to one peer in a step travel as
  one message, their source cells packed in the order the step lists them;
  the peer unpacks the message in the same order (both sides read the same
  schedule, so they agree without telling each other);
- **applies**: the writes into this rank's cells, in the order the step
  lists them (models semantics: several reduces into one cell apply in
  listed order). A transfer whose ``src`` equals ``dst`` is a local copy or
  reduce and uses no message. A received write is *early* when its cell is
  written once in the step and no send or local transfer of the step reads
  it: it may then be applied as soon as its data arrives, while the step's
  other messages are still in flight; every other write waits until all of
  them are done;
- **snapshots**: cells that a local transfer reads and the step also writes,
  copied at the start of the step, because every transfer reads the value
  its source cell had at the start of the step;
- **direct** receives: a message that only copies into consecutive cells
  that nothing else in the step reads or writes is received straight into
  them, without a receive buffer (the ring's all-gather hops).

>>> from collspec.models.generators import generate
>>> step = compile_plan(generate("ring", "allreduce", 4), 1).steps[0]
>>> [(m.peer, m.cells) for m in step.sends], [(m.peer, m.cells) for m in step.recvs]
([(2, (0,))], [(0, (3,))])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..models.schedule import COPY, Schedule, Step


@dataclass(frozen=True)
class Message:
    """One message of a step: to (send) or from (receive) ``peer``.

    ``cells`` are this rank's cells: the sources of a send, the targets of a
    receive; ``transfers`` their positions in the step; ``ops`` the op of
    each (what the receiver does with it).
    """

    peer: int
    cells: tuple[int, ...]
    transfers: tuple[int, ...]
    ops: tuple[int, ...]
    direct: bool = False


@dataclass(frozen=True)
class Apply:
    """A write into this rank's cell ``cell`` after the step's messages arrived.

    The value comes from slot ``slot`` of receive ``message`` (an index into
    the step's ``recvs``), or, when ``message`` is -1, from local cell
    ``local_cell`` (its start-of-step value).
    """

    transfer: int
    cell: int
    op: int
    message: int
    slot: int
    local_cell: int = -1
    early: bool = False


@dataclass(frozen=True)
class StepPlan:
    index: int
    sends: tuple[Message, ...]
    recvs: tuple[Message, ...]
    applies: tuple[Apply, ...]
    snapshots: tuple[int, ...]


@dataclass(frozen=True)
class RankPlan:
    schedule: Schedule
    rank: int
    steps: tuple[StepPlan, ...]


def compile_plan(schedule: Schedule, rank: int) -> RankPlan:
    """Rank ``rank``'s part of every step of ``schedule``."""
    return RankPlan(schedule, rank, tuple(_step_plan(i, step, rank) for i, step in enumerate(schedule.steps)))


def _messages(step: Step, mine: np.ndarray, peers: np.ndarray, cells: np.ndarray) -> list[Message]:
    """Group transfers ``mine`` (positions) by peer, keeping listed order."""
    out = []
    for peer in dict.fromkeys(int(p) for p in peers[mine]):
        at = mine[peers[mine] == peer]
        out.append(Message(peer, tuple(int(c) for c in cells[at]), tuple(int(t) for t in at), tuple(int(o) for o in step.op[at])))
    return out


def _step_plan(index: int, step: Step, rank: int) -> StepPlan:
    local = (step.src == rank) & (step.dst == rank)
    outgoing = np.flatnonzero((step.src == rank) & ~local)
    incoming = np.flatnonzero((step.dst == rank) & ~local)
    sends = _messages(step, outgoing, step.dst, step.src_chunk)
    recvs = _messages(step, incoming, step.src, step.dst_chunk)

    writes = np.flatnonzero(step.dst == rank)
    written = np.bincount(step.dst_chunk[writes], minlength=1) if writes.size else np.zeros(1, np.int64)
    read = set(int(c) for c in step.src_chunk[(step.src == rank)])
    recvs = [_maybe_direct(m, written, read) for m in recvs]

    slot_of = {t: (m, k) for m, msg in enumerate(recvs) for k, t in enumerate(msg.transfers)}
    applies = []
    for t in writes:
        t = int(t)
        if t in slot_of:
            m, k = slot_of[t]
            if not recvs[m].direct:
                c = int(step.dst_chunk[t])
                applies.append(Apply(t, c, int(step.op[t]), m, k, early=bool(written[c] == 1) and c not in read))
        else:
            applies.append(Apply(t, int(step.dst_chunk[t]), int(step.op[t]), -1, -1, int(step.src_chunk[t])))
    written_cells = set(int(c) for c in step.dst_chunk[writes])
    snapshots = tuple(sorted({a.local_cell for a in applies if a.message < 0 and a.local_cell in written_cells}))
    return StepPlan(index, tuple(sends), tuple(recvs), tuple(applies), snapshots)


def _maybe_direct(message: Message, written: np.ndarray, read: set[int]) -> Message:
    """Receive in place when the message only copies into consecutive cells
    that the step neither reads nor writes in any other way."""
    cells = message.cells
    ok = all(op == COPY for op in message.ops) and contiguous(cells) and all(written[c] == 1 and c not in read for c in cells)
    return Message(message.peer, cells, message.transfers, message.ops, direct=True) if ok else message


def contiguous(cells: tuple[int, ...]) -> bool:
    """Whether ``cells`` are consecutive and ascending, so that their element
    ranges form one range of the buffer."""
    return all(b == a + 1 for a, b in zip(cells, cells[1:]))
