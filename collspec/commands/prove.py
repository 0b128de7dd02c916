"""Run the machine-checked proofs: one row per proof with its scope
(`all N>=2`, `all N in 2..65536`, or `N<=K`, with the premises the row
assumes), result and seconds. Exit 1 when a proof fails or Z3 cannot decide
it within its resource limit; each such row says why (a counterexample,
"unknown (resource limit reached)", ...) and what to do. `--schedule FILE...`
instead proves that each schedule file computes its collective for all
inputs (files, folders and globs, `--jobs N` at a time, the worst status wins)."""

from __future__ import annotations

import sys
import time

from ..limits import add_options as add_limit_options
from ..spec.errors import CollspecError
from . import add_json_option, batch


def configure(parser):
    parser.add_argument("--only", metavar="NAME", help="run only the proofs whose name contains NAME")
    parser.add_argument("--list", action="store_true", help="list the proofs and exit")
    parser.add_argument("--schedule", nargs="+", metavar="FILE", help="bounded proof that each schedule file computes its collective (files, folders, globs)")
    parser.add_argument("--full", action="store_true", help="heavier bounded proofs (larger N); minutes rather than seconds")
    add_limit_options(parser)
    parser.add_argument("--rlimit-factor", type=_factor, default=1.0, metavar="K",
                        help="multiply every row's Z3 resource limit by K (a row that ends 'unknown (resource limit reached)')")
    add_json_option(parser)
    batch.add_options(parser)


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
        raise CollspecError("--schedule proves schedule files; give it without --only, --list, --full or --rlimit-factor")
    if args.schedule:
        return _prove_schedule(args)
    chosen = proofs.select(proofs.suite(full=args.full), args.only)
    if not chosen:
        raise CollspecError(f"no proof name contains {args.only!r}; 'collspec prove --list' shows the names")
    out = sys.stderr if args.json == "-" else sys.stdout
    if args.list:
        if args.junit or args.sarif:
            raise CollspecError("--list runs no proof; --junit and --sarif report on a run")
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
    held = proofs.premises_held(results)
    for before, result in zip(results, held):
        if before.ok and not result.ok:
            print(f"{result.name}: {result.why}: {result.message}\n    to do: {result.advice}", file=out)
    results = held
    failed = [r for r in results if not r.ok]
    trivial = [r for r in results if r.status == TRIVIAL]
    proved = len(results) - len(failed) - len(trivial)
    by_definition = f", {len(trivial)} true by definition (not counted)" if trivial else ""
    print(f"prove: {len(results)} proofs, {proved} proved{by_definition}, {len(failed)} not proved ({seconds:.1f} s)", file=out)
    return _emit(args, "collspec proofs" + (" --full" if args.full else ""), results, seconds)


def _prove_schedule(args) -> int:
    paths = batch.expand(args.schedule)
    results = batch.run_files(prove_file, paths, bool(args.sarif), args.jobs)
    return batch.emit("prove", results, args, single=lambda result: _print_one(result, args))


def prove_file(path: str, locate: bool = False) -> batch.FileResult:
    """The bounded proof of one schedule file: its report (as ``prove
    --schedule --json`` writes it) and exit status. Never raises: a
    malformed file is status 2, a failure of collspec itself status 3.
    ``locate``: also find each violation's line and column (for SARIF)."""
    return batch.guarded(path, "prove", lambda: _prove_file(path, locate), locate)


def _prove_file(path: str, locate: bool) -> batch.FileResult:
    from .. import limits
    from ..proofs import schedules
    from ..proofs.suite import ProofResult
    from ..inputs import read_input
    from .check import FORMATS

    source = read_input(path)
    kind = FORMATS[source.kind]
    schedule = source.schedule()
    limits.admit_proof(schedule, path)
    started = time.perf_counter()
    outcome = schedules.prove_schedule(schedule)
    result = ProofResult(f"schedule {path}", f"N={schedule.ranks}", outcome.status, time.perf_counter() - started, outcome.message, outcome.counterexample, outcome.queries)
    report = proofs_report(path, [result], result.seconds, schedules.violations(schedule, outcome))
    located = []
    if locate and report.violations:
        from ..locate import locate as where

        # the proof names steps of the lowered schedule: exact places exist for schedule files only
        located = where(path, "schedule", schedule, report.violations) if kind == "schedule" else [(None, None)] * len(report.violations)
    return batch.FileResult(path, report, report.exit_code, format=kind, locations=located)


def _print_one(result: batch.FileResult, args) -> None:
    """One file: its proof row as always, or the one-line error."""
    from ..report import write_json

    out = sys.stderr if args.json == "-" else sys.stdout
    if result.status >= 2:
        print(f"collspec prove: {'internal error' if result.status == 3 else 'error'}: {result.error}", file=sys.stderr)
        if result.status == 2 and args.json:
            write_json(result.report.to_json(), args.json)
        return
    row = result.report.stats["proofs"][0]
    print(f"{row['name']}  {row['scope']}  {row['result']}  {row['seconds']:.2f}", file=out)
    if not result.report.ok:
        print(f"    {row['message']}", file=out)
    if args.json:
        write_json(result.report.to_json(), args.json)


def _emit(args, subject: str, results, seconds: float, violations=None) -> int:
    from ..report import write_json

    report = proofs_report(subject, results, seconds, violations)
    if args.json:
        write_json(report.to_json(), args.json)
    if args.junit:
        from .. import junit

        junit.write(junit.proofs_document(f"collspec prove{' --full' if args.full else ''}", results), args.junit)
    if args.sarif:
        from .. import sarif

        sarif.write(sarif.document(proof_results=results), args.sarif)
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
