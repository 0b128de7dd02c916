"""One module per subcommand: ``configure(parser)`` adds its options,
``run(args) -> int`` executes it and returns the exit status."""

from __future__ import annotations

import argparse


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the JSON report to PATH ('-' for stdout)")


def emit(report, args, quiet: bool = False) -> int:
    """Print a report's summary, write ``--json`` if asked, return the exit status."""
    from ..report import print_violations, write_json
    import sys

    if args.json:
        write_json(report.to_json(), args.json)
    if not quiet:
        print_violations(report, stream=sys.stderr if args.json == "-" else sys.stdout)
    return report.exit_code
