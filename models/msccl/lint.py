"""Lint: warnings about an MSCCL file that does not break the verdict but
can break its use, mostly format drift between the executors and the tools
that write the files (MSCCLang in msccl-tools, SCCL, RCCL's generators).

Each warning has kind ``lint`` and severity ``warning``; ``details["rule"]``
names the rule and ``details["where"]`` lists the places (the first
:data:`SHOWN` in the message).
"""

from __future__ import annotations

import numpy as np

from ...spec.violations import Violation
from . import integers
from .order import Order
from .program import MAX_COUNT, MAX_STEPS_PER_TB, NOP, RESIDUAL, Program

SHOWN = 5

#: collective names msccl-executor-nccl and RCCL accept (msccl_parser.cc)
EXECUTOR_COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "send", "recv", "gather", "scatter", "alltoallv")


def lint(p: Program, order: Order) -> list[Violation]:
    found: list[Violation] = []

    def warn(rule: str, message: str, where: list[dict] | None = None) -> None:
        where = where or []
        listed = ", ".join(_place(w) for w in where[:SHOWN]) + (f" and {len(where) - SHOWN} more" if len(where) > SHOWN else "")
        text = message + (f": {listed}" if listed else "")
        first = where[0] if where else {}
        found.append(Violation("lint", text, step=first.get("step"), severity="warning", details={"rule": rule, "where": where, **{k: first[k] for k in ("gpu", "tb", "step") if k in first}}))

    missing = [name for name in ("inplace", "outofplace", "minBytes", "maxBytes") if name not in p.attrs]
    if missing:
        warn(
            "missing-attribute",
            f"<algo> has no {', '.join(missing)}: msccl-executor-nccl and RCCL refuse the file (mscclXmlGetAttrInt fails on a "
            f"missing attribute) while older MSCCL and MSCCLang's old format go without; add {' '.join(f'{m}={_suggest(p, m)!r}' for m in missing).replace(chr(39), chr(34))}"
            + (f" (read here as inplace={int(p.inplace)}, outofplace={int(p.outofplace)})" if {"inplace", "outofplace"} & set(missing) else ""),
            [{"line": p.algo_line}],
        )
    if p.coll_written not in EXECUTOR_COLLECTIVES:
        known = "reducescatter" if p.collective == "reduce_scatter" else p.collective
        warn("collective-name", f"coll={p.coll_written!r}: the executors accept only coll=\"{known}\" for this collective (msccl_parser.cc); write that", [{"line": p.algo_line}])
    if p.collective in ("broadcast", "reduce"):
        warn(
            "root",
            f"the executors pick an MSCCL {p.collective} by size and placement, never by root (mscclInternalSchedulerSelectAlgo), "
            f"but this file is right only for root {p.root}; other roots get a wrong result",
            [{"line": p.algo_line}],
        )
    _hasdep(p, order, warn)
    ignored = [p.where(int(i)) for i in order.waits.ignored]
    if ignored:
        warn("ignored-nop", "a nop after the last transmission of its thread block waits for nothing (the executors attach a nop's wait to the next transmission); remove it or move it before the step that must wait", ignored)
    long_tbs = np.flatnonzero(p.tb_steps > MAX_STEPS_PER_TB)
    if long_tbs.size:
        warn(
            "executor-limit",
            f"thread blocks with more than {MAX_STEPS_PER_TB} steps: msccl-executor-nccl and RCCL refuse them (MSCCL_MAX_NUM_STEPS); split the work over more thread blocks or channels",
            [{"gpu": int(p.tb_gpu[t]), "tb": int(p.tb_id[t]), "steps": int(p.tb_steps[t]), "line": int(p.tb_line[t])} for t in long_tbs],
        )
    big = np.flatnonzero(p.cnt >= MAX_COUNT)
    if big.size:
        warn("executor-limit", f"cnt of {MAX_COUNT} or more: the executors refuse it (MSCCL_MAX_COUNT); split the step", [p.where(int(i)) for i in big])
    res = np.flatnonzero(RESIDUAL[p.type])
    if res.size:
        warn(
            "residual-add",
            "res/ra (residual add, from SCCL's and early MSCCL's executors) adds two tensors outside the collective's buffers into dst; "
            "msccl-executor-nccl and RCCL refuse the type, and the result check here leaves the addition out",
            [p.where(int(i)) for i in res],
        )
    unknown = [{"element": tag, "attribute": name, "line": line} for tag, name, line in p.unknown_attrs]
    if unknown:
        warn("unknown-attribute", "attributes no executor reads (a typo, or a generator's private note)", unknown)
    _rccl_extras(p, warn)
    return found


def _hasdep(p: Program, order: Order, warn) -> None:
    waits = order.waits
    read = np.zeros(p.steps, dtype=bool)
    read[waits.src] = True
    unused = np.flatnonzero((p.hasdep == 1) & ~read & (p.type != NOP))
    if unused.size:
        warn("unused-hasdep", "hasdep=\"1\" on steps nothing waits for: each costs a flag store and a fence; set hasdep=\"0\"", [p.where(int(i)) for i in unused])
    late = []
    for resolved, declared in zip(waits.src.tolist(), waits.declared.tolist()):
        target = int(p.gpu_tb_base[p.gpu[declared]] + p.depid[declared])
        wanted = int(p.tb_first[target] + p.deps[declared])
        if resolved != wanted:
            late.append({**p.where(declared), "waits_for": p.where(wanted), "ends_at": p.where(resolved)})
    if late:
        warn(
            "missing-hasdep",
            "a dependency on a step without hasdep=\"1\": its flag is never stored, so the wait ends only when a later step of that "
            "thread block stores one; set hasdep=\"1\" on the step depended on",
            late,
        )


def _rccl_extras(p: Program, warn) -> None:
    """RCCL's generators add maxcount and nthreadblocks; no executor reads them, so check they agree with the file."""
    if "nthreadblocks" in p.attrs:
        per_gpu = np.bincount(p.tb_gpu, minlength=p.ngpus)[: p.ngpus]
        declared = integers.read(p.attrs["nthreadblocks"])
        if per_gpu.size and declared != int(per_gpu.max()):
            warn("rccl-attribute", f"nthreadblocks={declared} but the busiest GPU has {int(per_gpu.max())} thread blocks", [{"line": p.algo_line}])
    if "maxcount" in p.attrs and p.steps:
        declared = integers.read(p.attrs["maxcount"])
        biggest = int(p.cnt.max())
        if biggest > declared:
            warn("rccl-attribute", f"maxcount={declared} but a step moves {biggest} chunks", [p.where(int(np.argmax(p.cnt)))])


def _suggest(p: Program, attribute: str) -> str:
    """The value that keeps today's reading of a missing attribute."""
    return {"inplace": str(int(p.inplace)), "outofplace": str(int(p.outofplace))}.get(attribute, "0")


def _place(w: dict) -> str:
    if "tb" in w and "step" in w:
        return f"GPU {w['gpu']} tb {w['tb']} step {w['step']}"
    if "tb" in w:
        return f"GPU {w['gpu']} tb {w['tb']} ({w.get('steps')} steps)"
    if "attribute" in w:
        return f"{w['attribute']} on <{w['element']}> (line {w['line']})"
    return f"line {w['line']}"
