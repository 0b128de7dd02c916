"""Write a built-in algorithm as an MSCCL XML program (--format msccl, the
default: in place, one channel; see collspec.models.msccl.export) or as an
MSCCL++ execution plan (--format mscclpp: LL packets, in place; see
collspec.models.mscclpp.export). Check the result with
'collspec check FILE'."""

from __future__ import annotations

import sys


def configure(parser):
    parser.add_argument("--algorithm", "-a", required=True, metavar="A")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--ranks", "-n", type=int, required=True, metavar="N")
    parser.add_argument("--format", choices=["msccl", "msccl-xml", "mscclpp"], default="msccl", help="msccl (MSCCL XML, the default; msccl-xml is the same) or mscclpp (an MSCCL++ execution plan, JSON)")
    parser.add_argument("--name", metavar="NAME", help="the <algo name=...> or plan name to write (default: the schedule's)")
    parser.add_argument("--proto", choices=["Simple", "LL", "LL128"], default="Simple", help="the protocol to declare (default Simple)")
    parser.add_argument("--output", "-o", metavar="PATH", help="write here instead of stdout")


def run(args) -> int:
    from ..models.generators import generate
    from ..models.msccl import to_xml
    from ..report import write_text

    schedule = generate(args.algorithm, args.collective, args.ranks)
    if args.format == "mscclpp":
        from ..models.mscclpp.export import to_plan

        text = to_plan(schedule, name=args.name)
    else:
        text = to_xml(schedule, name=args.name, proto=args.proto)
    write_text(text, args.output or "-")
    if args.output and args.output != "-":
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
