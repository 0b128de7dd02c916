"""Several files in one run: which files the arguments name, checking them
in order or in parallel processes, and what the run prints and writes.

A command that checks files (``check``, ``prove --schedule``) gives one
function ``path -> FileResult`` (it must be a module-level function, so
worker processes can import it) and hands it to :func:`run_files`. The
results come back in the order of the paths whatever ``--jobs`` is, so
every output is deterministic.

Exit status of a run: the worst over its files (3 > 2 > 1 > 0): 0 every
check holds, 1 a check failed, 2 a file is malformed or unreadable, 3 an
internal error of collspec.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from typing import Callable

from ..report import Report
from ..spec.errors import CollspecError

#: file name endings a directory is searched for (recursively)
SUFFIXES = (".json", ".xml")
#: statuses of a file, by exit code
STATUS_NAMES = {0: "ok", 1: "FAILED", 2: "malformed", 3: "internal error"}


@dataclass
class FileResult:
    """The outcome of one file. ``report`` always exists: a malformed file
    has one ``malformed`` violation, an internal error none (``error`` holds
    its one line). ``status`` is the file's exit code. ``locations`` is
    parallel to ``report.violations``: each one's (line, column) in the
    file, either None where unknown (filled only when asked for)."""

    path: str
    report: Report
    status: int
    error: str | None = None
    format: str | None = None  # "msccl", "mscclpp" or "schedule"
    locations: list[tuple[int | None, int | None]] = field(default_factory=list)


def expand(arguments: list[str]) -> list[str]:
    """The files named by ``arguments``, in order, each once: a file as
    given; a directory, every ``*.json`` and ``*.xml`` below it (sorted,
    hidden folders skipped); a pattern with ``*``, ``?`` or ``[``, its
    matches (sorted; ``**`` crosses folders). A directory or pattern that
    names no file is bad input (CollspecError)."""
    out: list[str] = []
    for argument in arguments:
        if os.path.isdir(argument):
            found = _below(argument)
            if not found:
                raise CollspecError(f"{argument}: no {' or '.join('*' + s for s in SUFFIXES)} file in this folder")
        elif glob.has_magic(argument) and not os.path.exists(argument):
            found = []
            for match in sorted(glob.glob(argument, recursive=True)):
                found.extend(_below(match) if os.path.isdir(match) else [match])
            if not found:
                raise CollspecError(f"{argument}: no file matches this pattern")
        else:
            found = [argument]
        out.extend(found)
    return list(dict.fromkeys(out))


def _below(folder: str) -> list[str]:
    found = []
    for root, folders, names in os.walk(folder):
        folders[:] = [f for f in folders if not f.startswith(".")]
        found.extend(os.path.join(root, n) for n in names if n.lower().endswith(SUFFIXES))
    return sorted(found)


def guarded(path: str, command: str, work: Callable[[], FileResult], locate: bool = False) -> FileResult:
    """``work()``, with bad input turned into a malformed result (status 2)
    and any other exception into an internal error (status 3): one file
    never stops the run. ``locate``: find where a format error points."""
    from ..spec.violations import Violation

    try:
        return work()
    except CollspecError as error:
        where = []
        if locate:
            from ..locate import locate_error

            where = [locate_error(path, str(error))]
        return FileResult(path, Report(command, path, [Violation("malformed", str(error))]), 2, str(error), locations=where)
    except RecursionError:
        message = f"{path}: nested too deeply to check"
        return FileResult(path, Report(command, path, [Violation("malformed", message)]), 2, message)
    except MemoryError:
        from ..limits import memory_hint

        message = f"{path}: out of memory; {memory_hint()}"
        return FileResult(path, Report(command, path, [Violation("malformed", message)]), 2, message)
    except Exception as error:  # noqa: BLE001 - reported as collspec's own failure, exit 3
        from ..cli import internal_error_text

        message = internal_error_text(error)
        return FileResult(path, Report(command, path), 3, message)


def run_files(function: Callable, paths: list[str], options, jobs: int) -> list[FileResult]:
    """``function(path, options)`` for every path, in parallel processes when
    ``jobs`` > 1; results in the order of ``paths``."""
    if jobs < 1:
        raise CollspecError(f"--jobs {jobs}: give at least 1")
    if jobs == 1 or len(paths) < 2:
        return [function(path, options) for path in paths]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(paths))) as pool:
        futures = [pool.submit(function, path, options) for path in paths]
        return [_outcome(future, path, function) for future, path in zip(futures, paths)]


def _outcome(future, path: str, function) -> FileResult:
    """A worker's result; a worker that died (killed, out of memory) is an
    internal error of that file (status 3), not of the run."""
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - BrokenProcessPool and the like
        command = function.__name__.split("_")[0]
        message = f"its worker process failed ({type(error).__name__}: {error}); check it alone with --jobs 1"
        return FileResult(path, Report(command, path), 3, message)


def worst(results: list[FileResult]) -> int:
    return max((r.status for r in results), default=0)


def add_options(parser) -> None:
    """``--jobs``, ``--junit`` and ``--sarif`` (``--json`` is added by the command)."""
    parser.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="check N files at a time, in separate processes (default 1); output order stays the order of the files")
    parser.add_argument("--junit", metavar="PATH", help="write a JUnit XML report to PATH: one testcase per file")
    parser.add_argument("--sarif", metavar="PATH", help="write a SARIF 2.1.0 log to PATH: one result per violation and warning, at its file, line and column")


def summary_line(result: FileResult) -> str:
    """``check ring.json: ok (0 errors, 1 warning)``: one line per file."""
    if result.status >= 2:
        return f"{result.report.command} {result.path}: {STATUS_NAMES[result.status]}: {result.error}"
    errors = sum(v.is_error for v in result.report.violations)
    warnings = len(result.report.violations) - errors
    return f"{result.report.command} {result.path}: {STATUS_NAMES[result.status]} ({_count(errors, 'error')}, {_count(warnings, 'warning')})"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def combined_json(command: str, results: list[FileResult]) -> dict:
    """The ``--json`` report of several files: the contract's keys over the
    whole run (``violations`` holds every file's, each with its ``file``),
    ``status`` (the exit code), and ``files``: each file's own report (as
    one file gets it) with its ``status``."""
    files = []
    violations = []
    for r in results:
        one = r.report.to_json()
        one["status"] = r.status
        if r.error and r.status == 3:
            one["error"] = r.error
        files.append(one)
        violations += [{"file": r.path, **v} for v in one["violations"]]
    counts = {name: sum(r.status == code for r in results) for code, name in STATUS_NAMES.items()}
    return {
        "ok": worst(results) == 0,
        "command": command,
        "subject": f"{len(results)} files",
        "status": worst(results),
        "violations": violations,
        "stats": {"files": len(results), **{k.replace(" ", "_").lower(): v for k, v in counts.items()}},
        "files": files,
    }


def emit(command: str, results: list[FileResult], args, *, single: Callable[[FileResult], None]) -> int:
    """Print the run and write ``--json``, ``--junit`` and ``--sarif``;
    return the worst status. One file prints as it always has
    (``single``); several print one summary line each and a total."""
    from ..report import write_json

    out = sys.stderr if getattr(args, "json", None) == "-" else sys.stdout
    if len(results) == 1:
        single(results[0])
    else:
        for r in results:
            print(summary_line(r), file=out)
        counts = ", ".join(f"{sum(r.status == code for r in results)} {name}" for code, name in STATUS_NAMES.items() if code == 0 or any(r.status == code for r in results))
        print(f"{command}: {len(results)} files: {counts}", file=out)
        if args.json:
            write_json(combined_json(command, results), args.json)
    if getattr(args, "junit", None):
        from .. import junit

        junit.write(junit.files_document(command, results), args.junit)
    if getattr(args, "sarif", None):
        from .. import sarif

        sarif.write(sarif.document(results), args.sarif)
    return worst(results)
