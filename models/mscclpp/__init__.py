"""MSCCL++ execution plans: import, a verifier with the executor's
concurrent semantics, and export of the built-in algorithms.

An execution plan (JSON) is what MSCCL++'s Python DSL compiles an
algorithm to and what the MSCCL++ executor loads. Its thread blocks run
concurrently and synchronise through memory-channel signals, LL packets,
device semaphores and barriers, so a plan can race, deadlock or compute
the wrong sum although every op looks right. This package reads a plan
(:mod:`.parse`), builds happens-before as the executor's device code
defines it (:mod:`.order`), finds races (:mod:`.races`), runs the plan
through the one interpreter and checker of :mod:`collspec.models`
(:mod:`.lower`, :mod:`.verify`) and writes the built-in algorithms as
plans (:mod:`.export`). docs/mscclpp.md records what was read where.

>>> from collspec.models.generators import generate
>>> from collspec.models.mscclpp.export import to_plan
>>> plan = loads(to_plan(generate("ring", "allreduce", 4)))
>>> verdict = verify(plan)
>>> verdict.ok, plan.ngpus, plan.threadblocks, len(plan.ops)
(True, 4, 4, 72)
"""

from .parse import PlanFormatError, load, loads, looks_like_plan
from .verify import Verdict, verify

__all__ = ["load", "loads", "looks_like_plan", "verify", "Verdict", "PlanFormatError"]
