"""The MSCCL verifier: is this program right under the executors' concurrent
semantics?

:func:`verify` runs, in order:

1. happens-before (:mod:`.order`): ``unmatched`` sends and receives,
   ``deadlock`` (cycles of waits, and waits that never end);
2. races (:mod:`.races`) in every mode the file declares (in place, out of
   place);
3. the result: the program, linearised (:mod:`.lower`), runs through the
   one interpreter and the one checker of :mod:`collspec.models` with
   exact contributor multisets (fingerprints for large programs), which
   report ``wrong-column``, ``missing-contribution``,
   ``duplicate-contribution`` and ``postcondition`` against the spec's
   collective, plus the traffic and the bandwidth lower bound. Skipped when
   some step never runs: a program that hangs has no result;
4. lint (:mod:`.lint`): warnings about format drift between executors.

Every violation names the GPU, thread block and step (``details``: gpu,
tb, step, type, line) and the mode where it matters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ...spec.violations import Violation
from ..checker import check
from .cells import IN_PLACE, OUT_OF_PLACE, cell_map
from .lint import lint
from .lower import Lowered, lower
from .order import Order, analyse
from .program import Program
from .races import races


@dataclass
class Verdict:
    program: Program
    violations: list[Violation]
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(v.is_error for v in self.violations)

    def kinds(self, errors_only: bool = True) -> set[str]:
        return {v.kind for v in self.violations if v.is_error or not errors_only}


def modes(p: Program) -> list[str]:
    return [m for m, on in ((IN_PLACE, p.inplace), (OUT_OF_PLACE, p.outofplace)) if on]


def verify(p: Program, *, exact: bool | None = None, slots: int | None = None, slot_size: int = 1) -> Verdict:
    """Check ``p`` (see the module text). ``exact`` as in
    :func:`collspec.models.checker.check`; ``slots``: every connection holds
    that many slots of ``slot_size`` chunks (:mod:`.order`), None: unbounded."""
    started = time.perf_counter()
    order = analyse(p, slots, slot_size)
    found = list(order.violations)
    found += races(order, [cell_map(p, mode, 0) for mode in modes(p)])
    stats: dict = {
        "gpus": p.ngpus,
        "threadblocks": p.threadblocks,
        "steps": p.steps,
        "channels": p.nchannels,
        "collective": p.collective,
        "modes": modes(p),
        "levels": order.levels,
    }
    if slots is not None:
        stats["slots"] = {"slots": slots, "slot_size": slot_size}
    if order.complete:
        results = {}
        merged: dict[tuple[str, str, str], tuple[Violation, list[str]]] = {}
        for mode in modes(p):
            lowered = lower(order, mode)
            result = check(lowered.schedule, exact=exact, synchronous=False)
            results[mode] = {k: result.stats[k] for k in ("transfers", "contributions", "seconds")}
            stats.setdefault("transfers", result.stats["transfers"])
            for v in result.violations:
                located, where, text = _locate(order, lowered, v)
                merged.setdefault((v.kind, where, text), (located, []))[1].append(mode)
            if "traffic" not in stats:
                stats["traffic"] = _traffic(lowered, result.stats)
        for (_, where, text), (v, in_modes) in merged.items():
            label = " and ".join(in_modes)
            message = f"{where} [{label}]: {text}" if where else f"[{label}] {text}"
            found.append(replace(v, message=message, details={**v.details, "modes": in_modes}))
        stats["result"] = results
    else:
        never = int(np.count_nonzero(order.level < 0))
        stats["result"] = f"not checked: {never} of {p.steps} steps never run (see the deadlock and unmatched findings)"
    found += lint(p, order)
    stats["seconds"] = round(time.perf_counter() - started, 4)
    return Verdict(p, found, stats)


def _locate(order: Order, lowered: Lowered, v: Violation) -> tuple[Violation, str, str]:
    """A checker violation about the linearised schedule, said about the XML:
    the step behind the transfer it names and the buffer cell. Returns the
    violation, where (for the message) and what."""
    p = order.program
    names = lowered.schedule.layout.cell_names
    details = dict(v.details)
    xml = None
    if v.kind == "wrong-column":
        xml = lowered.writer(v.step, v.dst, details["dst_chunk"])
        text = _wrong_column(order, lowered, xml, details)
    else:
        cell = details.get("chunk")
        if v.step is not None and v.dst is not None and cell is not None:
            xml = lowered.writer(v.step, v.dst, cell)
        if cell is not None and v.kind != "ranks-disagree":
            details["cell"] = names[cell]
        text = v.message
    step = None
    if xml is not None:
        details.update(p.where(xml))
        step = details["step"]
        where = p.describe(xml)
    else:
        details.pop("step", None)
        if v.dst is not None:
            details["gpu"] = v.dst
        where = f"GPU {v.dst}" if v.dst is not None and v.kind not in ("ranks-disagree", "not-bandwidth-optimal") else ""
    return Violation(v.kind, text, step=step, src=v.src, dst=v.dst, severity=v.severity, details=details), where, text


def _wrong_column(order: Order, lowered: Lowered, xml: int | None, details: dict) -> str:
    p = order.program
    names = lowered.schedule.layout.cell_names
    src, dst = names[details["src_chunk"]], names[details["dst_chunk"]]
    if xml is None:
        return f"adds {src} into {dst}, a different chunk"
    sender = int(order.recv_match[xml])
    if sender >= 0 and dst.startswith("message"):
        return (
            f"adds its {src} to the chunk received from {p.describe(sender)}, which carries a different chunk; "
            "a chunk may only be reduced with the same chunk of other ranks"
        )
    return f"adds its {src} into its {dst}, a different chunk; a chunk may only be reduced with the same chunk"


def _traffic(lowered: Lowered, checker_stats: dict) -> dict:
    """Per-rank figures from the checker, per-link figures from the transfers."""
    schedule = lowered.schedule
    src = np.concatenate([s.src for s in schedule.steps]) if schedule.steps else np.zeros(0, np.int32)
    dst = np.concatenate([s.dst for s in schedule.steps]) if schedule.steps else np.zeros(0, np.int32)
    network = src != dst
    n = np.int64(schedule.ranks)
    links, counts = np.unique(src[network].astype(np.int64) * n + dst[network], return_counts=True)
    busiest = int(np.argmax(counts)) if counts.size else None
    figures = {k: checker_stats[k] for k in ("chunks_sent_per_rank_max", "chunks_received_per_rank_max", "busiest_rank", "busiest_rank_traffic", "lower_bound_traffic")}
    figures.update(
        {
            "chunks_over_links": int(counts.sum()),
            "links_used": int(counts.size),
            "busiest_link": None if busiest is None else [int(links[busiest] // n), int(links[busiest] % n)],
            "busiest_link_chunks": 0 if busiest is None else int(counts[busiest]),
            "busiest_link_traffic": 0.0 if busiest is None else float(counts[busiest] / schedule.chunks),
        }
    )
    return figures
