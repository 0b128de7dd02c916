"""Happens-before of an execution plan under the executor's concurrent
semantics, and what follows from it: deadlocks, unmatched signals, and an
order in which to run the plan.

The model (docs/mscclpp.md gives the evidence in MSCCL++'s source):

- every GPU runs all its thread blocks at once; all threads of a block run
  its ops in order, each on its share of the elements, so two ops of one
  block are ordered for memory only when a ``nop`` (``__syncthreads``) or a
  ``barrier`` lies between them (or is one of them). Execution is still
  sequential: an op starts after the one before it (*exec* edges);
- ``signal``/``wait`` pair up in order on each memory channel: the k-th
  wait on GPU p's channel to GPU r returns after the k-th signal on the
  channel of r that connects to it (channels pair by their order among the
  channels between the two GPUs, as executor.cc connects them). A
  release ``signal`` and an acquire ``wait`` order memory; if either is
  relaxed (``rlxsignal``/``rlxwait``) they order execution only;
- a device semaphore starts at ``init_value``; the k-th ``sem_acquire``
  (from 0) passes at once when k < init, else after release number
  k - init (release/acquire order memory);
- a barrier instance (the k-th barrier with one id in each thread block of
  a GPU) releases once ``num_threadblocks`` blocks arrived;
- a packet read (LL) returns after the op that wrote those packets.

Signals or semaphore operations of one channel or semaphore issued from
several thread blocks have no fixed order; such plans are refused (exit 2)
rather than guessed at. An op that waits for something that never comes is
*blocked*; a deadlock is a cycle of waits. Ops that run get a *level*: one
more than the highest level among the ops they follow.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ...spec.violations import Violation
from ..msccl.order import _cycle_in, _strongly_connected, levels
from .parse import PlanFormatError
from .plan import Plan

SEQUENCE, SYNC, MESSAGE = range(3)
#: "B <verb> A" for an exec edge A -> B of each kind
WAIT_VERBS = ("runs after", "waits for", "waits for")


@dataclass
class Order:
    plan: Plan
    exec_src: np.ndarray
    exec_dst: np.ndarray
    exec_kind: np.ndarray
    mem_src: np.ndarray  # edges that order memory (a subset of exec's closure)
    mem_dst: np.ndarray
    level: np.ndarray  # -1: never runs
    violations: list[Violation] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return bool(np.all(self.level >= 0))

    @property
    def levels(self) -> int:
        return int(self.level.max()) + 1 if self.level.size else 0


class _Edges:
    def __init__(self):
        self.exec: list[tuple[int, int, int]] = []
        self.mem: list[tuple[int, int]] = []

    def add(self, a: int, b: int, kind: int, memory: bool = True) -> None:
        self.exec.append((a, b, kind))
        if memory:
            self.mem.append((a, b))


def analyse(plan: Plan) -> Order:
    ops = plan.ops
    n = len(ops)
    edges = _Edges()
    found: list[Violation] = []
    blocked = np.zeros(n, dtype=bool)
    by_tb: dict[int, list[int]] = defaultdict(list)
    for op in ops:
        if op.proxy:
            edges.add(op.issuer, op.index, SEQUENCE)  # the proxy copies after the op pushed the request
        else:
            by_tb[op.tb].append(op.index)
    _thread_block_order(plan, by_tb, edges)
    _port_fifos(plan, edges)
    _channels(plan, edges, blocked, found)
    _semaphores(plan, edges, blocked, found)
    _barriers(plan, by_tb, edges, blocked, found)
    _packets(plan, edges, blocked, found)
    ex = np.array(edges.exec, dtype=np.int64).reshape(-1, 3)
    mem = np.array(edges.mem, dtype=np.int64).reshape(-1, 2)
    level = levels(n, ex[:, 0], ex[:, 1], blocked)
    order = Order(plan, ex[:, 0], ex[:, 1], ex[:, 2].astype(np.int8), mem[:, 0], mem[:, 1], level, found)
    order.violations += _deadlocks(order)
    return order


def _thread_block_order(plan: Plan, by_tb, edges: _Edges) -> None:
    """Exec: each op after the previous one. Memory: across nop/barrier only."""
    ops = plan.ops
    for members in by_tb.values():
        last_sync, segment = None, []
        for k, i in enumerate(members):
            if k:
                edges.exec.append((members[k - 1], i, SEQUENCE))
            if ops[i].thread_sync:
                for j in segment:
                    edges.mem.append((j, i))
                if last_sync is not None and not segment:
                    edges.mem.append((last_sync, i))
                last_sync, segment = i, []
            else:
                if last_sync is not None:
                    edges.mem.append((last_sync, i))
                segment.append(i)


def _port_fifos(plan: Plan, edges: _Edges) -> None:
    """A flush returns after every earlier proxy copy of its channel."""
    pending = defaultdict(list)  # port end -> proxy ops issued so far
    for op in plan.ops:
        if op.proxy:
            pending[op.fifo].append(op.index)
        for end in op.flushes:
            for t in pending[end]:
                edges.add(t, op.index, SYNC)


def _channel_list(plan: Plan, gpu: int, kind: str):
    return (plan.memory_channels if kind == "memory" else plan.port_channels)[gpu]


def _single_tb(plan: Plan, listed: list[int], what: str, role: str) -> None:
    tbs = sorted({plan.ops[i].tb for i in listed})
    if len(tbs) > 1:
        a, b = (plan.ops[next(i for i in listed if plan.ops[i].tb == t)] for t in tbs[:2])
        raise PlanFormatError(
            f"{plan.path}: {b.path}: {what} is {role} from thread blocks {a.tb_id} and {b.tb_id} of GPU {a.gpu}; their order is not "
            "fixed, and collspec does not model unordered uses of one channel or semaphore yet"
        )


def _channels(plan: Plan, edges: _Edges, blocked, found) -> None:
    signals, waits = defaultdict(list), defaultdict(list)
    earlier_proxies = {}  # port signal op -> proxy copies of its channel issued before it
    pending = defaultdict(list)
    for op in plan.ops:
        if op.proxy:
            pending[op.fifo].append(op.index)
        for end in op.signals:
            signals[end].append(op.index)
            if end[1] == "port":
                earlier_proxies[(op.index, end)] = [t for t in pending[end] if t != op.index]
        for end in op.waits:
            waits[end].append(op.index)
    peer_end = {}
    for g in range(plan.ngpus):
        for kind in ("memory", "port"):
            for c, (peer, tag) in enumerate(_channel_list(plan, g, kind)):
                peer_end[(g, peer, tag)] = (g, kind, c)
    for table, role in ((signals, "signalled"), (waits, "waited on")):
        for end, listed in table.items():
            _single_tb(plan, [i for i in listed], f"{end[1]} channel {end[2]} of GPU {end[0]}", role)
    for end in sorted(set(signals) | set(waits)):
        g, kind, c = end
        peer, tag = _channel_list(plan, g, kind)[c]
        other = peer_end.get((peer, g, tag))  # the end this one is connected to
        sent, got = signals.get(end, []), waits.get(other, []) if other is not None else []
        for k, w in enumerate(got):
            if k < len(sent):
                s = sent[k]
                edges.add(s, w, MESSAGE, memory=not (plan.ops[s].relaxed or plan.ops[w].relaxed))
                for t in earlier_proxies.get((s, end), ()):
                    edges.add(t, w, MESSAGE)  # the proxy delivers the signal after the copies before it
        for k in range(len(got), len(sent)):
            s = plan.ops[sent[k]]
            found.append(
                Violation(
                    "unmatched",
                    f"{s.describe()} is signal number {k + 1} on its {kind} channel {c} to GPU {peer}, but GPU {peer} waits on the paired "
                    f"channel only {len(got)} time(s); the leftover signal lets a wait of the next launch return early",
                    step=s.pos, src=g, dst=peer, details={**s.where(), "channel": c, "signals": len(sent), "waits": len(got)},
                )
            )
        mine = waits.get(end, [])
        source = signals.get(other, []) if other is not None else []
        for k in range(len(source), len(mine)):
            w = plan.ops[mine[k]]
            blocked[w.index] = True
            via = f"channel {other[2]} of GPU {peer}" if other else f"GPU {peer} (which has no channel paired with it)"
            found.append(
                Violation(
                    "deadlock",
                    f"{w.describe()} is wait number {k + 1} on its {kind} channel {c} (to GPU {peer}), but {via} is signalled only "
                    f"{len(source)} time(s); the wait never returns",
                    step=w.pos, src=peer, dst=g, details={**w.where(), "channel": c, "signals": len(source), "waits": len(mine)},
                )
            )


def _semaphores(plan: Plan, edges: _Edges, blocked, found) -> None:
    acquires, releases = defaultdict(list), defaultdict(list)
    for op in plan.ops:
        for sem in op.sem_acquire:
            acquires[sem].append(op.index)
        for sem in op.sem_release:
            releases[sem].append(op.index)
    for sem in sorted(set(acquires) | set(releases)):
        g, s = sem
        got, given = acquires.get(sem, []), releases.get(sem, [])
        _single_tb(plan, got, f"semaphore {s} of GPU {g}", "acquired")
        _single_tb(plan, given, f"semaphore {s} of GPU {g}", "released")
        init = plan.semaphores[g][s]
        for k, a in enumerate(got):
            need = k - init  # the release this acquire waits for
            if need < 0:
                continue
            if need < len(given):
                edges.add(given[need], a, MESSAGE)
            else:
                op = plan.ops[a]
                blocked[a] = True
                found.append(
                    Violation(
                        "deadlock",
                        f"{op.describe()} is acquire number {k + 1} of semaphore {s} (initial value {init}), but it is released only "
                        f"{len(given)} time(s); the acquire never returns",
                        step=op.pos, dst=g, details={**op.where(), "semaphore": s},
                    )
                )
        end = init + len(given) - len(got)
        if end != init and got or end != init and given:
            op = plan.ops[(given or got)[-1]]
            found.append(
                Violation(
                    "unmatched",
                    f"semaphore {s} of GPU {g} is released {len(given)} and acquired {len(got)} time(s), so it ends at {end}, not its "
                    f"initial {init}; the next launch starts from {end}",
                    step=op.pos, dst=g, details={**op.where(), "semaphore": s},
                )
            )


def _barriers(plan: Plan, by_tb, edges: _Edges, blocked, found) -> None:
    instances = defaultdict(list)  # (gpu, id, k) -> ops
    for members in by_tb.values():
        seen = defaultdict(int)
        for i in members:
            op = plan.ops[i]
            if op.barrier is not None:
                key = (op.gpu, op.barrier[0])
                instances[key + (seen[key],)].append(i)
                seen[key] += 1
    for (g, bid, k), members in sorted(instances.items()):
        want = {plan.ops[i].barrier[1] for i in members}
        need = max(want)
        if need == 1 and len(members) == 1:
            continue
        if len(want) > 1 or len(members) != need:
            for i in members:
                blocked[i] = True
            first = plan.ops[members[0]]
            tbs = ", ".join(str(plan.ops[i].tb_id) for i in members)
            found.append(
                Violation(
                    "deadlock",
                    f"GPU {g}: barrier {bid} (its instance {k + 1}) waits for {need} thread blocks but only {len(members)} reach it "
                    f"(thread blocks {tbs}); it never releases" if len(members) < need else
                    f"GPU {g}: barrier {bid} (instance {k + 1}) is reached by thread blocks {tbs} that disagree on num_threadblocks "
                    f"({sorted(want)}) or outnumber it; the DeviceSyncer counter passes its target and never releases",
                    step=first.pos, dst=g, details={**first.where(), "barrier": bid, "arrived": len(members), "expected": need},
                )
            )
            continue
        for a in members:
            for b in members:
                nxt = b + 1
                if a != b and nxt < len(plan.ops) and plan.ops[nxt].tb == plan.ops[b].tb:
                    edges.add(a, nxt, SYNC)


def _packets(plan: Plan, edges: _Edges, blocked, found) -> None:
    writers = defaultdict(list)
    for op in plan.ops:
        for rank, buf, first, cells, packet in op.dsts:
            if packet:
                for c in range(first, first + cells):
                    writers[(rank, buf, c)].append(op.index)
    pairs = set()
    for op in plan.ops:
        for rank, buf, first, cells, packet in op.srcs:
            if not packet:
                continue
            missing = []
            for c in range(first, first + cells):
                w = writers.get((rank, buf, c))
                if not w:
                    missing.append(c)
                for x in w or ():
                    if x != op.index:
                        pairs.add((x, op.index))
            if missing:
                blocked[op.index] = True
                p = plan.parts
                names = ", ".join(f"s[{c // p}]" if p == 1 else f"s[{c // p}.{c % p}]" for c in missing[:4])
                found.append(
                    Violation(
                        "deadlock",
                        f"{op.describe()} reads packets of {names} on GPU {rank} that no op writes; it spins on their flags forever",
                        step=op.pos, dst=rank, details={**op.where(), "cells": missing[:16]},
                    )
                )
    for a, b in sorted(pairs):
        edges.add(a, b, MESSAGE)


def _deadlocks(order: Order) -> list[Violation]:
    """One violation per cycle of waits among the ops that never run."""
    plan = order.plan
    stuck = order.level < 0
    if not stuck.any():
        return []
    keep = stuck[order.exec_src] & stuck[order.exec_dst]
    src, dst, kind = order.exec_src[keep], order.exec_dst[keep], order.exec_kind[keep]
    found = []
    for component in _strongly_connected(np.flatnonzero(stuck), src, dst):
        cycle = _cycle_in(component, src, dst, kind)
        if cycle is None:
            continue
        waits = [(cycle[i % len(cycle)][0], cycle[i - 1][1], cycle[i - 1][0]) for i in range(len(cycle), 0, -1)]
        text = ", ".join(
            f"{plan.ops[a].describe()} {WAIT_VERBS[k]} {plan.ops[b].describe()}" if i == 0 else f"which {WAIT_VERBS[k]} {plan.ops[b].describe()}"
            for i, (a, k, b) in enumerate(waits)
        )
        first = plan.ops[cycle[0][0]]
        found.append(
            Violation(
                "deadlock",
                f"GPU {first.gpu}: a cycle of {len(cycle)} waits that never ends: {text}",
                step=first.pos, dst=first.gpu,
                details={**first.where(), "cycle": [plan.ops[s].where() for s, _ in cycle], "ops_stuck": len(component)},
            )
        )
    return found
