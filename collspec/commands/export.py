"""Write a built-in algorithm as an MSCCL XML program (--format msccl, the
default: in place, one channel; see collspec.models.msccl.export), as an
MSCCL++ execution plan (--format mscclpp: LL packets, in place; see
collspec.models.mscclpp.export), or as collspec's own schedule file
(--format json, shared contracts: nccl-* models add "channels", one entry per
channel NCCL uses with its ring or tree and element count). --option
NAME=VALUE sets the algorithm's options as for 'collspec check'. Check the
result with 'collspec check FILE'."""

from __future__ import annotations

import sys


def configure(parser):
    parser.add_argument("--algorithm", "-a", required=True, metavar="A")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--ranks", "-n", type=int, required=True, metavar="N")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the built-in algorithm, repeatable, as for 'collspec check' (nccl-ring: dtype, protocol, channels, count, rings, ...)")
    parser.add_argument("--format", choices=["msccl", "msccl-xml", "mscclpp", "json"], default="msccl",
                        help="msccl (MSCCL XML, the default; msccl-xml is the same), mscclpp (an MSCCL++ execution plan, JSON) "
                             "or json (collspec's schedule file)")
    parser.add_argument("--name", metavar="NAME", help="the <algo name=...>, plan or schedule name to write (default: the schedule's)")
    parser.add_argument("--proto", choices=["Simple", "LL", "LL128"], default="Simple", help="the protocol to declare (default Simple)")
    parser.add_argument("--output", "-o", metavar="PATH", help="write here instead of stdout")


def run(args) -> int:
    from ..models.generators import generate
    from ..report import write_text
    from .check import parse_options

    options = parse_options(args.option, args.algorithm, args.collective, [args.ranks])
    schedule = generate(args.algorithm, args.collective, args.ranks, **options)
    if args.format == "mscclpp":
        from ..models.mscclpp.export import to_plan

        text = to_plan(schedule, name=args.name)
    elif args.format == "json":
        import json

        from ..models.schedule_json import to_json

        data = to_json(schedule)
        if args.name:
            data["name"] = args.name
        text = json.dumps(data, indent=1) + "\n"
    else:
        from ..models.msccl import to_xml

        text = to_xml(schedule, name=args.name, proto=args.proto)
    write_text(text, args.output or "-")
    if args.output and args.output != "-":
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
