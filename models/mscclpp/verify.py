"""The MSCCL++ plan verifier: is this plan right under the executor's
concurrent semantics?

:func:`verify` runs, in order:

1. happens-before (:mod:`.order`): ``deadlock`` (waits no signal, packet,
   semaphore release or barrier can satisfy, and cycles of waits) and
   ``unmatched`` (signals no wait consumes, semaphores that end the launch
   away from their initial value);
2. races (:mod:`.races`) in the plan's mode (in place or out of place);
3. the result: the plan, linearised (:mod:`.lower`), runs through the one
   interpreter and the one checker of :mod:`collspec.models`, which report
   ``wrong-column``, ``missing-contribution``, ``duplicate-contribution``
   and ``postcondition`` against the spec's collective, each located to
   the op that last wrote the cell. Skipped when some op never runs, and
   for a collective without a postcondition (``sendrecv``, the DSL's
   ``test``: the parser warns ``no-postcondition``);
4. lint warnings (format drift between the plan and the executor).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ...spec.violations import Violation
from ..checker import check
from .cells import cell_map
from .lower import Lowered, lower
from .order import analyse
from .plan import Plan
from .races import races


@dataclass
class Verdict:
    plan: Plan
    violations: list[Violation]
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(v.is_error for v in self.violations)

    def kinds(self, errors_only: bool = True) -> set[str]:
        return {v.kind for v in self.violations if v.is_error or not errors_only}


def verify(plan: Plan, *, exact: bool | None = None) -> Verdict:
    started = time.perf_counter()
    order = analyse(plan)
    found = list(order.violations)
    found += races(order, cell_map(plan))
    stats: dict = {
        "gpus": plan.ngpus,
        "threadblocks": plan.threadblocks,
        "ops": len(plan.ops),
        "collective": plan.collective or plan.coll_written,
        "mode": cell_map(plan).mode,
        "cells_per_chunk": plan.parts,
        "levels": order.levels,
    }
    if plan.collective is None:
        stats["result"] = f"not checked: {plan.coll_written!r} has no postcondition in collspec"
    elif order.complete:
        lowered = lower(order)
        result = check(lowered.schedule, exact=exact, synchronous=False)
        stats["transfers"] = result.stats["transfers"]
        stats["contributions"] = result.stats.get("contributions")
        for v in result.violations:
            found.append(_locate(plan, lowered, v))
    else:
        never = int(np.count_nonzero(order.level < 0))
        stats["result"] = f"not checked: {never} of {len(plan.ops)} ops never run (see the deadlock findings)"
    for rule, path, message in plan.lint:
        found.append(Violation("lint", f"{path}: {message}", severity="warning", details={"rule": rule, "path": path}))
    stats["seconds"] = round(time.perf_counter() - started, 4)
    return Verdict(plan, found, stats)


def _locate(plan: Plan, lowered: Lowered, v: Violation) -> Violation:
    """A checker violation about the linearised schedule, said about the plan."""
    names = lowered.schedule.layout.cell_names
    details = dict(v.details)
    cell = details.get("dst_chunk") if v.kind == "wrong-column" else details.get("chunk")
    origin = None
    if v.step is not None and v.dst is not None and cell is not None:
        origin = lowered.writers.get((int(v.step), int(v.dst), int(cell)))
    text = v.message
    if v.kind == "wrong-column":
        text = f"adds {names[details['src_chunk']]} of GPU {v.src} into {names[details['dst_chunk']]}, a different chunk; a chunk may only be reduced with the same chunk"
    elif cell is not None and v.kind != "ranks-disagree":
        details["cell"] = names[cell]
    if origin is not None:
        op = plan.ops[origin]
        details.update(op.where())
        return Violation(v.kind, f"{op.describe()} [{lowered.cells.mode}]: {text}", step=op.pos, src=v.src, dst=v.dst, severity=v.severity, details=details)
    details.pop("step", None)
    prefix = f"GPU {v.dst} " if v.dst is not None and v.kind not in ("ranks-disagree", "not-bandwidth-optimal") else ""
    return replace(v, message=f"{prefix}[{lowered.cells.mode}]: {text}", step=None, details=details)
