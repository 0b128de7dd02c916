"""Check a schedule: a file (.json schedule or MSCCL .xml program) or a
built-in algorithm. Reports wrong-column adds, chunks crossing a link twice in
a phase, overloaded links, missing or duplicated contributions, the
collective's postcondition and bandwidth optimality."""

from . import NotBuilt, add_json_option


def configure(parser):
    parser.add_argument("file", nargs="?", metavar="FILE", help="schedule file: .json or MSCCL .xml")
    parser.add_argument("--algorithm", "-a", metavar="A", help="a built-in algorithm (ring, ring-seed, direct, ...)")
    parser.add_argument("--collective", "-c", metavar="C", help="allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall")
    parser.add_argument("--ranks", "-n", metavar="N", help="rank count(s): 4 or 2,4,8 or 2:64")
    add_json_option(parser)


def run(args):
    raise NotBuilt("check", 3, "models")
