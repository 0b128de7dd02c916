"""Algorithm and bus bandwidth of a backend over a range of sizes, with the
nccl-tests formulas."""

from __future__ import annotations

import sys

from . import add_json_option


def configure(parser):
    parser.add_argument("--backend", required=True, metavar="B")
    parser.add_argument("--world-size", type=int, default=4, metavar="N")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--sizes", default="1K:64M", metavar="MIN:MAX", help="bytes, doubling (K, M, G = powers of 1024)")
    parser.add_argument("--plot", metavar="PNG")
    add_json_option(parser)
    parser.add_argument("--dtype", default="float32", metavar="T")
    parser.add_argument("--op", default="sum", metavar="OP")
    parser.add_argument("--iters", type=int, default=20, metavar="K", help="timed calls per size")
    parser.add_argument("--warmup", type=int, default=5, metavar="K", help="untimed calls first")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S", help="seconds per size before it is a hang")
    parser.add_argument("--launcher", choices=["local", "mpiexec", "torchrun", "external"],
                        help="external: this process is one rank of a job srun, mpirun or torchrun started (see conform)")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="as for collspec conform")


def run(args) -> int:
    from ..report import Report, write_json
    from ..spec import DTYPES, OPS
    from ..spec.collectives import collective_name
    from ..spec.errors import CollspecError
    from ..conformance import bench

    collective = collective_name(args.collective)
    if args.dtype not in DTYPES or args.op not in OPS:
        raise CollspecError(f"--dtype {args.dtype} --op {args.op}: use a dtype of {', '.join(DTYPES)} and an op of {', '.join(OPS)}")
    stream = sys.stderr if args.json == "-" else sys.stdout
    sizes = bench.byte_sizes(args.sizes)
    print(f"collspec bench {args.backend}: {collective} {args.dtype} {args.op}, {args.world_size} ranks, "
          f"{len(sizes)} sizes, {args.warmup} warm-up + {args.iters} timed calls each", file=stream, flush=True)
    if args.launcher == "external":
        from ..conformance import cluster_env

        place = cluster_env.placement()
        args.world_size = place.world
        rows, result = bench.measure_external(args.backend, collective, args.dtype, args.op, sizes, args.iters,
                                              args.warmup, args.timeout, args.device, place)
        if place.rank != 0:
            return 0 if rows and len(rows) == len(sizes) else 1
    else:
        rows, result = bench.measure(args.backend, args.world_size, collective, args.dtype, args.op, sizes,
                                     args.iters, args.warmup, args.timeout, args.launcher, args.device)
    print(bench.table(rows, collective, args.dtype, args.op), file=stream)
    violations = [v for o in result.outcomes for v in o.violations]
    for violation in violations:
        print(f"  {violation}", file=stream)
    if args.plot and rows:
        bench.plot(rows, args.plot, f"{args.backend} {collective} {args.dtype}, {args.world_size} ranks")
        print(f"plot: {args.plot}", file=stream)
    report = Report("bench", args.backend, violations,
                    {"collective": collective, "dtype": args.dtype, "op": args.op, "world_size": args.world_size,
                     "iters": args.iters, "warmup": args.warmup, "rows": [r.to_json() for r in rows],
                     "seconds": round(result.seconds, 2)})
    if args.json:
        write_json(report.to_json(), args.json)
    from .conform import _ended_by

    return _ended_by(result.interrupted, "bench") or (0 if rows and len(rows) == len(sizes) and report.ok else 1)
