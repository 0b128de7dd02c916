"""Per-rank and per-link traffic, step count, alpha-beta time and the
lower bound of an algorithm."""

from . import NotBuilt, add_json_option


def configure(parser):
    parser.add_argument("--algorithm", "-a", required=True, metavar="A")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--ranks", "-n", required=True, metavar="N[,N...]")
    parser.add_argument("--bytes", "-b", default="1", metavar="SIZE", help="vector size: 1, 4K, 60G, ...")
    add_json_option(parser)


def run(args):
    raise NotBuilt("cost", 3, "models")
