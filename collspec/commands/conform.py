"""Check a real implementation of the collectives against the spec, on
every rank, for many dtypes, ops and sizes."""

from __future__ import annotations

import shlex
import sys

from . import add_json_option, emit


def configure(parser):
    parser.add_argument("--backend", required=True, metavar="B",
                        help="reference, ring, shm, gloo, openmpi (alias mpi), mpich, intelmpi, nccl, PATH.py:NAME or module:NAME")
    parser.add_argument("--algorithm", metavar="NAME[,NAME...]|all",
                        help="MPI backends: force the library's own algorithms (its names; see --list-algorithms)")
    parser.add_argument("--expect", metavar="bits:ALGO",
                        help="also compare every rank's result bit for bit with the model of ALGO (bits:nccl-ring: NCCL's ring "
                             "addition order; for nccl with NCCL_ALGO=Ring NCCL_PROTO=Simple and one channel, or impl's nccl-ring)")
    parser.add_argument("--list-algorithms", action="store_true",
                        help="MPI backends: print the library's algorithms per collective and exit")
    parser.add_argument("--world-size", type=int, metavar="N", help="ranks (default 4; under --launcher external: the launcher's)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a representative subset (about a minute)")
    mode.add_argument("--full", action="store_true", help="every case, sizes up to 2**24")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds per case before it is a hang")
    parser.add_argument("--repeat", type=int, default=1, metavar="K", help="run every case K times with fresh seeds")
    parser.add_argument("--junit", metavar="PATH", help="write a JUnit XML report")
    add_json_option(parser)
    parser.add_argument("--seed", type=int, default=0, help="the first seed (repeats use the next ones)")
    parser.add_argument("--collective", "-c", metavar="C[,C...]", help="only these collectives")
    parser.add_argument("--dtype", metavar="T[,T...]", help="only these dtypes")
    parser.add_argument("--op", metavar="OP[,OP...]", help="only these ops")
    parser.add_argument("--sizes", metavar="N[,N...]", help="element counts instead of the standard ones (4K = 4096)")
    parser.add_argument("--launcher", choices=["local", "mpiexec", "torchrun", "external"],
                        help="how ranks start (default: local; mpiexec for --backend mpi; external when started by srun, "
                             "mpirun or torchrun: this process is one rank of that job)")
    parser.add_argument("--launcher-args", default="", metavar="ARGS", help="extra options for mpiexec or torchrun")
    parser.add_argument("--strict", action="store_true", help="treat known findings of built-in backends as failures")
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        help="cpu: gloo process group, CPU tensors; cuda: nccl, one GPU per rank (default: cpu, cuda for nccl)")
    from . import conform_job

    conform_job.configure(parser)


def _split(text):
    return [item.strip() for item in text.split(",") if item.strip()] if text else None


def conform_from_args(args, on_start=lambda total: None, on_outcome=lambda outcome: None):
    """Run conformance with the options of this command (also used by the pytest plugin)."""
    from ..conformance.cases import parse_counts
    from ..conformance.conform import conform

    mode = "quick" if args.quick else "full" if args.full else "default"
    return conform(
        args.backend, (4 if args.world_size is None else args.world_size), mode, args.timeout, args.repeat, args.seed, args.launcher,
        shlex.split(args.launcher_args), _split(args.collective), _split(args.dtype), _split(args.op),
        parse_counts(args.sizes), args.strict, args.device, algorithms=_split(args.algorithm), expect=getattr(args, "expect", None),
        on_start=on_start, on_outcome=on_outcome,
    )


def list_algorithms(args) -> int:
    """``--list-algorithms``: the library's algorithm names per collective (``auto``: its own choice)."""
    from ..conformance import mpi_libs
    from ..conformance.collectives import COLLECTIVES
    from ..conformance.resolve import parse
    from ..spec.errors import CollspecError

    spec = parse(args.backend)
    if spec.library is None:
        raise CollspecError(f"--list-algorithms: {spec.text} has no algorithms; use one of {', '.join(mpi_libs.LIBRARIES)}")
    collectives = _split(args.collective) or list(COLLECTIVES)
    for name in collectives:
        if name not in COLLECTIVES:
            raise CollspecError(f"unknown collective {name!r}; use one of {', '.join(COLLECTIVES)}")
    print(f"{mpi_libs.version(spec.library)}: per collective, its MPI functions and their algorithms "
          f"(auto: the library's own choice; FUNCTION:NAME where a collective runs two functions)")
    for name in collectives:
        print(f"{name} (MPI_{', MPI_'.join(f.capitalize() for f in mpi_libs.FUNCTIONS[name])}): "
              f"{', '.join(mpi_libs.algorithms(spec.library, name))}")
    return 0


def run(args) -> int:
    from ..conformance.junit import write
    from ..conformance.output import Progress, print_summary

    from . import conform_job

    if args.list_algorithms:
        return list_algorithms(args)
    if conform_job.external(args):
        return conform_job.run(args)
    stream = sys.stderr if args.json == "-" else sys.stdout
    progress = Progress(stream)

    def started(total: int) -> None:
        mode = "quick" if args.quick else "full" if args.full else "default"
        ranks = 4 if args.world_size is None else args.world_size
        print(f"collspec conform {args.backend}: {total} cases on {ranks} rank{'s' * (ranks != 1)} ({mode})", file=stream, flush=True)
        progress.start(total)

    result = conform_from_args(args, started, progress)
    progress.close()
    print_summary(result, stream)
    if args.junit:
        write(result, args.junit)
    code = emit(result.report(), args, quiet=True)
    return _ended_by(result.result.interrupted, "conform") or code


def _ended_by(name, command: str) -> int:
    """128 + the signal that ended the run (as a shell reports it), after saying so; 0 if none did."""
    if not name:
        return 0
    import signal

    print(f"collspec {command}: ended by {name}; the report holds the cases finished before it", file=sys.stderr)
    return 128 + signal.Signals[name]
