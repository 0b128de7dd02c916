"""Run a models schedule for real, over torch.distributed point-to-point.

:class:`Executor` runs one rank's part of a synchronous schedule on a
buffer whose first axis is cut into the schedule's cells
(:mod:`collspec.impl.cells`). Every step:

1. cells that a local transfer reads and the step writes are snapshotted;
   sources of a message whose cells are not one range are packed into a
   staging buffer;
2. every receive and every send of the step is posted at once
   (``batch_isend_irecv``: non-blocking, so no order of posting can
   deadlock; on nccl the batch is one group);
3. as each message arrives, its *early* writes (cells written once in the
   step and read by none of its transfers, see :mod:`.plan`) are applied,
   while the rest of the step is still in flight;
4. once every send is done too, the other writes are applied in the order
   the step lists them.

A write is a copy or :meth:`Reduction.combine_`. So every transfer reads its
source as it was at the start of the step, as the models interpreter does,
and receives land in separate buffers (or, for a plain copy into cells
nothing else touches in the step, straight into them). The plan and the
receive and staging buffers are made once per (schedule, cell sizes, dtype,
device) and reused; a call only slices its buffer and posts the messages.
An empty message (all its cells empty) is not sent: both sides know its
size.

The same code runs CPU tensors over gloo and CUDA tensors over nccl: all
buffers live on the tensor's device, and the reductions are torch ops on
the current stream, which ``wait()`` orders after the communication.

With a :class:`~collspec.impl.trace.Recorder`, every send, receive and local
transfer is logged with the element range and bytes of the tensor that was
actually sent or written (see :mod:`collspec.impl.trace`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ..models.schedule import COPY, Schedule
from .plan import Apply, RankPlan, StepPlan, compile_plan, contiguous
from .reduction import Reduction


@dataclass
class _Write:
    """One write (``apply``, from ``peer``): its op into buffer rows
    ``[t0, t1)`` from rows ``[s0, s1)`` of ``source``: "scratch" (received),
    "buffer" (a local cell) or "snapshot" (a local cell's start-of-step copy)."""

    apply: Apply
    peer: int
    t0: int
    t1: int
    source: str
    s0: int
    s1: int


@dataclass
class _BoundStep:
    """One step with every range resolved to rows of the buffer, the
    receive scratch or the send staging buffer."""

    plan: StepPlan
    snapshots: list[tuple[int, int, int]]  # (cell, start, stop)
    packs: list[tuple[int, int, int]]  # copy buffer rows [a, b) to staging rows from s
    sends: list[tuple[int, str, int, int]]  # (peer, "buffer" | "staging", start, stop)
    recvs: list[tuple[int, str, int, int, list[_Write]]]  # (peer, "buffer" | "scratch", start, stop, early writes)
    deferred: list[_Write]  # after every message of the step, in listed order


@dataclass
class _Bound:
    plan: RankPlan
    edges: list[int]  # cell c is buffer rows [edges[c], edges[c + 1])
    steps: list[_BoundStep]
    scratch: torch.Tensor
    staging: torch.Tensor


class Executor:
    """Runs schedules as rank ``rank`` of ``world_size`` over ``group``
    (ranks are the group's ranks).

    Subclasses may override :meth:`compile` (tests plant wrong plans this way).
    """

    def __init__(self, rank: int, world_size: int, group=None):
        self.rank, self.world_size, self.group = rank, world_size, group
        self._plans: dict[int, tuple[Schedule, RankPlan]] = {}
        self._bound: dict[tuple, _Bound] = {}

    def compile(self, schedule: Schedule) -> RankPlan:
        """This rank's plan of ``schedule``."""
        return compile_plan(schedule, self.rank)

    def plan(self, schedule: Schedule) -> RankPlan:
        cached = self._plans.get(id(schedule))
        if cached is None or cached[0] is not schedule:
            cached = self._plans[id(schedule)] = (schedule, self.compile(schedule))
        return cached[1]

    def run(self, schedule: Schedule, buffer: torch.Tensor, bounds: np.ndarray, reduction: Reduction | None = None, recorder=None) -> None:
        """Execute ``schedule`` on ``buffer`` in place: cell c is rows
        ``bounds[c]:bounds[c + 1]`` of ``buffer``, which must be contiguous.
        ``reduction`` is required when the schedule reduces."""
        if schedule.ranks != self.world_size:
            raise ValueError(f"the schedule is for {schedule.ranks} ranks but this process group has {self.world_size}")
        if not buffer.is_contiguous():
            raise ValueError("the executor needs a contiguous buffer")
        if reduction is None and any(s.op.any() for s in schedule.steps):
            raise ValueError(f"{schedule.label()} reduces; give a reduction op")
        bound = self._bind(self.plan(schedule), bounds, buffer)
        trace = recorder.start(schedule, self.rank, bounds, buffer) if recorder is not None else None
        for index, step in enumerate(bound.steps):
            self._step(index, step, bound, buffer, reduction, trace)

    def _step(self, index: int, step: _BoundStep, bound: _Bound, buffer: torch.Tensor, reduction, trace) -> None:
        rows = {"buffer": buffer, "scratch": bound.scratch, "staging": bound.staging}
        snapshots = {c: buffer[a:b].clone() for c, a, b in step.snapshots}
        for a, b, s in step.packs:
            bound.staging[s : s + b - a].copy_(buffer[a:b])
        if trace is not None:
            self._trace_sends(index, step, bound, buffer, trace)
        ops = [dist.P2POp(dist.irecv, rows[kind][a:b], group=self.group, tag=index, group_peer=peer) for peer, kind, a, b, _ in step.recvs]
        ops += [dist.P2POp(dist.isend, rows[kind][a:b], group=self.group, tag=index, group_peer=peer) for peer, kind, a, b in step.sends]
        works = dist.batch_isend_irecv(ops) if ops else []
        for work, (_, _, _, _, early) in zip(works, step.recvs):
            work.wait()
            for write in early:
                self._write(index, write, rows, snapshots, reduction, trace)
        for work in works[len(step.recvs) :]:
            work.wait()
        if trace is not None:
            self._trace_direct(index, step, bound, buffer, trace)
        for write in step.deferred:
            self._write(index, write, rows, snapshots, reduction, trace)

    @staticmethod
    def _write(index: int, write: _Write, rows, snapshots, reduction, trace) -> None:
        target = rows["buffer"][write.t0 : write.t1]
        if write.source == "snapshot":
            value = snapshots[write.apply.local_cell]
        else:
            value = rows[write.source][write.s0 : write.s1]
        if write.apply.op == COPY:
            target.copy_(value)
        else:
            reduction.combine_(target, value)
        if trace is not None:
            trace.wrote(index, write.peer, write.apply, target, value)

    # -- tracing (only with a recorder) -----------------------------------------------

    def _trace_sends(self, index: int, step: _BoundStep, bound: _Bound, buffer, trace) -> None:
        e = bound.edges
        for msg in step.plan.sends:
            trace.sent(index, msg, [buffer[e[c] : e[c + 1]] for c in msg.cells])

    def _trace_direct(self, index: int, step: _BoundStep, bound: _Bound, buffer, trace) -> None:
        e = bound.edges
        for msg in step.plan.recvs:
            if msg.direct:
                trace.received_direct(index, msg, [buffer[e[c] : e[c + 1]] for c in msg.cells])

    # -- binding a plan to sizes ---------------------------------------------------------

    def _bind(self, plan: RankPlan, bounds: np.ndarray, buffer: torch.Tensor) -> _Bound:
        e = [int(x) for x in bounds]
        key = (id(plan), tuple(e), tuple(buffer.shape[1:]), buffer.dtype, buffer.device)
        bound = self._bound.get(key)
        if bound is not None and bound.plan is plan:
            return bound
        _require_equal_cells(plan.schedule, np.diff(np.asarray(e, dtype=np.int64)))
        steps = [self._bind_step(s, e) for s in plan.steps]
        scratch_rows = max([r[3] for s in steps for r in s.recvs if r[1] == "scratch"], default=0)
        staging_rows = max([s + b - a for st in steps for a, b, s in st.packs], default=0)
        scratch = torch.empty((scratch_rows,) + tuple(buffer.shape[1:]), dtype=buffer.dtype, device=buffer.device)
        staging = torch.empty((staging_rows,) + tuple(buffer.shape[1:]), dtype=buffer.dtype, device=buffer.device)
        bound = _Bound(plan, e, steps, scratch, staging)
        if len(self._bound) > 64:  # a long run over many sizes: start over
            self._bound.clear()
        self._bound[key] = bound
        return bound

    def _bind_step(self, step: StepPlan, e: list[int]) -> _BoundStep:
        size = lambda cells: sum(e[c + 1] - e[c] for c in cells)  # noqa: E731
        packs, sends, at = [], [], 0
        for msg in step.sends:
            if contiguous(msg.cells):
                kind, a, b = "buffer", e[msg.cells[0]], e[msg.cells[-1] + 1]
            else:
                kind, a = "staging", at
                for c in msg.cells:
                    packs.append((e[c], e[c + 1], at))
                    at += e[c + 1] - e[c]
                b = at
            if b > a:
                sends.append((msg.peer, kind, a, b))
        recvs, slots, at = [], {}, 0
        for m, msg in enumerate(step.recvs):
            if msg.direct:
                a, b, kind = e[msg.cells[0]], e[msg.cells[-1] + 1], "buffer"
            else:
                a, b, kind = at, at + size(msg.cells), "scratch"
                for k, c in enumerate(msg.cells):
                    slots[(m, k)] = (at, at + e[c + 1] - e[c])
                    at += e[c + 1] - e[c]
            recvs.append((msg.peer, kind, a, b, []))
        deferred = []
        for a in step.applies:
            t0, t1 = e[a.cell], e[a.cell + 1]
            if a.message >= 0:
                write = _Write(a, step.recvs[a.message].peer, t0, t1, "scratch", *slots[(a.message, a.slot)])
                (recvs[a.message][4] if a.early else deferred).append(write)
            elif a.local_cell in step.snapshots:
                deferred.append(_Write(a, self.rank, t0, t1, "snapshot", 0, 0))
            else:
                deferred.append(_Write(a, self.rank, t0, t1, "buffer", e[a.local_cell], e[a.local_cell + 1]))
        # an empty message is not sent; its (empty) writes wait for the step's end
        for peer, kind, a, b, early in recvs:
            if b <= a:
                deferred.extend(early)
        recvs = [r for r in recvs if r[3] > r[2]]
        snapshots = [(c, e[c], e[c + 1]) for c in step.snapshots]
        return _BoundStep(step, snapshots, packs, sends, recvs, deferred)


def _require_equal_cells(schedule: Schedule, lengths: np.ndarray) -> None:
    """Every transfer must move a cell into a cell of the same size."""
    for index, step in enumerate(schedule.steps):
        bad = np.flatnonzero(lengths[step.src_chunk] != lengths[step.dst_chunk])
        if bad.size:
            t = step.transfer(int(bad[0]))
            raise ValueError(
                f"step {index}: rank {t['src']}'s chunk {t['src_chunk']} has {lengths[t['src_chunk']]} elements but rank "
                f"{t['dst']}'s chunk {t['dst_chunk']} has {lengths[t['dst_chunk']]}; a transfer between chunks needs a count "
                f"that cuts them equally (a multiple of {schedule.chunks})"
            )
