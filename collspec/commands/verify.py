"""The main job: the spec's own examples, every proof, the checker on every
built-in algorithm, on the bundled MSCCL corpus and MSCCL++ plans, and conformance of gloo at
4 ranks. Prints one summary table; exit 1 if any part fails."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from . import add_json_option


@dataclass
class PartResult:
    name: str
    status: str  # "ok" or "FAILED"
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


VERIFY_RANKS = (1, 2, 3, 4, 5, 7, 8, 16, 17, 64)


def _check_builtins() -> tuple[bool, str]:
    """The checker on every built-in (algorithm, collective) at several N.

    ring-seed's reduce_scatter is expected to fail (it leaves rank r with
    chunk r + 1); verify requires that it keeps failing for that reason.
    """
    from ..models.checker import check
    from ..models.generators import ALGORITHMS, generate

    checked, wrong = 0, []
    for algorithm, table in ALGORITHMS.items():
        for collective in table:
            for n in VERIFY_RANKS:
                result = check(generate(algorithm, collective, n))
                expect_ok = not (algorithm == "ring-seed" and collective == "reduce_scatter" and n > 1)
                if result.ok != expect_ok:
                    wrong.append(f"{algorithm} {collective} N={n}")
                checked += 1
    detail = f"{checked} schedules, {len(ALGORITHMS)} algorithms, N in {VERIFY_RANKS[0]}..{VERIFY_RANKS[-1]}"
    return not wrong, detail + (f"; unexpected: {', '.join(wrong[:5])}" if wrong else "")


def _check_msccl_corpus() -> tuple[bool, str]:
    """The MSCCL verifier on every bundled corpus file; each must get the
    verdict recorded in collspec.models.msccl.corpus.EXPECTED. Then a
    round trip: export the ring all-reduce at several N and verify it."""
    from ..models.generators import generate
    from ..models.msccl import load, loads, to_xml, verify
    from ..models.msccl.corpus import EXPECTED, files

    wrong = []
    paths = files()
    for path in paths:
        verdict = verify(load(str(path)))
        expected = EXPECTED.get(path.name)
        lint = {v.details.get("rule") for v in verdict.violations if v.kind == "lint"}
        if expected is None or verdict.kinds() != expected.errors or lint != expected.lint:
            wrong.append(f"{path.name}: errors {sorted(verdict.kinds())}, lint {sorted(lint)}")
    missing = sorted(set(EXPECTED) - {p.name for p in paths})
    wrong += [f"{name}: missing from the bundled corpus" for name in missing]
    exported = (2, 3, 8, 17)
    for n in exported:
        if not verify(loads(to_xml(generate("ring", "allreduce", n)), f"ring-{n}.xml")).ok:
            wrong.append(f"exported ring allreduce N={n} fails")
    detail = f"{len(paths)} files as expected, exported rings N={','.join(map(str, exported))} verified"
    return not wrong, detail if not wrong else "; ".join(wrong[:5])


def _check_mscclpp_corpus() -> tuple[bool, str]:
    """The MSCCL++ plan verifier on every bundled plan; each must get the
    verdict recorded in collspec.models.mscclpp.corpus.EXPECTED. Then a
    round trip: export the ring all-reduce as a plan at several N and
    verify it."""
    from ..models.generators import generate
    from ..models.mscclpp import load, loads, verify
    from ..models.mscclpp.corpus import EXPECTED, files
    from ..models.mscclpp.export import to_plan

    wrong = []
    paths = files()
    for path in paths:
        verdict = verify(load(str(path)))
        expected = EXPECTED.get(path.name)
        lint = {v.details.get("rule") for v in verdict.violations if v.kind == "lint"}
        if expected is None or verdict.kinds() != expected.errors or lint != expected.lint:
            wrong.append(f"{path.name}: errors {sorted(verdict.kinds())}, lint {sorted(lint)}")
    missing = sorted(set(EXPECTED) - {p.name for p in paths})
    wrong += [f"{name}: missing from the bundled corpus" for name in missing]
    exported = (2, 3, 8, 17)
    for n in exported:
        if not verify(loads(to_plan(generate("ring", "allreduce", n)), f"ring-{n}.json")).ok:
            wrong.append(f"exported ring allreduce plan N={n} fails")
    detail = f"{len(paths)} plans as expected, exported rings N={','.join(map(str, exported))} verified"
    return not wrong, detail if not wrong else "; ".join(wrong[:5])


def _prove() -> tuple[bool, str]:
    """The default proof suite of ``collspec prove``."""
    from ..proofs.suite import run_proof, suite

    results = [run_proof(p) for p in suite()]
    return _prove_summary(results)


def _prove_summary(results) -> tuple[bool, str]:
    """(ok, detail) of the proof rows; each row not proved is named with why
    (a counterexample, a resource limit) and what to do."""
    failed = [r for r in results if not r.ok]
    trivial = sum(r.status == "trivial" for r in results)
    proved = [r for r in results if r.status == "proved"]
    every_n = sum(r.scope.startswith("all N") for r in proved)
    detail = f"{len(proved)}/{len(results) - trivial} proved ({every_n} for all N, {len(proved) - every_n} bounded; {trivial} true by definition, not counted)"
    shown = "".join(f"; not proved: {r.name}: {r.why}; to do: {r.advice}" for r in failed[:5])
    return not failed, detail + shown


def _conform_gloo() -> tuple[bool, str]:
    """torch.distributed's gloo at 4 ranks, --quick (known findings are warnings)."""
    from ..conformance.conform import conform

    result = conform("gloo", world_size=4, mode="quick")
    errors = [v for v in result.violations if v.is_error]
    detail = f"{sum(result.counts().values())} cases: {result.summary()}"
    if errors:
        detail += f"; first: {errors[0].message}"
    return not errors, detail


#: (name, function returning (ok, detail)). Order is the order of the table.
PARTS: list[tuple[str, Callable[[], tuple[bool, str]]]] = [
    ("spec examples", _spec_examples),
    ("prove", _prove),
    ("check built-in algorithms", _check_builtins),
    ("check MSCCL corpus", _check_msccl_corpus),
    ("check MSCCL++ plans", _check_mscclpp_corpus),
    ("conform gloo, 4 ranks, quick", _conform_gloo),
]


def configure(parser):
    add_json_option(parser)


def run(args) -> int:
    from ..report import Report, write_json
    from ..spec.errors import CollspecError
    from ..spec.violations import Violation

    results = []
    for name, part in PARTS:
        start = time.perf_counter()
        try:
            ok, detail = part()
        except CollspecError as error:  # a part that cannot run has failed
            ok, detail = False, str(error)
        results.append(PartResult(name, "ok" if ok else "FAILED", detail, time.perf_counter() - start))
        print(f"  {name:<32} {results[-1].status:<7} {results[-1].seconds:7.1f}s  {detail}", flush=True)
    failed = [r for r in results if r.status == "FAILED"]
    print(f"verify: {len(results) - len(failed)} parts ok, {len(failed)} failed")
    if args.json:
        violations = [Violation("postcondition", f"{r.name}: {r.detail}") for r in failed]
        write_json(Report("verify", "collspec", violations, {"parts": [r.__dict__ for r in results]}).to_json(), args.json)
    return 1 if failed else 0
