"""Traces: what an execution actually moved, checked against its schedule.

A :class:`Recorder` handed to the executor logs, per rank and per run, one
:class:`Event` for every transfer it performed:

- ``send``: the sender packed cell ``src_chunk`` as slot ``slot`` of its
  message to ``dst`` in hop ``step``;
- ``recv``: the receiver wrote slot ``slot`` of the message from ``src``
  into its cell ``dst_chunk`` with ``op``; ``order`` counts the writes of
  the step on that rank in the order they happened;
- ``local``: a copy or reduce between two cells of one rank.

Each event carries the element range ``[start, stop)`` of the buffer rows
that were read (send) or written (recv, local), taken from the tensor view
the executor actually used, and the bytes of the data sent or received. A
transfer of an empty cell is logged with 0 bytes (nothing is sent).

:func:`check_traces` merges all ranks' traces of one run into a models
:class:`~collspec.models.schedule.Schedule` (pairing the k-th slot of a
message from a to b in hop h on both sides) and reports, as
:class:`~collspec.spec.violations.Violation` values:

- ``unmatched``: a send nobody received, or a receive nobody sent;
- ``postcondition``: an element range that is not its chunk's cells, a byte
  count that does not match, or the first difference between the traced
  schedule and the planned one (naming the hop, the ranks and the chunks);
- everything :func:`collspec.models.checker.check` finds in the traced
  schedule (``wrong-column``, ``link-repeat``, contributions, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..models.checker import check
from ..models.schedule import OP_NAMES, Schedule, Step
from ..spec.violations import Violation


@dataclass(frozen=True)
class Event:
    kind: str  # "send", "recv" or "local"
    step: int
    src: int
    dst: int
    src_chunk: int  # -1 where this rank cannot know it (a receive)
    dst_chunk: int  # -1 where this rank cannot know it (a send)
    op: int  # -1 for a send
    start: int
    stop: int
    nbytes: int
    slot: int = -1
    order: int = -1


@dataclass
class RankTrace:
    """One rank's events in one run of ``schedule`` over cells ``bounds``."""

    schedule: Schedule
    rank: int
    bounds: np.ndarray
    row_bytes: int
    events: list[Event] = field(default_factory=list)


class Recorder:
    """Collects a :class:`RankTrace` for every run of an executor it is given
    to. ``record`` sees each event as it happens (tests override it)."""

    def __init__(self):
        self.traces: list[RankTrace] = []

    def start(self, schedule: Schedule, rank: int, bounds: np.ndarray, buffer: torch.Tensor) -> "_Writer":
        row_elements = int(np.prod(buffer.shape[1:], dtype=np.int64))
        trace = RankTrace(schedule, rank, np.asarray(bounds, dtype=np.int64), row_elements * buffer.element_size())
        self.traces.append(trace)
        return _Writer(self, trace, buffer.storage_offset(), row_elements)

    def record(self, trace: RankTrace, event: Event) -> None:
        trace.events.append(event)


class _Writer:
    """Turns the executor's tensor views into events for one run."""

    def __init__(self, recorder: Recorder, trace: RankTrace, base: int, row_elements: int):
        self.recorder, self.trace, self.base, self.row = recorder, trace, base, max(row_elements, 1)
        self.order: dict[int, int] = {}

    def _range(self, view: torch.Tensor) -> tuple[int, int]:
        start = (view.storage_offset() - self.base) // self.row
        return start, start + view.shape[0]

    @staticmethod
    def _bytes(view: torch.Tensor) -> int:
        return view.numel() * view.element_size()

    def _next(self, step: int) -> int:
        k = self.order.get(step, 0)
        self.order[step] = k + 1
        return k

    def sent(self, step: int, message, parts: list[torch.Tensor]) -> None:
        """Message ``message`` left with the buffer view ``parts[k]`` as slot k."""
        rank = self.trace.rank
        for slot, (cell, part) in enumerate(zip(message.cells, parts)):
            start, stop = self._range(part)
            self.recorder.record(self.trace, Event("send", step, rank, message.peer, cell, -1, -1, start, stop, self._bytes(part), slot))

    def received_direct(self, step: int, message, parts: list[torch.Tensor]) -> None:
        """Message ``message`` arrived straight in the buffer views ``parts``."""
        rank = self.trace.rank
        for slot, (cell, op, part) in enumerate(zip(message.cells, message.ops, parts)):
            start, stop = self._range(part)
            self.recorder.record(self.trace, Event("recv", step, message.peer, rank, -1, cell, op, start, stop, self._bytes(part), slot, self._next(step)))

    def wrote(self, step: int, peer: int, apply, target: torch.Tensor, value: torch.Tensor) -> None:
        """``apply`` wrote ``value`` into the buffer view ``target``."""
        rank = self.trace.rank
        start, stop = self._range(target)
        if apply.message >= 0:
            event = Event("recv", step, peer, rank, -1, apply.cell, apply.op, start, stop, self._bytes(value), apply.slot, self._next(step))
        else:
            event = Event("local", step, rank, rank, apply.local_cell, apply.cell, apply.op, start, stop, self._bytes(value), -1, self._next(step))
        self.recorder.record(self.trace, event)


def gather(traces: list[RankTrace], group=None) -> list[RankTrace] | None:
    """Every rank's ``traces``, on the group's rank 0, in rank order (``None``
    elsewhere). Call it on every rank of ``group``; pass the traces of one
    run to :func:`check_traces`."""
    import torch.distributed as dist

    everyone = [None] * dist.get_world_size(group) if dist.get_rank(group) == 0 else None
    dist.gather_object(traces, everyone, group=group, group_dst=0)
    return None if everyone is None else [t for rank in everyone for t in rank]


# -- checking ---------------------------------------------------------------------


@dataclass
class TraceCheck:
    violations: list[Violation]
    traced: Schedule | None

    @property
    def ok(self) -> bool:
        return not any(v.is_error for v in self.violations)


def check_traces(traces: list[RankTrace]) -> TraceCheck:
    """Check the traces of one run, one per rank, against their schedule."""
    planned = traces[0].schedule
    ranks = sorted(t.rank for t in traces)
    if ranks != list(range(planned.ranks)):
        return TraceCheck([Violation("postcondition", f"expected one trace per rank 0..{planned.ranks - 1}, got ranks {ranks}")], None)
    found = [v for t in traces for v in _ranges(t)]
    transfers, unmatched = _pair(traces)
    found += unmatched
    traced = _schedule(planned, transfers)
    difference = _first_difference(planned, transfers)
    if difference is not None:
        found.append(difference)
    found += check(traced).violations
    return TraceCheck(found, traced)


def _ranges(trace: RankTrace) -> list[Violation]:
    """Every event's rows must be its chunk's cell, and its bytes those rows."""
    out = []
    b = trace.bounds
    for e in trace.events:
        chunk = e.src_chunk if e.kind == "send" else e.dst_chunk
        what = f"hop {e.step}: rank {trace.rank} {'sent' if e.kind == 'send' else 'wrote'} elements [{e.start}, {e.stop}) as chunk {chunk}"
        if not 0 <= chunk < len(b) - 1:
            out.append(Violation("postcondition", f"{what}, which does not exist", step=e.step, src=e.src, dst=e.dst))
        elif (e.start, e.stop) != (int(b[chunk]), int(b[chunk + 1])):
            out.append(Violation("postcondition", f"{what}, whose elements are [{b[chunk]}, {b[chunk + 1]})", step=e.step, src=e.src, dst=e.dst, details={"chunk": chunk}))
        elif e.nbytes != (e.stop - e.start) * trace.row_bytes:
            out.append(Violation("postcondition", f"{what} in {e.nbytes} bytes; those rows are {(e.stop - e.start) * trace.row_bytes} bytes", step=e.step, src=e.src, dst=e.dst, details={"chunk": chunk}))
    return out


@dataclass(frozen=True)
class _Transfer:
    step: int
    src: int
    dst: int
    src_chunk: int
    dst_chunk: int
    op: int
    order: int


def _pair(traces: list[RankTrace]) -> tuple[list[_Transfer], list[Violation]]:
    """Match slot k of each message on both sides; locals stand alone."""
    sends = {(e.step, e.src, e.dst, e.slot): e for t in traces for e in t.events if e.kind == "send"}
    transfers, found, taken = [], [], set()
    for t in traces:
        for e in t.events:
            key = (e.step, e.src, e.dst, e.slot)
            if e.kind == "local":
                transfers.append(_Transfer(e.step, e.src, e.dst, e.src_chunk, e.dst_chunk, e.op, e.order))
            elif e.kind == "recv":
                s = sends.pop(key, None)
                if s is None:
                    again = key in taken
                    what = "a second time" if again else f"that rank {e.src} never sent"
                    found.append(Violation("postcondition" if again else "unmatched", f"hop {e.step}: rank {e.dst} wrote slot {e.slot} of a message from rank {e.src} {what}", step=e.step, src=e.src, dst=e.dst))
                    continue
                taken.add(key)
                if s.nbytes != e.nbytes:
                    found.append(
                        Violation(
                            "postcondition",
                            f"hop {e.step}: rank {e.src} sent chunk {s.src_chunk} as {s.nbytes} bytes but rank {e.dst} took {e.nbytes} bytes into its chunk {e.dst_chunk}",
                            step=e.step,
                            src=e.src,
                            dst=e.dst,
                        )
                    )
                transfers.append(_Transfer(e.step, e.src, e.dst, s.src_chunk, e.dst_chunk, e.op, e.order))
    for s in sends.values():
        found.append(Violation("unmatched", f"hop {s.step}: rank {s.src} sent its chunk {s.src_chunk} to rank {s.dst}, which never received it", step=s.step, src=s.src, dst=s.dst))
    return transfers, found


def _schedule(planned: Schedule, transfers: list[_Transfer]) -> Schedule:
    """The traced transfers as a schedule: the planned one's collective,
    layout and phases, with each step's writes in the order they happened."""
    hops = max([len(planned.steps)] + [t.step + 1 for t in transfers])
    by_step: list[list[_Transfer]] = [[] for _ in range(hops)]
    for t in sorted(transfers, key=lambda t: (t.step, t.dst, t.order)):
        by_step[t.step].append(t)
    steps = []
    for h, ts in enumerate(by_step):
        phase = planned.steps[h].phase if h < len(planned.steps) else None
        steps.append(Step.of([t.src for t in ts], [t.dst for t in ts], [t.src_chunk for t in ts], [t.dst_chunk for t in ts], [t.op for t in ts], phase=phase))
    return replace(planned, steps=tuple(steps), name=f"trace of {planned.label()}", layout_override=planned.layout)


def _writes(transfers) -> dict[tuple[int, int, int], list[tuple[int, int, int]]]:
    """(step, dst, dst_chunk) -> the writes into that cell, in order: (src, src_chunk, op)."""
    out: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}
    for t in transfers:
        out.setdefault((t[0], t[2], t[4]), []).append((t[1], t[3], t[5]))
    return out


def _first_difference(planned: Schedule, transfers: list[_Transfer]) -> Violation | None:
    """The first cell (by hop, rank, chunk) whose writes differ from the plan."""
    plan = _writes(
        (h, int(s.src[i]), int(s.dst[i]), int(s.src_chunk[i]), int(s.dst_chunk[i]), int(s.op[i]))
        for h, s in enumerate(planned.steps)
        for i in range(len(s))
    )
    done = _writes((t.step, t.src, t.dst, t.src_chunk, t.dst_chunk, t.op) for t in sorted(transfers, key=lambda t: (t.step, t.dst, t.order)))
    for key in sorted(set(plan) | set(done)):
        want, got = plan.get(key, []), done.get(key, [])
        if want == got:
            continue
        step, dst, chunk = key
        k = next(i for i in range(max(len(want), len(got))) if i >= len(want) or i >= len(got) or want[i] != got[i])
        src = (want[k] if k < len(want) else got[k])[0]
        name = planned.steps[step].name if step < len(planned.steps) and planned.steps[step].name else f"hop {step}"
        return Violation(
            "postcondition",
            f"{name} (step {step}): rank {dst}'s chunk {chunk} should get {_describe(want, k)} but got {_describe(got, k)}; "
            "the execution differs from the schedule here first",
            step=step,
            src=src,
            dst=dst,
            details={"chunk": chunk, "planned": [_json(w) for w in want], "traced": [_json(g) for g in got]},
        )
    return None


def _describe(writes: list[tuple[int, int, int]], k: int) -> str:
    if k >= len(writes):
        return "nothing more" if k else "nothing"
    src, chunk, op = writes[k]
    return f"{OP_NAMES[op]} of rank {src}'s chunk {chunk}"


def _json(write: tuple[int, int, int]) -> dict:
    return {"src": write[0], "src_chunk": write[1], "op": OP_NAMES[write[2]]}
