"""The bundled MSCCL corpus: real algorithm files from RCCL and msccl-tools
(``data/``, with ``SOURCES.md``), and the verdict collspec gives each.

Shipped as package data, so ``collspec verify`` checks it from an installed
package; the tests read the same files. ``EXPECTED`` records, per file, the
error kinds the verifier must report (none: every file is right under the
executors' semantics) and the lint rules it must warn about, with the
reason.
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
    "all-reduce-ring-simple.xml": _ok("RCCL's 16-GPU ring over 24 channels: right in place and out of place"),
    "all-to-all-2d-hierarchical-simple-n2g32.xml": _ok("two-level all-to-all over 2 x 16 GPUs through scratch, ordered by nop dependencies"),
    "allgather-8n-0-1kb.xml": _ok("in-place all-gather, one thread block per peer and direction"),
    "allgather-allpairs-8n-ll.xml": _ok("in-place all-pairs all-gather"),
    "allreduce-1step-4n-ll-1pass.xml": _ok("every GPU gathers all inputs into scratch and reduces them itself"),
    "allreduce-allpairs-8n-Simple-1pass-op.xml": _ok("out-of-place all-pairs all-reduce through scratch"),
    "allreduce-allpairs-8n-simple.xml": _ok("in-place all-pairs all-reduce: reduce-scatter into scratch, then all-gather"),
    "allreduce-ring-4gpu-mscclang.xml": _ok(
        "MSCCLang's ring (allreduce_a100_ring.py 4 1 1) is right, but it is written in MSCCLang's old format without "
        "outofplace, minBytes and maxBytes, which msccl-executor-nccl and RCCL require (msccl_parser.cc reads them "
        "with mscclXmlGetAttrInt64, which fails on a missing attribute)",
        "missing-attribute",
    ),
    "alltoall-8n-0-1kb.xml": _ok("out-of-place all-to-all: one local copy and one send/receive per peer"),
}


def files() -> list[Path]:
    """The corpus files, sorted by name."""
    return sorted(DATA.glob("*.xml"))
