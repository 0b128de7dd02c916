"""Bounded buffer slots: does a step schedule deadlock when a connection
holds only ``slots`` slots (NCCL's ``NCCL_STEPS`` = 8)?

The model, for schedules of steps (rounds):

- a *connection* is a directed pair of ranks (src, dst); it holds
  ``slots`` slots of ``slot_size`` cells each, and is empty when a step
  starts (steps are rounds: everything sent in a step is received in it);
- in a step, every rank first posts its sends, then its receives, as
  NCCL's primitives do (a ring rank sends chunk k in its call t and the
  next rank drains it in its call t + 1, so the whole chunk must sit in the
  slots while every rank is in call t);
- a send of ``m`` cells takes ``ceil(m / slot_size)`` slots. If they fit,
  the send completes into the slots; if not, it completes only when the
  receiver is taking data, that is once the receiver's own sends of the
  step have completed.

So a rank is stuck in a step exactly when one of its oversized sends goes
to a rank that is stuck; the ranks that never get free are a ``deadlock``,
reported for the first step where it happens (nothing runs after it) with
one cycle of sends through it. A chain of oversized sends (a broadcast
pipeline) only waits; a cycle (every step of a ring) never ends.

A connection is also per channel where the schedule says which cells each
channel carries (``meta["channel_table"]``, as the nccl-ring and nccl-tree
models and the schedule files they export hold it: channel c carries the
c-th contiguous range of ``count`` elements of the vector, or of every
rank's block): NCCL gives every channel its own connection to a peer, with
NCCL_STEPS slots of its own, so 13 channels that each send one slot in a
step need one slot on each of 13 connections, not 13 on one. Without a
channel table, transfers between the same two ranks in a step count as
one connection (a conservative reading for several channels that share a
step).

>>> from collspec.models.generators import generate
>>> ring = generate("nccl-ring", "allreduce", 3, channels=1, chunk=4, count=12)
>>> slot_deadlocks(ring, slots=8, slot_size=1) == []
True
>>> [v.message for v in slot_deadlocks(ring, slots=2, slot_size=1)]    # doctest: +NORMALIZE_WHITESPACE
['step 0 (loop 0 step 0: send -> recvReduceSend): ranks 0 -> 1 -> 2 -> 0 each send 4 slots to the next before receiving, and a connection holds 2 slots (of 1 cell): no send completes']
"""

from __future__ import annotations

import numpy as np

from ..spec.violations import Violation
from .layout import ScheduleError
from .schedule import Schedule

#: NCCL's slots per connection (``NCCL_STEPS``, ``src/include/device.h``)
NCCL_STEPS = 8


def check_slots(slots, slot_size) -> tuple[int, int]:
    """The options as integers; bad input: ScheduleError naming the option."""
    for name, value in (("slots", slots), ("slot_size", slot_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ScheduleError(f"--{name.replace('_', '-')} {value!r}: must be a whole number of at least 1")
    return int(slots), int(slot_size)


def slot_deadlocks(schedule: Schedule, slots: int = NCCL_STEPS, slot_size: int = 1) -> list[Violation]:
    """The first step where bounded slots deadlock ``schedule`` (see the module text), or []."""
    slots, slot_size = check_slots(slots, slot_size)
    n = schedule.ranks
    channels = channel_ranges(schedule)
    for index, step in enumerate(schedule.steps):
        network = step.src != step.dst
        if not network.any():
            continue
        src, dst = step.src[network].astype(np.int64), step.dst[network].astype(np.int64)
        key, width = src * n + dst, 1
        if channels is not None:
            bounds, total = channels
            width = len(bounds)
            key = key * width + np.searchsorted(bounds, step.src_chunk[network].astype(np.int64) % total, side="right")
        pair, cells = np.unique(key, return_counts=True)
        pair = pair // width  # the (src, dst) of each connection
        needed = -(-cells // slot_size)
        over = needed > slots
        if not over.any():
            continue
        big_src, big_dst, big_need = pair[over] // n, pair[over] % n, needed[over]
        stuck = np.zeros(n, dtype=bool)
        stuck[big_src] = True
        while True:  # a rank gets free once every receiver of its oversized sends is free
            still = np.zeros(n, dtype=bool)
            np.logical_or.at(still, big_src, stuck[big_dst])
            if np.array_equal(still, stuck):
                break
            stuck = still
        if not stuck.any():
            continue
        cycle, need = _cycle(big_src, big_dst, big_need, stuck)
        ranks = " -> ".join(map(str, cycle + [cycle[0]]))
        sizes = f"{need[0]} slots" if len(set(need)) == 1 else "at least " + f"{min(need)} slots"
        return [Violation(
            "deadlock",
            f"step {index} ({step.name}): ranks {ranks} each send {sizes} to the next before receiving, and a connection "
            f"holds {slots} slots (of {slot_size} cell{'s' if slot_size != 1 else ''}): no send completes",
            step=index,
            details={"cycle": cycle, "slots": slots, "slot_size": slot_size, "slots_needed": need, "ranks_stuck": int(stuck.sum())},
        )]
    return []


def channel_ranges(schedule: Schedule):
    """``(bounds, total)`` from ``meta["channel_table"]``: a cell's channel is
    ``searchsorted(bounds, cell % total, side="right")``, ``bounds`` the
    cumulative counts and ``total`` their sum; None without a table, or where
    the table does not cover the cells (``total`` or N x ``total`` of them)."""
    table = (schedule.meta or {}).get("channel_table")
    if not table:
        return None
    counts = [int(entry.get("count", 0)) for entry in table]
    total = sum(counts)
    if total <= 0 or any(c < 0 for c in counts) or schedule.layout.cells not in (total, schedule.ranks * total):
        return None
    return np.cumsum(counts, dtype=np.int64), total


def _cycle(src, dst, need, stuck) -> tuple[list[int], list[int]]:
    """One cycle of oversized sends among stuck ranks, from the lowest."""
    out: dict[int, tuple[int, int]] = {}
    for s, d, m in zip(src.tolist(), dst.tolist(), need.tolist()):
        if stuck[s] and stuck[d] and s not in out:
            out[s] = (d, m)
    seen: dict[int, int] = {}
    path: list[int] = []
    rank = min(out)
    while rank not in seen:
        seen[rank] = len(path)
        path.append(rank)
        rank = out[rank][0]
    cycle = path[seen[rank]:]
    start = cycle.index(min(cycle))
    cycle = cycle[start:] + cycle[:start]
    return cycle, [int(out[r][1]) for r in cycle]
