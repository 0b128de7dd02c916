"""Run the machine-checked proofs: one row per proof with its scope
(`all N>=2` or `N<=K`), result and seconds."""

from . import NotBuilt, add_json_option


def configure(parser):
    parser.add_argument("--only", metavar="NAME", help="run only the proofs whose name contains NAME")
    parser.add_argument("--list", action="store_true", help="list the proofs and exit")
    parser.add_argument("--schedule", metavar="FILE", help="bounded proof that a schedule file computes its collective")
    add_json_option(parser)


def run(args):
    raise NotBuilt("prove", 4, "proofs")
