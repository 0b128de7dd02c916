"""Check a real implementation of the collectives against the spec, on
every rank, for many dtypes, ops and sizes."""

from . import NotBuilt, add_json_option


def configure(parser):
    parser.add_argument("--backend", required=True, metavar="B",
                        help="reference, ring, shm, gloo, mpi, nccl, PATH.py:NAME or module:NAME")
    parser.add_argument("--world-size", type=int, default=4, metavar="N")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a representative subset (about a minute)")
    mode.add_argument("--full", action="store_true", help="every case, sizes up to 2**24")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds per case before it is a hang")
    parser.add_argument("--repeat", type=int, default=1, metavar="K", help="run every case K times with fresh seeds")
    parser.add_argument("--junit", metavar="PATH", help="write a JUnit XML report")
    add_json_option(parser)


def run(args):
    raise NotBuilt("conform", 7, "conformance")
