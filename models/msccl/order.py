"""Happens-before of an MSCCL program under the executors' concurrent
semantics, and what follows from it: unmatched messages, deadlocks, and an
order in which to run the program.

The model (docs/msccl.md gives the evidence):

- every GPU runs all its thread blocks at once; a thread block runs its
  steps in order;
- a step waits for its dependencies (resolved by :mod:`.executor`);
- sends and receives pair up in order on each connection (sender,
  receiver, channel): the k-th send-type step of the sending thread block
  with the k-th receive-type step of the receiving one; a receive waits for
  its send. By default a send does not wait for its receive: the
  connection buffers what was sent. With ``slots`` (the executors' FIFO of
  NCCL_STEPS slots) a connection holds that many slots of ``slot_size``
  chunks: a send of ``cnt`` chunks takes ``ceil(cnt / slot_size)`` slots
  and waits for the receives that free room for it (*slots*); a send larger
  than the slots waits for its receiver to reach the receive, that is for
  whatever that receive waits for besides the send (*room*).

A receive without a send, and a wait whose flag is never stored, never
end: those steps are *blocked*. A deadlock is a cycle of waits. Steps that
can run get a *level*: one more than the highest level among the steps
they wait for, so steps of one level are unordered among themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...spec.violations import Violation
from .executor import Waits, resolve_waits
from .program import RECEIVES, SENDS, Program

TB_ORDER, DEPENDENCY, MESSAGE, ROOM, SLOTS = range(5)
#: "B <verb> A" for an edge A -> B (B waits for A) of each kind
WAIT_VERBS = ("runs after", "waits for", "receives from", "sends more than the slots hold, so waits for its receiver to pass",
              "waits for the slots freed by")


@dataclass
class Order:
    """The happens-before graph of a program and the verdicts drawn from it.

    ``edge_src[e]`` happens before ``edge_dst[e]`` (kind ``edge_kind[e]``).
    ``send_match[i]`` is the receive step paired with send-type step i (or
    -1), ``recv_match[i]`` the send paired with receive-type step i.
    ``level[i]`` is -1 for a step that never runs.
    """

    program: Program
    waits: Waits
    send_match: np.ndarray
    recv_match: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_kind: np.ndarray
    level: np.ndarray
    violations: list[Violation] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Does every step run (no deadlock, nothing blocked)?"""
        return bool(np.all(self.level >= 0))

    @property
    def levels(self) -> int:
        return int(self.level.max()) + 1 if self.level.size else 0


def analyse(p: Program, slots: int | None = None, slot_size: int = 1) -> Order:
    """Build happens-before, pair the messages, find blocked steps and
    deadlocks; ``slots``: bounded connections (see the module text)."""
    waits = resolve_waits(p)
    send_match, recv_match, found = match_messages(p)
    tb_src = np.flatnonzero(p.pos[1:] > 0) if p.steps > 1 else np.zeros(0, np.int64)  # i -> i + 1 inside a tb
    msg = np.flatnonzero(send_match >= 0)
    edge_src = np.concatenate([tb_src, waits.src, msg]).astype(np.int64)
    edge_dst = np.concatenate([tb_src + 1, waits.dst, send_match[msg]]).astype(np.int64)
    edge_kind = np.concatenate([np.full(len(tb_src), TB_ORDER), np.full(len(waits.src), DEPENDENCY), np.full(len(msg), MESSAGE)]).astype(np.int8)
    if slots is not None:
        extra = slot_edges(p, send_match, edge_src[: len(tb_src) + len(waits.src)], edge_dst[: len(tb_src) + len(waits.src)], slots, slot_size)
        edge_src, edge_dst, edge_kind = (np.concatenate([a, b]).astype(a.dtype) for a, b in zip((edge_src, edge_dst, edge_kind), extra))
    blocked = np.zeros(p.steps, dtype=bool)
    blocked[[w for w, _ in waits.forever]] = True
    blocked[RECEIVES[p.type] & (recv_match < 0)] = True
    for waiting, declaring in waits.forever:
        found.append(_forever(p, waiting, declaring))
    level = levels(p.steps, edge_src, edge_dst, blocked)
    order = Order(p, waits, send_match, recv_match, edge_src, edge_dst, edge_kind, level, found)
    order.violations += deadlocks(order, blocked)
    return order


def slot_edges(p: Program, send_match, before_src, before_dst, slots: int, slot_size: int):
    """The waits bounded connections add, as (src, dst, kind) arrays: on each
    connection, in order, send k of ``m_k`` slots waits for receive j, the
    latest earlier one such that messages j..k do not fit together
    (``SLOTS``), or, when ``m_k`` alone is more than ``slots``, for every
    step its receive waits for besides the send (``ROOM``)."""
    sends = np.flatnonzero(send_match >= 0)
    conn = (p.gpu[sends].astype(np.int64) * p.ngpus + p.tb_send[p.tb[sends]]) * max(p.nchannels, 1) + p.tb_chan[p.tb[sends]]
    sends = sends[np.lexsort((sends, conn))]  # per connection, in thread-block (so send) order
    conn = (p.gpu[sends].astype(np.int64) * p.ngpus + p.tb_send[p.tb[sends]]) * max(p.nchannels, 1) + p.tb_chan[p.tb[sends]]
    need = -(-p.cnt[sends].astype(np.int64) // slot_size)
    waits_of: dict[int, list[int]] = {}
    for a, b in zip(before_src.tolist(), before_dst.tolist()):
        waits_of.setdefault(b, []).append(a)
    src, dst, kind = [], [], []
    starts = np.flatnonzero(np.r_[True, conn[1:] != conn[:-1]]).tolist() + [len(sends)]
    for lo, hi in zip(starts[:-1], starts[1:]):
        sizes = need[lo:hi].tolist()
        for k in range(hi - lo):
            send, receive = int(sends[lo + k]), int(send_match[sends[lo + k]])
            if sizes[k] > slots:
                for step in waits_of.get(receive, []):
                    src.append(step), dst.append(send), kind.append(ROOM)
                continue
            total, j = sizes[k], k
            while j > 0 and total <= slots:
                j -= 1
                total += sizes[j]
            if total > slots:
                src.append(int(send_match[sends[lo + j]])), dst.append(send), kind.append(SLOTS)
    return np.array(src, np.int64), np.array(dst, np.int64), np.array(kind, np.int8)


def match_messages(p: Program) -> tuple[np.ndarray, np.ndarray, list[Violation]]:
    """Pair sends with receives, in order, on each connection (sender,
    receiver, channel); report the leftovers and count mismatches."""
    n, t = p.steps, p.type
    send_match = np.full(n, -1, dtype=np.int64)
    recv_match = np.full(n, -1, dtype=np.int64)
    sends, recvs = np.flatnonzero(SENDS[t]), np.flatnonzero(RECEIVES[t])
    chan = np.int64(p.nchannels)
    ranks = np.int64(p.ngpus)
    span = np.int64(max(p.steps, 1))

    def keyed(steps, sender, receiver):
        ordinal = _ordinal_in_tb(p.tb[steps])
        conn = (sender * ranks + receiver) * chan + p.tb_chan[p.tb[steps]]
        return conn * span + ordinal, conn

    send_key, send_conn = keyed(sends, p.gpu[sends], p.tb_send[p.tb[sends]])
    recv_key, recv_conn = keyed(recvs, p.tb_recv[p.tb[recvs]], p.gpu[recvs])
    _, a, b = np.intersect1d(send_key, recv_key, assume_unique=True, return_indices=True)
    send_match[sends[a]] = recvs[b]
    recv_match[recvs[b]] = sends[a]
    found: list[Violation] = []
    mismatch = np.flatnonzero(p.cnt[sends[a]] != p.cnt[recvs[b]])
    for k in mismatch:
        s, r = int(sends[a[k]]), int(recvs[b[k]])
        found.append(
            _unmatched(
                p, s, f"{p.describe(s)} sends cnt={int(p.cnt[s])} to GPU {int(p.gpu[r])} but the step it pairs with, "
                f"{p.describe(r)}, receives cnt={int(p.cnt[r])}; sends and receives pair in order per connection and must move equal counts",
                peer=r,
            )
        )
    lone_sends = np.setdiff1d(np.arange(len(sends)), a, assume_unique=True)
    lone_recvs = np.setdiff1d(np.arange(len(recvs)), b, assume_unique=True)
    for k in lone_sends:
        s = int(sends[k])
        peer, ch = int(p.tb_send[p.tb[s]]), int(p.tb_chan[p.tb[s]])
        total = int(np.count_nonzero(recv_conn == send_conn[k]))
        found.append(
            _unmatched(
                p, s, f"{p.describe(s)} is send number {_ordinal(p, s, SENDS)} to GPU {peer} on channel {ch}, but GPU {peer} "
                f"receives only {total} time(s) from GPU {int(p.gpu[s])} on that channel; the data is never received",
            )
        )
    for k in lone_recvs:
        r = int(recvs[k])
        peer, ch = int(p.tb_recv[p.tb[r]]), int(p.tb_chan[p.tb[r]])
        total = int(np.count_nonzero(send_conn == recv_conn[k]))
        found.append(
            _unmatched(
                p, r, f"{p.describe(r)} is receive number {_ordinal(p, r, RECEIVES)} from GPU {peer} on channel {ch}, but GPU {peer} "
                f"sends only {total} time(s) to GPU {int(p.gpu[r])} on that channel; the receive waits forever",
            )
        )
    return send_match, recv_match, found


def _ordinal_in_tb(tbs: np.ndarray) -> np.ndarray:
    """For a tb-sorted list of steps, the index of each among its tb's."""
    if tbs.size == 0:
        return tbs.astype(np.int64)
    starts = np.r_[0, np.flatnonzero(tbs[1:] != tbs[:-1]) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(tbs)]))
    return np.arange(len(tbs)) - first


def _ordinal(p: Program, step: int, mask: np.ndarray) -> int:
    """1-based: which send (``mask`` = SENDS) or receive of its thread block a step is."""
    first = int(p.tb_first[p.tb[step]])
    return int(np.count_nonzero(mask[p.type[first : step + 1]]))


def _unmatched(p: Program, step: int, message: str, peer: int | None = None) -> Violation:
    where = p.where(step)
    details = {**where}
    if peer is not None:
        details["peer_step"] = p.where(peer)
    return Violation("unmatched", message, step=where["step"], src=where["gpu"], details=details)


def _forever(p: Program, waiting: int, declaring: int) -> Violation:
    tb_id, k = int(p.depid[declaring]), int(p.deps[declaring])
    via = "" if waiting == declaring else f" (through {p.describe(declaring)})"
    where = p.where(waiting)
    return Violation(
        "deadlock",
        f"{p.describe(waiting)}{via} waits for step {k} of thread block {tb_id} on GPU {where['gpu']}, but no step from {k} on "
        f"in that thread block sets hasdep=\"1\", so its flag never reaches {k} and the wait never ends; set hasdep=\"1\" on step {k}",
        step=where["step"],
        details={**where, "cycle": [], "waits_for": {"gpu": where["gpu"], "tb": tb_id, "step": k}},
    )


# -- levels and cycles ------------------------------------------------------------


def levels(n: int, src: np.ndarray, dst: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """Longest-path level of every step that can run (Kahn's algorithm by
    frontiers); -1 for blocked steps, steps on a cycle and all after them."""
    level = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return level
    order = np.argsort(src, kind="stable")
    succ = dst[order]
    offsets = np.searchsorted(src[order], np.arange(n + 1))
    indegree = np.bincount(dst, minlength=n).astype(np.int64)
    indegree[blocked] += 1 << 40
    frontier = np.flatnonzero(indegree == 0)
    depth = 0
    while frontier.size:
        level[frontier] = depth
        lo, hi = offsets[frontier], offsets[frontier + 1]
        counts = hi - lo
        if counts.sum() == 0:
            break
        starts = np.repeat(lo - np.r_[0, np.cumsum(counts)[:-1]], counts)
        # with return_counts, np.unique neither needs subtract.at nor imports numpy.ma
        targets, times = np.unique(succ[starts + np.arange(counts.sum())], return_counts=True)
        indegree[targets] -= times
        frontier = targets[indegree[targets] == 0]
        depth += 1
    return level


def deadlocks(order: Order, blocked: np.ndarray) -> list[Violation]:
    """One ``deadlock`` violation per strongly connected set of steps that
    wait on each other, naming one cycle through it."""
    p = order.program
    stuck = order.level < 0
    if not stuck.any():
        return []
    keep = stuck[order.edge_src] & stuck[order.edge_dst]
    src, dst, kind = order.edge_src[keep], order.edge_dst[keep], order.edge_kind[keep]
    found = []
    for component in _strongly_connected(np.flatnonzero(stuck), src, dst):
        cycle = _cycle_in(component, src, dst, kind)
        if cycle is None:
            continue
        steps = [s for s, _ in cycle]
        # read the cycle backwards, as waits: s0 <verb> s_{m-1}, which <verb> ... s0
        waits = [(cycle[i % len(cycle)][0], cycle[i - 1][1], cycle[i - 1][0]) for i in range(len(cycle), 0, -1)]
        parts = [f"{p.describe(a)} {WAIT_VERBS[k]} {p.describe(b)}" if i == 0 else f"which {WAIT_VERBS[k]} {p.describe(b)}" for i, (a, k, b) in enumerate(waits)]
        text = ", ".join(parts)
        where = p.where(steps[0])
        found.append(
            Violation(
                "deadlock",
                f"GPU {where['gpu']}: a cycle of {len(steps)} waits that never ends: {text}",
                step=where["step"],
                details={**where, "cycle": [p.where(s) for s in steps], "steps_stuck": int(len(component))},
            )
        )
    return found


def _strongly_connected(nodes: np.ndarray, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Tarjan's algorithm (iterative) on the subgraph; components with a cycle."""
    adjacency: dict[int, list[int]] = {}
    for a, b in zip(src.tolist(), dst.tolist()):
        adjacency.setdefault(a, []).append(b)
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    result = []
    counter = 0
    for root in nodes.tolist():
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            succs = adjacency.get(node, [])
            if i < len(succs):
                work.append((node, i + 1))
                nxt = succs[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in adjacency.get(node, []):
                    result.append(sorted(component))
    return result


def _cycle_in(component: list[int], src, dst, kind) -> list[tuple[int, int]] | None:
    """A shortest cycle through the component's first step, as (step, kind
    of the edge to the next step)."""
    members = set(component)
    succ: dict[int, list[tuple[int, int]]] = {}
    for a, b, k in zip(src.tolist(), dst.tolist(), kind.tolist()):
        if a in members and b in members:
            succ.setdefault(a, []).append((b, k))
    start = component[0]
    parent: dict[int, tuple[int, int]] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for b, k in succ.get(node, []):
                if b == start:
                    path = [(node, k)]
                    while path[-1][0] != start:
                        prev, pk = parent[path[-1][0]]
                        path.append((prev, pk))
                    return list(reversed(path))
                if b not in parent:
                    parent[b] = (node, k)
                    nxt.append(b)
        frontier = nxt
    return None

