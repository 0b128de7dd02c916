"""How the executors turn a thread block's ``<step>`` list into waits.

Read from msccl-executor-nccl and RCCL (``mscclGetAlgoFromXmlFile`` in
msccl_parser.cc builds the list, ``mscclRunInterpreter`` in
msccl_kernel.cu / msccl_kernel_impl.h runs it); docs/msccl.md says more.

- A ``nop`` is not kept: its dependency is added to the next *transmission*
  of its thread block, which waits for all of them before it starts. A nop
  after the last transmission waits for nothing.
- Consecutive ``re`` steps with the same destination and source buffer,
  where the later one has no dependency of its own, fuse into one
  transmission (a "continuation"). The fusion breaks after a step with
  ``hasdep=1`` and when the thread block's running count of reductions
  reaches MSCCL_MAX_REDUCE_FUSION.
- Each transmission advances a step counter: by its number of
  dependencies minus one, by its fused reductions minus one, then by one.
  A transmission with ``hasdep=1`` stores the counter (the flag) when it
  finishes. A wait on (thread block b, step k) ends once b's flag reaches
  k: that is, when the first transmission of b with ``hasdep=1`` and a
  flag of at least k finishes. If there is none, the wait never ends.

In the usual numbering (every nop carries a dependency, as MSCCLang
writes), a transmission's flag is the ``s`` of its last step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .program import MAX_REDUCE_FUSION, NOP, RE, Program


def transmission_starts(p: Program) -> np.ndarray:
    """Per step: does it start a transmission (a non-nop step that is not a
    fused continuation of the reduction before it)?"""
    start = p.type != NOP
    has_re = np.zeros(p.threadblocks, dtype=bool)
    has_re[p.tb[p.type == RE]] = True
    for tb in np.flatnonzero(has_re):
        first, count = int(p.tb_first[tb]), int(p.tb_steps[tb])
        previous = None  # (dst_buf, dst_off, src_buf) of a reduction that may continue
        reductions = 0
        for i in range(first, first + count):
            kind = int(p.type[i])
            if kind == NOP:
                continue
            if kind != RE:
                previous = None
                continue
            key = (int(p.dst_buf[i]), int(p.dst_off[i]), int(p.src_buf[i]))
            if previous == key and p.depid[i] < 0:
                start[i] = False
            reductions += 1
            previous = None if (p.hasdep[i] or reductions == MAX_REDUCE_FUSION) else key
    return start


@dataclass
class Waits:
    """The dependency waits of a program, resolved to the steps that end them.

    ``src[e]`` finishing ends the wait of ``dst[e]``; ``declared[e]`` is the
    step whose ``depid``/``deps`` asked for it (the waiting step itself, or
    a nop it absorbed). ``forever`` lists the waits that never end as
    (waiting step, declaring step). ``ignored`` lists nops whose wait no
    transmission absorbs. ``flag`` is each step's flag value, -1 where the
    step stores none.
    """

    src: np.ndarray
    dst: np.ndarray
    declared: np.ndarray
    forever: list[tuple[int, int]]
    ignored: np.ndarray
    flag: np.ndarray


def resolve_waits(p: Program) -> Waits:
    start = transmission_starts(p)
    n = p.steps
    real = p.type != NOP
    index = np.arange(n)
    tb_end = p.tb_first[p.tb] + p.tb_steps[p.tb] - 1 if n else index
    # which transmission absorbs a step's dependency: the step itself if it
    # starts one, else (nops) the next start in its thread block
    next_start = _next_true(start)
    absorber = np.where(start, index, np.where(p.type == NOP, next_start, -1))
    absorber = np.where((absorber >= 0) & (absorber <= tb_end), absorber, -1)
    has_dep = p.depid >= 0
    declares = has_dep & ((p.type == NOP) | start)
    ignored = np.flatnonzero(declares & (absorber < 0))

    flag, ends = _flags(p, start, real)
    # a wait on (tb b, step k): the first end of b with hasdep and flag >= k
    stores = ends & (p.hasdep == 1)
    store_idx = np.flatnonzero(stores)
    big = np.int64(1) << 32
    store_key = p.tb[store_idx].astype(np.int64) * big + flag[store_idx]
    order = np.argsort(store_key, kind="stable")
    store_key, store_idx = store_key[order], store_idx[order]
    waiting = np.flatnonzero(declares & (absorber >= 0))
    target_tb = p.gpu_tb_base[p.gpu[waiting]] + p.depid[waiting]
    want = target_tb * big + p.deps[waiting]
    at = np.searchsorted(store_key, want, side="left")
    found = at < len(store_key)
    found[found] = (store_key[at[found]] // big) == target_tb[found]
    forever = [(int(absorber[w]), int(w)) for w in waiting[~found]]
    hit = waiting[found]
    return Waits(
        src=store_idx[at[found]].astype(np.int64),
        dst=absorber[hit].astype(np.int64),
        declared=hit.astype(np.int64),
        forever=forever,
        ignored=ignored,
        flag=np.where(stores, flag, -1),
    )


def _next_true(mask: np.ndarray) -> np.ndarray:
    """For each position, the index of the next True at or after it (-1 if none)."""
    n = len(mask)
    idx = np.where(mask, np.arange(n), n)
    nxt = np.minimum.accumulate(idx[::-1])[::-1] if n else idx
    return np.where(nxt == n, -1, nxt)


def _flags(p: Program, start: np.ndarray, real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The executor's step counter at the end of each transmission, and
    which steps end a transmission (its last real step)."""
    n = p.steps
    flag = np.full(n, -1, dtype=np.int64)
    ends = np.zeros(n, dtype=bool)
    simple = np.ones(p.threadblocks, dtype=bool)  # no nops, no fusion: flag = position
    simple[p.tb[~start]] = False
    plain = simple[p.tb] if n else np.zeros(0, bool)
    flag[plain] = p.pos[plain]
    ends[plain] = True
    for tb in np.flatnonzero(~simple):
        first, count = int(p.tb_first[tb]), int(p.tb_steps[tb])
        counter = 0
        pending = 0  # dependencies of nops waiting for the next transmission
        current = -1  # last real step of the open transmission
        deps = 0
        fused = 0
        for i in range(first, first + count):
            if not real[i]:
                pending += int(p.depid[i] >= 0)
                continue
            if start[i]:
                if current >= 0:
                    counter = _close(flag, ends, current, counter, deps, fused)
                deps = pending + int(p.depid[i] >= 0)
                pending = 0
                fused = 1
            else:
                fused += 1
            current = i
        if current >= 0:
            _close(flag, ends, current, counter, deps, fused)
    return flag, ends


def _close(flag, ends, last: int, counter: int, deps: int, fused: int) -> int:
    if deps > 0:
        counter += deps - 1
    counter += fused - 1
    flag[last] = counter
    ends[last] = True
    return counter + 1
