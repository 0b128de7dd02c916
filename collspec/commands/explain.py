"""Hop-by-hop state of an algorithm: every transfer, every addition written
out, and the contributor set of every cell."""

from . import NotBuilt


def configure(parser):
    parser.add_argument("algorithm", metavar="A", help="a built-in algorithm, e.g. ring-seed")
    parser.add_argument("--ranks", "-n", type=int, default=4, metavar="N")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--example", choices=["seed", "random"], default="seed",
                        help="seed: the worked example's four gradients; random: random small integers")
    parser.add_argument("--format", choices=["text", "markdown", "json"], default="text")


def run(args):
    raise NotBuilt("explain", 3, "models")
