"""Check a schedule: a file (.json schedule or MSCCL .xml program) or a
built-in algorithm. Reports wrong-column adds, chunks crossing a link twice in
a phase, overloaded links, races, missing or duplicated contributions, the
collective's postcondition, and (as warnings) ranks that may disagree in
floating point and bandwidth optimality. An MSCCL .xml program is checked
under the executors' concurrent semantics: also unmatched sends and
receives, deadlocks, races between thread blocks, and lint warnings about
format drift between executors. An MSCCL++ execution plan (a .json file
whose top level holds a "gpus" list of thread blocks) is recognised by its
content and checked under the MSCCL++ executor's concurrent semantics:
races, deadlocks, unmatched signals and the result.

Several files, folders (searched for *.json and *.xml) and globs are checked
in one run, one summary line per file, --jobs N at a time; the exit status
is the worst over the files (3 > 2 > 1 > 0). --junit and --sarif write the
reports CI systems display (docs/ci.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ..limits import add_options as add_limit_options
from ..spec.errors import CollspecError
from . import add_json_option, batch, emit


def configure(parser):
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="schedule files (.json schedules, MSCCL++ .json plans, MSCCL .xml), folders (every *.json and *.xml below) or globs")
    parser.add_argument("--algorithm", "-a", metavar="A", help="a built-in algorithm (ring, ring-seed, direct, ...)")
    parser.add_argument("--collective", "-c", metavar="C", help="allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall")
    parser.add_argument("--ranks", "-n", metavar="N", help="rank count(s): 4, or 2,4,8, or 2:64")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"an option of the built-in algorithm, repeatable: {', '.join(f'{k} ({v[1]})' for k, v in OPTIONS.items())}",
    )
    parser.add_argument("--link-capacity", type=int, metavar="K", help="chunks one directed link carries per step (default: the schedule's, 1 for JSON files)")
    parser.add_argument("--slots", type=int, metavar="S",
                        help="bounded buffer slots per connection (NCCL_STEPS is 8): report the deadlock when a message does not fit; "
                             "built-in algorithms, JSON schedules and MSCCL XML")
    parser.add_argument("--slot-size", type=int, default=None, metavar="K",
                        help="cells (MSCCL: chunks) one slot holds, with --slots (default: NCCL's slot for the nccl-* "
                             "algorithms, 512 KiB of data with the Simple protocol, in elements of the dtype; 1 otherwise)")
    parser.add_argument("--exact", dest="exact", action="store_true", default=None, help="always track contributions as exact multisets")
    parser.add_argument("--fingerprint", dest="exact", action="store_false", help="always track contributions by fingerprint (failures are still re-checked exactly)")
    parser.add_argument("--prove", action="store_true", help="also prove with Z3 that the outputs are right for all inputs (at the schedule's N)")
    add_limit_options(parser)
    add_json_option(parser)
    batch.add_options(parser)


#: options a built-in algorithm may take: name -> (lowest value given N, what it is)
OPTIONS = {
    "group_size": (lambda n: 1, "hierarchical-ring: ranks per group, a divisor of N"),
    "root": (lambda n: 0, "broadcast, reduce, hub: the root rank, 0..N-1"),
    "chunks": (lambda n: 1, "ring broadcast and reduce: chunks of the pipelined chain"),
    "channels": (lambda n: 1, "nccl-*: channels the vector is split over (1..64)"),
    "chunk": (lambda n: 1, "nccl-*: elements per chunk (nccl-ring, nccl-tree: default NCCL's for the protocol and dtype; nccl-pat: NCCL's for the bytes)"),
    "align": (lambda n: 1, "nccl-ring: elements a last-loop chunk is rounded to (default 16 / element size)"),
    "dtype": (None, "nccl-*: the element type, a spec dtype name (float32, float16, bfloat16, int8, ...; default float32)"),
    "protocol": (None, "nccl-ring, nccl-tree: NCCL's protocol, simple, ll or ll128 (default simple)"),
    "count": (lambda n: 0, "nccl-*: elements (per rank for reduce_scatter and allgather)"),
    "aggregation": (lambda n: 1, "nccl-pat: NCCL's aggFactor, a power of two up to N/2 (default NCCL's: min(8 postFreq, the most))"),
    "post": (lambda n: 1, "nccl-pat: blocks per message, NCCL's postFreq (default NCCL's, from chunk and count)"),
    "parts": (None, "nccl-ring, nccl-tree: elements per channel, by commas (3,2), in place of NCCL's split of a collective alone in its plan"),
    "rings": (None, "nccl-ring: ring orders, one per channel, ranks by commas, rings by '/' (0,1,2,3/0,2,1,3)"),
}


def parse_rings(text: str) -> list[list[int]]:
    """``'0,1,2,3/3,2,1,0'`` -> ``[[0, 1, 2, 3], [3, 2, 1, 0]]`` (whether each
    is a permutation of the ranks is the generator's check)."""
    try:
        return [[int(v) for v in ring.split(",")] for ring in text.split("/")]
    except ValueError:
        raise CollspecError(f"--option rings={text!r}: write ring orders as ranks separated by commas, rings separated by '/'") from None


def parse_options(texts: list[str], algorithm: str | None, collective: str, ranks: list[int]) -> dict[str, int]:
    """``['group_size=512']`` -> ``{'group_size': 512}``, checked against the
    algorithm's generator and every rank count (bad input: CollspecError)."""
    import inspect

    from ..models.generators import ALGORITHMS
    from ..spec.collectives import collective_name

    options: dict = {}
    for text in texts:
        name, sep, value = text.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in OPTIONS:
            raise CollspecError(f"--option {text!r}: write NAME=VALUE with NAME one of {', '.join(OPTIONS)}")
        if name == "rings":
            options[name] = parse_rings(value)
            continue
        if name == "parts":
            try:
                options[name] = [int(v) for v in value.split(",")]
            except ValueError:
                raise CollspecError(f"--option {text!r}: write parts as element counts separated by commas") from None
            continue
        if name in ("dtype", "protocol"):  # names; the generator checks them
            options[name] = value.strip().lower() if name == "protocol" else value.strip()
            continue
        try:
            number = int(value)
        except ValueError:
            raise CollspecError(f"--option {text!r}: {name} must be an integer") from None
        for n in ranks:
            low, high = OPTIONS[name][0](n), n - 1 if name == "root" else None
            if number < low or (high is not None and number > high):
                bounds = f"{low}..{high}" if high is not None else f"at least {low}"
                raise CollspecError(f"--option {text!r}: {name} must be {bounds} for {n} ranks")
        options[name] = number
    if not options:
        return options
    generator = ALGORITHMS.get(algorithm, {}).get(collective_name(collective))
    if generator is not None:  # unknown algorithms are reported by generate()
        takes = [p for p in inspect.signature(generator).parameters if p in OPTIONS]
        for name in options:
            if name not in takes:
                raise CollspecError(f"--option {name}: {algorithm} {collective_name(collective)} takes {'only ' + ', '.join(takes) if takes else 'no options'}")
    return options


def parse_ranks(text: str) -> list[int]:
    """'4' -> [4]; '2,4,8' -> [2, 4, 8]; '2:6' -> [2, 3, 4, 5, 6]."""
    values: list[int] = []
    try:
        for part in str(text).split(","):
            low, sep, high = part.partition(":")
            values.extend(range(int(low), int(high) + 1) if sep else [int(low)])
    except ValueError:
        raise CollspecError(f"--ranks {text!r}: write a count (4), a list (2,4,8) or a range (2:64)") from None
    if not values or min(values) < 1:
        raise CollspecError(f"--ranks {text!r}: rank counts start at 1")
    return values


def subjects(args) -> list:
    """The built-in algorithm's schedules the arguments name, one per N."""
    from ..models.generators import generate

    if not args.algorithm:
        raise CollspecError("give a schedule FILE, or --algorithm A --collective C --ranks N")
    if not args.ranks:
        raise CollspecError("--algorithm needs --ranks N")
    collective = args.collective or "allreduce"
    ranks = parse_ranks(args.ranks)
    options = parse_options(args.option, args.algorithm, collective, ranks)
    return [generate(args.algorithm, collective, n, **options) for n in ranks]


def load_schedule(path: str):
    """Load a .json schedule, an MSCCL++ .json plan or an MSCCL .xml program
    as a schedule of the one IR (read once, format by content:
    :mod:`collspec.inputs`)."""
    from ..inputs import read_input

    return read_input(path).schedule()


#: the name reports give each input kind of :mod:`collspec.inputs`
FORMATS = {"xml": "msccl", "plan": "mscclpp", "schedule": "schedule"}


def run(args) -> int:
    if args.files and args.algorithm:
        raise CollspecError("give FILEs or --algorithm, not both")
    if not args.files:
        if args.junit or args.sarif:
            raise CollspecError("--junit and --sarif report on FILEs; use --json for a built-in algorithm")
        return _check_builtin(args)
    if args.option:
        raise CollspecError("--option is for --algorithm, not a FILE")
    options = FileOptions(args.link_capacity, args.exact, _slots(args), 1 if args.slot_size is None else args.slot_size, args.prove, locate=bool(args.sarif))
    paths = batch.expand(args.files)
    if len(paths) == 1:
        args.file = paths[0]  # names the file in a malformed report written by the command line
    results = batch.run_files(check_file, paths, options, args.jobs)
    return batch.emit("check", results, args, single=lambda result: _print_one(result, args))


def _print_one(result: batch.FileResult, args) -> None:
    """One file: the violations and summary as always, or the one-line error."""
    import sys

    if result.status >= 2:
        print(f"collspec check: {'internal error' if result.status == 3 else 'error'}: {result.error}", file=sys.stderr)
    if result.status != 3:
        _print_proof(result.report.stats, args)
        emit(result.report, args, quiet=result.status == 2)


@dataclass(frozen=True)
class FileOptions:
    """What ``check`` does to each file (the command line's options).
    ``locate``: also find each violation's line and column (for SARIF)."""

    link_capacity: int | None = None
    exact: bool | None = None
    slots: int | None = None
    slot_size: int = 1
    prove: bool = False
    locate: bool = False


def check_file(path: str, options: FileOptions = FileOptions()) -> batch.FileResult:
    """Check one file: its report and exit status. Never raises: a
    malformed file is status 2, a failure of collspec itself status 3."""
    return batch.guarded(path, "check", lambda: _check_file(path, options), options.locate)


def _check_file(path: str, options: FileOptions) -> batch.FileResult:
    from ..report import Report

    from ..inputs import read_input

    source = read_input(path)
    kind = FORMATS[source.kind]
    if kind == "msccl":
        from ..models.msccl import verify

        subject = source.program()
        result = verify(subject, exact=options.exact, slots=options.slots, slot_size=options.slot_size)
    elif kind == "mscclpp":
        if options.slots is not None:
            raise CollspecError("--slots: MSCCL++ plans are not modelled with bounded slots; use a built-in algorithm, a JSON schedule or MSCCL XML")
        from ..models.mscclpp import verify

        subject = source.program()
        result = verify(subject, exact=options.exact)
    else:
        from ..models.checker import check

        subject = source.schedule()
        result = check(subject, link_capacity=options.link_capacity, exact=options.exact, slots=options.slots, slot_size=options.slot_size)
    if options.prove:
        _prove(subject if kind == "schedule" else source.schedule(), result)
    report = Report("check", path, result.violations, result.stats)
    located = []
    if options.locate and report.violations:
        from ..locate import locate

        located = locate(path, kind, subject, report.violations)
    return batch.FileResult(path, report, report.exit_code, format=kind, locations=located)


def _check_builtin(args) -> int:
    """``--algorithm``: the checker on a built-in algorithm at each N."""
    from ..models.checker import check
    from ..report import Report

    slots = _slots(args)
    schedules = subjects(args)
    slot_size = builtin_slot_size(args)
    violations, per_schedule = [], []
    for schedule in schedules:
        result = check(schedule, link_capacity=args.link_capacity, exact=args.exact, slots=slots, slot_size=slot_size)
        if args.prove:
            _prove(schedule, result)
            _print_proof(result.stats, args)
        if len(schedules) > 1:
            violations += [_tag(v, schedule.ranks) for v in result.violations]
            per_schedule.append({"ranks": schedule.ranks, "ok": result.ok, **result.stats})
            marks = ", ".join(sorted({v.kind for v in result.violations})) or "no findings"
            print(f"  {schedule.label()}: {'ok' if result.ok else 'FAILED'} ({marks})")
        else:
            violations = result.violations
            per_schedule.append(result.stats)
    subject = f"{args.algorithm} {schedules[0].collective} ranks={args.ranks}"
    stats = per_schedule[0] if len(per_schedule) == 1 else {"schedules": per_schedule}
    return emit(Report("check", subject, violations, stats), args)


def builtin_slot_size(args) -> int:
    """``--slot-size``, or when not given the cells of one NCCL connection
    slot for the nccl-* algorithms (their cells are elements of the
    ``dtype`` option; :func:`..models.generators.nccl_host.slot_elements`
    with the ``protocol`` option, Simple for PAT), 1 for the others."""
    if args.slot_size is not None:
        return args.slot_size
    if not (args.algorithm or "").startswith("nccl-"):
        return 1
    from ..models.generators import nccl_host

    options = parse_options(args.option, args.algorithm, args.collective or "allreduce", parse_ranks(args.ranks))
    itemsize = nccl_host.element_size(options.get("dtype") or nccl_host.DEFAULT_DTYPE)
    return nccl_host.slot_elements(options.get("protocol") or nccl_host.DEFAULT_PROTOCOL, itemsize)


def _slots(args) -> int | None:
    """``--slots`` and ``--slot-size`` checked (bad input: CollspecError naming the option)."""
    slots = getattr(args, "slots", None)
    size = getattr(args, "slot_size", None)
    size = 1 if size is None else size
    if slots is not None and slots < 1:
        raise CollspecError(f"--slots {slots}: a connection holds at least 1 slot (NCCL_STEPS is 8)")
    if size < 1:
        raise CollspecError(f"--slot-size {size}: a slot holds at least 1 cell")
    return slots


def _prove(schedule, result) -> None:
    """``--prove``: add the bounded proof's outcome to a check result (or an
    MSCCL verdict: anything with ``violations`` and ``stats``): a violation
    when it is not proved, and ``bounded_proof`` (the status) and
    ``bounded_proof_message`` (the line :func:`_print_proof` prints) in its stats."""
    from ..limits import admit_proof
    from ..proofs.schedules import prove_schedule, violations

    admit_proof(schedule, schedule.label())
    outcome = prove_schedule(schedule)
    result.violations.extend(violations(schedule, outcome))
    result.stats["bounded_proof"] = outcome.status
    ranks = f"{schedule.ranks} rank" + ("" if schedule.ranks == 1 else "s")
    if outcome.status == "proved":
        line = f"prove: proved: every output cell is right for all input values ({schedule.label()}, {ranks})"
    else:
        line = f"prove: {outcome.status}: {' '.join(str(outcome.message).split())}"
    result.stats["bounded_proof_message"] = line


def _print_proof(stats: dict, args) -> None:
    """The ``--prove`` line of a result, if it has one (on stderr when the
    JSON report goes to stdout)."""
    import sys

    if "bounded_proof_message" in stats:
        print(stats["bounded_proof_message"], file=sys.stderr if getattr(args, "json", None) == "-" else sys.stdout)


def _tag(violation, ranks: int):
    from dataclasses import replace

    return replace(violation, details={**violation.details, "ranks_total": ranks}, message=f"N={ranks}: {violation.message}")
