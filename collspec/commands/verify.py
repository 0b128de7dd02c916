"""The main job: the spec's own examples, every proof, the checker on every
built-in algorithm and on the bundled MSCCL corpus, and conformance of gloo at
4 ranks. Prints one summary table; exit 1 if any part fails."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from . import NotBuilt, add_json_option


@dataclass
class PartResult:
    name: str
    status: str  # "ok", "FAILED", "not built"
    detail: str
    seconds: float


def _spec_examples() -> tuple[bool, str]:
    """Run every example in the spec's documentation (doctest)."""
    import doctest
    import importlib
    import pkgutil

    import collspec.spec as spec

    failed = attempted = 0
    for info in pkgutil.iter_modules(spec.__path__, "collspec.spec."):
        result = doctest.testmod(importlib.import_module(info.name), verbose=False, report=False)
        failed, attempted = failed + result.failed, attempted + result.attempted
    result = doctest.testmod(spec, verbose=False, report=False)
    failed, attempted = failed + result.failed, attempted + result.attempted
    return failed == 0, f"{attempted - failed}/{attempted} documented examples hold"


def _conform_gloo() -> tuple[bool, str]:
    """torch.distributed's gloo at 4 ranks, --quick (known findings are warnings)."""
    from ..conformance.conform import conform

    result = conform("gloo", world_size=4, mode="quick")
    errors = [v for v in result.violations if v.is_error]
    detail = f"{sum(result.counts().values())} cases: {result.summary()}"
    if errors:
        detail += f"; first: {errors[0].message}"
    return not errors, detail


def _not_built(command: str, issue: int, part: str) -> Callable[[], tuple[bool, str]]:
    def part_fn() -> tuple[bool, str]:
        raise NotBuilt(command, issue, part)

    return part_fn


#: (name, function returning (ok, detail)). Order is the order of the table.
PARTS: list[tuple[str, Callable[[], tuple[bool, str]]]] = [
    ("spec examples", _spec_examples),
    ("prove", _not_built("prove", 4, "proofs")),
    ("check built-in algorithms", _not_built("check", 3, "models")),
    ("check MSCCL corpus", _not_built("check", 5, "MSCCL")),
    ("conform gloo, 4 ranks, quick", _conform_gloo),
]


def configure(parser):
    add_json_option(parser)


def run(args) -> int:
    results = []
    for name, part in PARTS:
        start = time.perf_counter()
        try:
            ok, detail = part()
            status = "ok" if ok else "FAILED"
        except NotBuilt as missing:
            status, detail = "not built", str(missing)
        results.append(PartResult(name, status, detail, time.perf_counter() - start))
        print(f"  {name:<32} {status:<9} {results[-1].seconds:7.1f}s  {detail}", flush=True)
    failed = [r for r in results if r.status == "FAILED"]
    missing = [r for r in results if r.status == "not built"]
    print(f"verify: {len(results) - len(failed) - len(missing)} parts ok, {len(failed)} failed, {len(missing)} not built yet")
    if args.json:
        from ..report import write_json

        write_json(
            {
                "ok": not failed,
                "command": "verify",
                "subject": "collspec",
                "violations": [],
                "stats": {"parts": [r.__dict__ for r in results]},
            },
            args.json,
        )
    return 1 if failed else 0
