"""Work on reports: ``collspec report merge PARTIAL... --json OUT --junit OUT``
joins the partial reports the ranks of a ``--launcher external`` job wrote
(``PATH.rank<K>.json``) into one report, also when rank 0 died."""

from __future__ import annotations

import sys

from . import add_json_option


def configure(parser):
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    merge = sub.add_parser("merge", help="join the partial reports of a job's ranks",
                           description="Join the partial reports (PATH.rank<K>.json) of a conform --launcher external job.")
    merge.add_argument("partials", nargs="+", metavar="PARTIAL")
    add_json_option(merge)
    merge.add_argument("--junit", metavar="PATH", help="write a JUnit XML report")


def run(args) -> int:
    from ..conformance import report_merge
    from ..conformance.output import print_summary

    result = report_merge.merge(report_merge.with_partials(args.partials))
    stream = sys.stderr if args.json == "-" else sys.stdout
    print_summary(result, stream)
    for line in result.by_host():
        print(f"  failures by host: {line}", file=stream)
    report_merge.write_outputs(result, args.json, args.junit)
    return result.report().exit_code
