"""Write a built-in algorithm as an MSCCL XML program."""

from . import NotBuilt


def configure(parser):
    parser.add_argument("--algorithm", "-a", required=True, metavar="A")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--ranks", "-n", type=int, required=True, metavar="N")
    parser.add_argument("--format", choices=["msccl-xml"], default="msccl-xml")
    parser.add_argument("--output", "-o", metavar="PATH", help="write here instead of stdout")


def run(args):
    raise NotBuilt("export", 5, "MSCCL")
