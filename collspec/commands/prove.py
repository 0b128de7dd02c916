"""Run the machine-checked proofs: one row per proof with its scope
(`all N>=2`, `all N in 2..65536`, or `N<=K`, with the premises the row
assumes), result and seconds. Exit 1 when a proof fails or Z3 cannot decide
it within its resource limit; each such row says why (a counterexample,
"unknown (resource limit reached)", ...) and what to do. `--schedule FILE`
instead proves that one schedule file computes its collective for all inputs."""

from __future__ import annotations

import sys
import time

from ..spec.errors import CollspecError
from . import add_json_option


def configure(parser):
    parser.add_argument("--only", metavar="NAME", help="run only the proofs whose name contains NAME")
    parser.add_argument("--list", action="store_true", help="list the proofs and exit")
    parser.add_argument("--schedule", metavar="FILE", help="bounded proof that a schedule file computes its collective")
    parser.add_argument("--full", action="store_true", help="heavier bounded proofs (larger N); minutes rather than seconds")
    parser.add_argument("--rlimit-factor", type=_factor, default=1.0, metavar="K",
                        help="multiply every row's Z3 resource limit by K (a row that ends 'unknown (resource limit reached)')")
    add_json_option(parser)


def _factor(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 1e6:
        raise argparse.ArgumentTypeError(f"--rlimit-factor takes a number above 0 (at most 1e6), not {text!r}")
    return value


def run(args) -> int:
    from ..proofs import suite as proofs
    from ..proofs.solver import FAILED, TRIVIAL

    if args.schedule and (args.only or args.list or args.full or args.rlimit_factor != 1.0):
        raise CollspecError("--schedule proves one file; give it without --only, --list, --full or --rlimit-factor")
    if args.schedule:
        return _prove_schedule(args)
    chosen = proofs.select(proofs.suite(full=args.full), args.only)
    if not chosen:
        raise CollspecError(f"no proof name contains {args.only!r}; 'collspec prove --list' shows the names")
    out = sys.stderr if args.json == "-" else sys.stdout
    if args.list:
        width = max(len(p.name) for p in chosen)
        for p in chosen:
            print(f"{p.name:<{width}}  {p.scope:<{max(len(q.scope) for q in chosen)}}  {p.statement}", file=out)
        return 0
    started = time.perf_counter()
    results = []
    width = max(len(p.name) for p in chosen)
    scope_width = max(len(p.scope) for p in chosen)
    print(f"{'proof':<{width}}  {'scope':<{scope_width}}  {'result':<8}  seconds", file=out)
    for proof in chosen:
        result = proofs.run_proof(proof, args.rlimit_factor)
        results.append(result)
        print(f"{result.name:<{width}}  {result.scope:<{scope_width}}  {result.status:<8}  {result.seconds:7.2f}", file=out, flush=True)
        if not result.ok:
            print(f"    {result.why}: {result.message}", file=out)
            if result.counterexample:
                label = "counterexample" if result.status == FAILED else "undecided at"
                print(f"    {label}: {_shown(result.counterexample)}", file=out)
            print(f"    to do: {result.advice}", file=out)
    seconds = time.perf_counter() - started
    failed = [r for r in results if not r.ok]
    trivial = [r for r in results if r.status == TRIVIAL]
    proved = len(results) - len(failed) - len(trivial)
    by_definition = f", {len(trivial)} true by definition (not counted)" if trivial else ""
    print(f"prove: {len(results)} proofs, {proved} proved{by_definition}, {len(failed)} not proved ({seconds:.1f} s)", file=out)
    return _emit(args, "collspec proofs" + (" --full" if args.full else ""), results, seconds)


def _prove_schedule(args) -> int:
    from ..proofs import schedules
    from ..proofs.suite import ProofResult
    from .check import load_schedule

    schedule = load_schedule(args.schedule)
    started = time.perf_counter()
    outcome = schedules.prove_schedule(schedule)
    result = ProofResult(f"schedule {args.schedule}", f"N={schedule.ranks}", outcome.status, time.perf_counter() - started, outcome.message, outcome.counterexample, outcome.queries)
    out = sys.stderr if args.json == "-" else sys.stdout
    print(f"{result.name}  {result.scope}  {result.status}  {result.seconds:.2f}", file=out)
    if not result.ok:
        print(f"    {result.message}", file=out)
    return _emit(args, args.schedule, [result], result.seconds, schedules.violations(schedule, outcome))


def _emit(args, subject: str, results, seconds: float, violations=None) -> int:
    from ..report import write_json

    report = proofs_report(subject, results, seconds, violations)
    if args.json:
        write_json(report.to_json(), args.json)
    return report.exit_code


def proofs_report(subject: str, results, seconds: float, violations=None):
    """The report of ``collspec prove --json`` for these results (a failed
    or undecided proof is a ``postcondition`` violation naming it)."""
    from ..report import Report

    if violations is None:
        violations = [_violation(r) for r in results if not r.ok]
    return Report("prove", subject, violations, {"proofs": [r.to_json() for r in results], "seconds": round(seconds, 3)})


def _violation(result):
    from ..spec.violations import Violation

    return Violation(
        "postcondition",
        f"proof {result.name} ({result.scope}) {result.why}: {result.message}",
        details={"proof": result.name, "scope": result.scope, "result": result.status, "reason": result.reason, "advice": result.advice,
                 "counterexample": result.counterexample},
    )


def _shown(example: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in example.items())
