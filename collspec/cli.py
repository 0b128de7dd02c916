"""The ``collspec`` command line.

Exit status, for every subcommand: 0 all checks hold; 1 a check failed
(violations, counterexamples, a non-conforming backend); 2 bad input or
usage (an input over a limit, running out of memory), with a one-line
error on stderr and never a traceback; 3 an internal error of collspec:
one line naming the exception and a file holding the traceback, to attach
to a bug report.

Each subcommand lives in ``collspec/commands/<name>.py`` and provides
``configure(parser)`` and ``run(args) -> int``. Command modules import heavy
dependencies (z3, torch) inside ``run`` so that ``collspec check`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .spec.errors import CollspecError

#: (name, one-line help). The module is collspec.commands.<name>.
COMMANDS: list[tuple[str, str]] = [
    ("verify", "the main job: prove, check every built-in algorithm and the bundled MSCCL and MSCCL++ corpora, conform gloo"),
    ("prove", "run the machine-checked proofs (Z3)"),
    ("check", "check a schedule file (.json schedule, MSCCL .xml, MSCCL++ .json plan) or a built-in algorithm"),
    ("explain", "hop-by-hop state of an algorithm, with the contributors of every cell"),
    ("cost", "per-rank and per-link traffic, steps, alpha-beta time and the lower bound"),
    ("conform", "check a real implementation (gloo, MPI, NCCL, your own class) against the spec"),
    ("bench", "algorithm and bus bandwidth of a backend, as nccl-tests computes them"),
    ("export", "write a built-in algorithm as an MSCCL XML program or an MSCCL++ execution plan"),
    ("report", "merge the partial reports of a conformance job's ranks (conform --launcher external)"),
]


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (and exit 2, as argparse does)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="collspec",
        description="Formal specification and verification of collective operations.",
        epilog="Exit status: 0 all checks hold, 1 a check failed, 2 bad input or usage, 3 an internal error of collspec.",
    )
    parser.add_argument("--version", action="version", version=f"collspec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in COMMANDS:
        module = importlib.import_module(f"collspec.commands.{name}")
        command = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.configure(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        from . import limits

        limits.configure(args)
        return int(args.run(args))
    except CollspecError as error:
        print(f"collspec {args.command}: error: {error}", file=sys.stderr)
        _malformed_report(args, error)
        return 2
    except KeyboardInterrupt:
        print(f"collspec {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except MemoryError:
        from . import limits

        error = CollspecError(f"out of memory; {limits.memory_hint()}")
        print(f"collspec {args.command}: error: {error}", file=sys.stderr)
        _malformed_report(args, error)
        return 2
    except Exception as error:  # noqa: BLE001 - the one place every other exception ends
        print(f"collspec {args.command}: internal error: {internal_error_text(error)}", file=sys.stderr)
        return 3


#: where an internal error is reported
BUG_REPORTS = "the collspec maintainers (the project's issue tracker)"


def internal_error_text(error: BaseException) -> str:
    """One line for an internal error: the exception, where its traceback
    was written, and where to report it."""
    import tempfile
    import traceback

    from . import __version__

    what = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:200]
    try:
        with tempfile.NamedTemporaryFile("w", prefix="collspec-error-", suffix=".txt", delete=False) as handle:
            handle.write(f"collspec {__version__}\nargv: {sys.argv!r}\n")
            traceback.print_exception(error, file=handle)
        saved = f"traceback in {handle.name}; "
    except OSError:
        saved = ""
    return f"{what} ({saved}this is a bug in collspec {__version__}: please report it to {BUG_REPORTS} with the command line and its input files)"


def _malformed_report(args, error: CollspecError) -> None:
    """With --json, bad input still leaves a report: one 'malformed' violation."""
    path = getattr(args, "json", None)
    if not path:
        return
    from .report import Report, write_json
    from .spec.violations import Violation

    subject = getattr(args, "file", None) or args.command
    try:
        write_json(Report(args.command, str(subject), [Violation("malformed", str(error))]).to_json(), path)
    except CollspecError:
        pass  # the report's own folder is missing: the error line already said what is wrong


def entry() -> None:  # pragma: no cover - console script shim
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
