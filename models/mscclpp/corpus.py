"""The bundled MSCCL++ corpus: real execution plans from microsoft/mscclpp
(``data/``, with ``SOURCES.md``), and the verdict collspec gives each.

Shipped as package data, so ``collspec verify`` checks it from an installed
package; the tests read the same files. ``EXPECTED`` records, per file, the
error kinds the verifier must report and the lint rules it must warn
about, with the reason; a finding on a real plan is explained here as a
bug in the plan or a limit of the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Expected:
    errors: frozenset[str]
    lint: frozenset[str]
    why: str


def _ok(why: str, *lint: str) -> Expected:
    return Expected(frozenset(), frozenset(lint), why)


EXPECTED: dict[str, Expected] = {
    "exec-allreduce.json": _ok("2-GPU all-pairs allreduce over memory channels: rlxsignal/rlxwait only guard entry and exit, data is ordered by release/acquire signal/wait"),
    "exec-allreduce_packet.json": _ok("2-GPU LL allreduce: packets synchronise put, reduce-send and unpack"),
    "exec-allreduce_pipeline.json": _ok(
        "4-GPU NVLS allreduce, a pipeline of three thread blocks chained by device semaphores (checked for one pipeline "
        "iteration); its switch channels name their buffer 'buff', which this revision of execution_plan.cc does not read",
        "switch-buff",
    ),
    "plan-reduce.json": _ok("2-GPU allreduce exercising copy, put, get, re-family ops, each step fenced by nop + signal/wait"),
    "plan-reduce_nvls.json": _ok("2-GPU NVLS (multimem glres) allreduce"),
    "plan-reduce_nvls_pipeline.json": _ok("the NVLS allreduce inside a pipeline"),
    "plan-reduce_pack.json": _ok("2-GPU LL allreduce with reduce-copy-send packets"),
    "plan-reduce_pack_tbg.json": _ok("the LL allreduce split over thread block groups of 2: packets order each half"),
    "plan-reduce_tbg.json": Expected(
        frozenset({"race"}),
        frozenset(),
        "a real bug in the plan: GPU 1's group copies i[0:2] to s[0:2] split by 2 (tb 1 does chunk 1), but GPU 0's group "
        "reads chunk 1 split by 2 (tb 0 reads its first half) after waiting only for GPU 1 tb 0's signal, so it may read "
        "s[1] before GPU 1 tb 1 wrote it (and likewise for chunk 0 and the writes back into i)",
    ),
    "plan-transfer_pack.json": _ok("2-GPU in-place LL allgather: put, copy, read-put and unpack packets"),
    "plan-transfer_pack_tbg.json": _ok("the LL allgather over thread block groups"),
}


def files() -> list[Path]:
    """The corpus files, sorted by name."""
    return sorted(DATA.glob("*.json"))
