"""Write a built-in algorithm as an MSCCL XML program (in place, one
channel; see collspec.models.msccl.export). Check the result with
'collspec check FILE.xml'."""

from __future__ import annotations

import sys


def configure(parser):
    parser.add_argument("--algorithm", "-a", required=True, metavar="A")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--ranks", "-n", type=int, required=True, metavar="N")
    parser.add_argument("--format", choices=["msccl-xml"], default="msccl-xml")
    parser.add_argument("--name", metavar="NAME", help="the <algo name=...> to write (default: the schedule's)")
    parser.add_argument("--proto", choices=["Simple", "LL", "LL128"], default="Simple", help="the protocol to declare (default Simple)")
    parser.add_argument("--output", "-o", metavar="PATH", help="write here instead of stdout")


def run(args) -> int:
    from ..models.generators import generate
    from ..models.msccl import to_xml
    from ..report import write_text

    text = to_xml(generate(args.algorithm, args.collective, args.ranks), name=args.name, proto=args.proto)
    write_text(text, args.output or "-")
    if args.output and args.output != "-":
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
