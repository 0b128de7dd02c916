"""Per-rank and per-link traffic, step count, alpha-beta time and the lower
bound of an algorithm, read off its schedule."""

from __future__ import annotations

from ..spec.errors import CollspecError
from . import add_json_option


def configure(parser):
    parser.add_argument("--algorithm", "-a", required=True, metavar="A", help="a built-in algorithm, or several: ring,direct")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--ranks", "-n", required=True, metavar="N[,N...]")
    parser.add_argument("--bytes", "-b", default="1", metavar="SIZE", help="vector size P: 1 (units of P), 4K, 60GB, ...")
    parser.add_argument("--alpha", type=float, default=None, metavar="S", help="seconds of latency per step (default 5e-6)")
    parser.add_argument("--bandwidth", default=None, metavar="B/s", help="bytes per second each rank sends and receives (default 25GB)")
    parser.add_argument("--dedicated-hub", action="store_true", help="hub only: N workers plus one extra rank as the hub, as a parameter server")
    add_json_option(parser)


def run(args) -> int:
    from ..models.cost import DEFAULT_ALPHA, DEFAULT_BANDWIDTH, cost
    from ..models.generators import generate
    from ..report import Report, write_json
    from ..units import format_seconds, format_size, parse_size
    from .check import parse_ranks

    nbytes = parse_size(args.bytes)
    alpha = DEFAULT_ALPHA if args.alpha is None else args.alpha
    bandwidth = DEFAULT_BANDWIDTH if args.bandwidth is None else parse_size(args.bandwidth)
    if alpha < 0 or bandwidth <= 0:
        raise CollspecError("--alpha must be >= 0 and --bandwidth > 0")
    algorithms = [a.strip() for a in args.algorithm.split(",") if a.strip()]
    if args.dedicated_hub and algorithms != ["hub"]:
        raise CollspecError("--dedicated-hub applies to --algorithm hub only")
    rows = []
    for algorithm in algorithms:
        for n in parse_ranks(args.ranks):
            if args.dedicated_hub:
                schedule = generate("hub", args.collective, n + 1, root=n)
                label = f"hub (dedicated, {n} workers)"
            else:
                schedule = generate(algorithm, args.collective, n)
                label = algorithm
            rows.append((label, n, cost(schedule, nbytes, alpha=alpha, bandwidth=bandwidth, algorithm=label)))
    unit = nbytes if nbytes > 1 else 1

    def size(x: float) -> str:
        in_p = f"{x / unit:.4g}P"
        return in_p if nbytes == 1 else f"{in_p} = {format_size(x)}"

    def rounded(x: float) -> str:
        whole = -(-round(x / unit, 9) // 1)
        return f"{whole:g}P" if nbytes == 1 else f"{whole:g}P = {format_size(whole * nbytes)}"

    header = ["algorithm", "N", "steps", "sent per rank", "whole P (up)", "busiest rank in+out", "busiest link", "alpha-beta time", "lower bound"]
    table = [
        [label, str(n), str(c.steps), size(c.sent), rounded(c.sent), size(c.busiest_rank_in_out), size(c.busiest_link), format_seconds(c.seconds), f"{size(c.lower_bound_bytes)}, {format_seconds(c.lower_bound_seconds)}"]
        for label, n, c in rows
    ]
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in table:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
    print(f"P = {format_size(nbytes) if nbytes > 1 else '1 unit'}; alpha = {alpha:g} s per step; bandwidth = {format_size(bandwidth)}/s per rank, each way")
    print("whole P (up): sent per rank rounded up to a whole number of vectors, the figure usually quoted (a ring all-reduce sends 2(N-1)/N P: about 2P)")
    if args.json:
        report = Report("cost", args.algorithm, [], {"rows": [c.to_json() for _, _, c in rows], "alpha": alpha, "bandwidth": bandwidth})
        write_json(report.to_json(), args.json)
    return 0
