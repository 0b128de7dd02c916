"""Hop-by-hop state of an algorithm: every transfer, every addition written
out, the contributor set of every cell, each chunk's route, and the final
division for avg. `collspec explain ring-seed --ranks 4` retraces the worked
example of the reference texts."""

from __future__ import annotations


def configure(parser):
    parser.add_argument("algorithm", metavar="A", help="a built-in algorithm, e.g. ring-seed")
    parser.add_argument("--ranks", "-n", type=int, default=4, metavar="N")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--example", choices=["seed", "random"], default="seed",
                        help="seed: the worked example's four gradients (4 ranks); random: random small integers")
    parser.add_argument("--op", choices=["avg", "sum"], default="avg", help="avg divides by N at the end, as gradient averaging does")
    parser.add_argument("--format", choices=["text", "markdown", "json"], default="text")


def run(args) -> int:
    import json

    from ..models.explain import explain, render, to_json
    from ..models.generators import generate

    explanation = explain(generate(args.algorithm, args.collective, args.ranks), args.example, args.op)
    if args.format == "json":
        print(json.dumps(to_json(explanation), indent=1))
    else:
        print(render(explanation, markdown=args.format == "markdown"), end="")
    return 0
