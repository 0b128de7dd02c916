"""Algorithm and bus bandwidth of a backend over a range of sizes, with the
nccl-tests formulas."""

from . import NotBuilt, add_json_option


def configure(parser):
    parser.add_argument("--backend", required=True, metavar="B")
    parser.add_argument("--world-size", type=int, default=4, metavar="N")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--sizes", default="1K:64M", metavar="MIN:MAX")
    parser.add_argument("--plot", metavar="PNG")
    add_json_option(parser)


def run(args):
    raise NotBuilt("bench", 7, "conformance")
