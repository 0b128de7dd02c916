"""Conformance from options to a report: what ``collspec conform``, ``collspec
verify`` and the pytest plugin call.

>>> select(4, "quick", collectives=["broadcast"], dtypes=["int8"])[0].id
'broadcast/int8/n=5/inplace/root=3/origin/seed=0'
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable

from ..report import Report
from ..spec import ALL_OPS, DTYPES, Violation
from ..spec.errors import CollspecError
from . import cases as case_lists
from . import findings, matrix, mpi_libs, resolve, runner
from .collectives import COLLECTIVES
from .launch import LAUNCHERS

MODES = ("quick", "default", "full")
MAX_WORLD = 256
#: What becomes of a case (``finding``: a failure that is a known finding;
#: ``n/a``: unequal blocks for a class without the ``_v`` method, not applicable).
STATUSES = ("pass", "fail", "finding", "unsupported", "n/a", "hang", "crash", "not-run")
#: The key of each status among the report's ``stats``.
STAT_KEYS = {status: {"n/a": "not_applicable"}.get(status, status.replace("-", "_")) for status in STATUSES}


@dataclass
class Conformance:
    """The outcome of a run: every case, the capability matrix and the report."""

    backend: resolve.BackendSpec
    world_size: int
    mode: str
    outcomes: list[runner.Outcome]
    result: runner.Result
    settings: dict

    @property
    def violations(self) -> list[Violation]:
        found = [v for o in self.outcomes for v in o.violations]
        if not any(v.is_error for v in found) and not self.counts()["pass"] and not self.counts()["finding"]:
            # everything unsupported: that must not read as a pass
            found.append(Violation("unsupported", f"{self.backend.text}: no case passed ({self.summary()})",
                                   details={"ranks": []}))
        return found

    @property
    def capability(self) -> dict:
        return matrix.capability(self.outcomes)

    def counts(self) -> Counter:
        return Counter(o.status for o in self.outcomes if o.case is not None)

    def summary(self) -> str:
        counts = self.counts()
        return ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])

    @property
    def ok(self) -> bool:
        return self.report().ok

    def report(self) -> Report:
        counts = self.counts()
        stats = {
            "cases": sum(counts.values()),
            **{STAT_KEYS[status]: counts[status] for status in STATUSES},
            "seconds": round(self.result.seconds, 2),
            "restarts": self.result.restarts,
            "loopback_only": self.result.loopback_only,
            "world_size": self.world_size,
            **self.settings,
            **({"interrupted": self.result.interrupted} if self.result.interrupted else {}),
        }
        extra = {
            "backend": self.backend.target,
            "capability": self.capability,
            "cases": [{"case": o.case.id, "algorithm": o.case.algorithm, "status": o.status,
                       **({"reason": o.note} if o.note else {})}
                      for o in self.outcomes if o.case is not None],
        }
        return Report("conform", self.backend.text, self.violations, stats, extra)


def select(world: int, mode: str, repeat: int = 1, seed: int = 0, collectives=None, dtypes=None, ops=None, sizes=None):
    """The cases of a mode, filtered, each repeated with fresh seeds."""
    if mode not in MODES:
        raise CollspecError(f"mode {mode!r}: use one of {', '.join(MODES)}")
    if mode == "quick":
        chosen = case_lists.quick(world, collectives, dtypes, ops, sizes)
    else:
        chosen = case_lists.grid(world, mode == "full", collectives, dtypes, ops, sizes)
    if not chosen:
        raise CollspecError("no case matches the --collective, --dtype, --op and --sizes given")
    return case_lists.repeated(chosen, repeat, seed)


def conform(
    backend: str,
    world_size: int = 4,
    mode: str = "quick",
    timeout: float = 60.0,
    repeat: int = 1,
    seed: int = 0,
    launcher: str | None = None,
    launcher_args: list[str] | None = None,
    collectives=None,
    dtypes=None,
    ops=None,
    sizes=None,
    strict: bool = False,
    device: str | None = None,
    algorithms: list[str] | None = None,
    expect: str | None = None,
    on_start: Callable[[int], None] = lambda cases: None,
    on_outcome: Callable[[runner.Outcome], None] = lambda outcome: None,
) -> Conformance:
    """Run the conformance cases of ``mode`` against ``backend`` on ``world_size`` ranks.

    Bad options raise :class:`~collspec.spec.errors.CollspecError` before
    anything starts; ``on_start`` then gets the number of cases and
    ``on_outcome`` each case's outcome as it is judged.

    ``algorithms`` (MPI backends only) forces the library's algorithms by
    name, ``["all"]`` every one (:func:`.mpi_libs.select`); each (collective,
    algorithm) is a start of its own, so a crash or an ignored algorithm
    stays that algorithm's. Without it the MPI backends run ``auto``.

    ``expect="bits:ALGO"`` also compares every rank's result bit for bit
    with the bit-exact model of ALGO (:mod:`collspec.models.bits`).

    SIGINT, SIGTERM or SIGHUP ends the run cleanly (:func:`.runner.run`): the
    result holds the cases judged before it, the others ``not-run``, and
    ``result.result.interrupted`` names the signal.
    """
    spec = resolve.parse(backend, device)
    _check_options(spec, world_size, timeout, launcher, collectives, dtypes, ops)
    expect_bits = parse_expect(expect)
    if algorithms and spec.library is None:
        raise CollspecError(f"--algorithm: {spec.text} has no algorithms to force; use an MPI backend "
                            f"({', '.join(mpi_libs.LIBRARIES)})")
    if spec.library is not None and ops is None:
        ops = list(ALL_OPS)  # MPI has user ops: compose runs too
    chosen = select(world_size, mode, repeat, seed, collectives, dtypes, ops, sizes)
    groups = _groups(spec, chosen, algorithms, world_size)
    if expect_bits and spec.text == "nccl":
        groups = [({**variables, **NCCL_BITS_VARIABLES}, cases) for variables, cases in groups]
    on_start(sum(len(cases) for _, cases in groups))
    launcher = launcher or spec.launcher
    marked = marker(spec, strict)

    outcomes: list[runner.Outcome] = []
    results: list[runner.Result] = []
    offset = 0
    for variables, cases in groups:
        mine: list[runner.Outcome] = []

        def record(outcome: runner.Outcome, offset=offset, mine=mine) -> None:
            outcome = marked(_tagged(replace(outcome, index=outcome.index + offset), cases))
            mine.append(outcome)
            on_outcome(outcome)

        if results and results[-1].interrupted:  # a signal ended the run: the starts left do not run
            note = f"not run: the run was ended by {results[-1].interrupted}"
            outcomes += [marked(runner.Outcome(offset + i, case, "not-run", note=note)) for i, case in enumerate(cases)]
            offset += len(cases)
            continue
        settings = runner.Settings(spec, world_size, cases, timeout, launcher, list(launcher_args or []), variables=variables, expect_bits=expect_bits)
        results.append(runner.run(settings, record))
        outcomes += _ignored(spec, _init_aborted(spec, mine, results[-1].output), results[-1].output)
        offset += len(cases)
    outcomes = _reproducible(outcomes)
    outcomes.sort(key=lambda o: (o.index, o.case is not None))
    result = runner.Result(outcomes, sum(r.restarts for r in results), all(r.loopback_only for r in results),
                           sum(r.seconds for r in results), interrupted=next((r.interrupted for r in results if r.interrupted), None))
    settings = {"mode": mode, "launcher": launcher, "seed": seed, "repeat": repeat, "timeout": timeout}
    if expect_bits:
        settings["expect"] = f"bits:{expect_bits}"
    if spec.library is not None:
        settings.update(library=mpi_libs.version(spec.library), algorithms=algorithms or [mpi_libs.DEFAULT])
    return Conformance(spec, world_size, mode, outcomes, result, settings)


def marker(spec, strict: bool) -> Callable[[runner.Outcome], runner.Outcome]:
    """What every judged outcome goes through: known findings of built-in
    backends marked (a failure made only of them is a ``finding``), and every
    violation of a case naming its forced algorithm."""
    name = spec.library or (spec.text if spec.text in resolve.BUILTIN else spec.target)

    def marked(outcome: runner.Outcome) -> runner.Outcome:
        violations = findings.mark(name, outcome.violations, strict)
        algorithm = outcome.case.algorithm if outcome.case is not None else None
        if algorithm is not None:  # every violation of a case names its algorithm (the checks do not know it)
            violations = [v if "algorithm" in v.details else replace(v, details={**v.details, "algorithm": algorithm})
                          for v in violations]
        status = outcome.status
        if status == "fail" and not any(v.is_error for v in violations):
            status = "finding"
        return replace(outcome, violations=violations, status=status)

    return marked


#: what makes NCCL run the layout of collspec.models.bits: its ring, the simple protocol, one channel
NCCL_BITS_VARIABLES = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1"}


def parse_expect(expect: str | None) -> str | None:
    """``"bits:nccl-ring"`` -> ``"nccl-ring"`` (None for None); bad input: CollspecError."""
    if expect is None:
        return None
    kind, sep, algorithm = expect.partition(":")
    if kind != "bits" or not sep:
        raise CollspecError(f"--expect {expect}: write bits:ALGO (bits:nccl-ring)")
    from ..models import bits

    if algorithm not in bits.ALGORITHMS:
        raise CollspecError(f"--expect {expect}: no bit-exact model of {algorithm!r}; use one of {', '.join(bits.ALGORITHMS)}")
    return algorithm


def _groups(spec, chosen: list, algorithms, world: int) -> list[tuple[dict, list]]:
    """The starts of the ranks: (variables, cases). One for a backend without
    algorithms; else one per forced (collective, algorithm), with the cases
    that algorithm's MPI function runs, and the ``auto`` cases together."""
    if spec.library is None:
        return [({}, chosen)]
    collectives = list(dict.fromkeys(c.collective for c in chosen))
    plan = mpi_libs.select(spec.library, collectives, algorithms)
    auto = [replace(c, algorithm=mpi_libs.DEFAULT) for c in chosen if mpi_libs.DEFAULT in plan.get(c.collective, ())]
    groups = [({}, auto)] if auto else []
    for collective, names in plan.items():
        for algorithm in names:
            function, _ = mpi_libs.split(collective, algorithm)
            if function is None:
                continue
            cases = [replace(c, algorithm=algorithm) for c in chosen if c.collective == collective
                     and mpi_libs.function_of(collective, c.count, world) == function]
            if cases:
                groups.append((mpi_libs.force(spec.library, collective, algorithm), cases))
    return groups


def _tagged(outcome: runner.Outcome, cases: list) -> runner.Outcome:
    """A set-up failure of a start that forces an algorithm names that algorithm."""
    forced = {c.algorithm for c in cases} - {None, mpi_libs.DEFAULT}
    if outcome.case is not None or not forced:
        return outcome
    algorithm, collective = forced.pop(), cases[0].collective
    return replace(outcome, violations=[
        replace(v, message=f"{collective}/alg={algorithm}: {v.message}",
                details={**v.details, "collective": collective, "algorithm": algorithm}) for v in outcome.violations])


def _init_aborted(spec, outcomes: list[runner.Outcome], output: str) -> list[runner.Outcome]:
    """A start forcing an algorithm whose ranks never got ready (``MPI_Init``
    aborted, as MPICH does when its own start-up collectives refuse the forced
    algorithm): every case of it not judged gets that verdict, with the
    library's message, instead of ``not-run``. ``unsupported`` where the
    message is the library refusing the algorithm (:attr:`.mpi_libs.Library.refusal`),
    else the set-up failure's own kind (``crash`` or ``hang``)."""
    setup = [o for o in outcomes if o.case is None and o.violations]
    forced = [o.case.algorithm for o in outcomes if o.case is not None and o.case.algorithm != mpi_libs.DEFAULT]
    if spec.library is None or not setup or not forced:
        return outcomes
    import re

    failure = setup[0].violations[0]
    stack = _error_stack(output)
    lines = [line.strip() for line in failure.details.get("log", []) if line.strip() and not line.lstrip().startswith("[")]
    said = stack[-1][1] if stack and stack[-1][1] else (lines or [failure.message])[-1]
    refused = re.search(mpi_libs.library(spec.library).refusal, said) is not None
    kind = "unsupported" if refused else failure.kind
    where = " > ".join(name for name, _ in stack)
    how = re.sub(r"^[^:]*: ", "", failure.message, count=1)
    reason = f"MPI_Init aborted with the algorithm forced: {said} ({f'in {where}; ' if where else ''}{how})"[:600]
    out = []
    for outcome in outcomes:
        if outcome.case is None and outcome.violations:
            continue  # its violation moves to each case below
        if outcome.case is not None and outcome.status == "not-run":
            case = outcome.case
            violation = Violation(kind, f"{case.id}: {reason}", severity="warning" if refused else "error",
                                  details={**runner.case_details(case), "algorithm": case.algorithm, "ranks": [],
                                           "phase": "setup", "reason": reason, "log": failure.details.get("log", [])})
            outcome = replace(outcome, status=kind, violations=[violation], note=reason)
        out.append(outcome)
    return out


def _error_stack(output: str) -> list[tuple[str, str]]:
    r"""The first MPICH-style error stack in ``output`` (Intel MPI prints the
    same): [(function, text), ...], outermost first.

    >>> _error_stack("Abort(1) on node 0: Fatal error in internal_Init_thread: Other MPI error, error stack:\n"
    ...              "internal_Init_thread(71)....: MPI_Init_thread(...) failed\nMPII_Init_thread(333).......: \n"
    ...              "MPIR_Bcast_impl(405)........: User set collective algorithm is not usable\nnoise\n")
    [('internal_Init_thread', 'MPI_Init_thread(...) failed'), ('MPII_Init_thread', ''), ('MPIR_Bcast_impl', 'User set collective algorithm is not usable')]
    """
    import re

    at = output.find("error stack:")
    if at < 0:
        return []
    stack = []
    for line in output[at:].splitlines()[1:]:
        match = re.match(r"\s*(\w+)\(\d+\)\.*:\s*(.*)$", line)
        if match is None:
            break
        stack.append((match.group(1), match.group(2).strip()))
    return stack


def _ignored(spec, outcomes: list[runner.Outcome], output: str) -> list[runner.Outcome]:
    """If the library said it ignored the forced algorithm, every case of that
    start is ``unsupported`` with its message: never a pass of its default."""
    if spec.library is None:
        return outcomes
    import re

    said = re.search(mpi_libs.library(spec.library).ignored, output)
    if said is None or all(o.case is None or o.case.algorithm == mpi_libs.DEFAULT for o in outcomes):
        return outcomes
    reason = _message_at(output, said.start())
    out = []
    for outcome in outcomes:
        if outcome.case is None or outcome.status in ("not-run",):
            out.append(outcome)
            continue
        case = outcome.case
        violation = Violation("unsupported", f"{case.id}: the library ignored alg={case.algorithm}: {reason}",
                              severity="warning",
                              details={"case": case.id, "collective": case.collective, "algorithm": case.algorithm,
                                       "dtype": case.dtype, "op": case.op, "ranks": [], "reason": reason})
        out.append(replace(outcome, status="unsupported", violations=[violation]))
    return out


def _message_at(output: str, at: int) -> str:
    """The library's message that starts on the line holding ``at``: up to six
    lines, ending before a ruler (Open MPI's ``-----``) or another program's
    log line (``[W1201 ...]`` from torch), on one line.

    >>> _message_at("x\\nMPI startup(): Incorrect adjust value: A=b, will be ignored\\n[W1201 c10d] noise\\n", 3)
    'MPI startup(): Incorrect adjust value: A=b, will be ignored'
    """
    import re

    lines = output[output.rfind("\n", 0, at) + 1:].split("\n")
    kept = [lines[0]]
    for line in lines[1:6]:
        if re.match(r"\s*(-{5,}|\[)", line):
            break
        kept.append(line)
    return " ".join(" ".join(kept).split())[:300]


def _reproducible(outcomes: list[runner.Outcome]) -> list[runner.Outcome]:
    """Call k > 0 of a case (``--repeat``) must leave the same bits as call 0:
    else a ``not-reproducible`` warning on that call."""
    first = {o.case.id: o.digest for o in outcomes if o.case is not None and o.case.call == 0 and o.digest}
    out = []
    for outcome in outcomes:
        case = outcome.case
        if case is not None and case.call and outcome.digest:
            base = replace(case, call=0).id
            if base in first and first[base] != outcome.digest:
                violation = Violation(
                    "not-reproducible",
                    f"{case.id}: the same inputs gave different bits than call 0 ({base})",
                    severity="warning",
                    details={"case": case.id, "collective": case.collective, "algorithm": case.algorithm,
                             "dtype": case.dtype, "op": case.op, "size": case.count, "ranks": [], "first": base},
                )
                outcome = replace(outcome, violations=[*outcome.violations, violation])
        out.append(outcome)
    return out


def _check_options(spec, world_size, timeout, launcher, collectives, dtypes, ops) -> None:
    if not 1 <= world_size <= MAX_WORLD:
        raise CollspecError(f"--world-size {world_size}: use 1 to {MAX_WORLD} ranks")
    if not timeout > 0:
        raise CollspecError(f"--timeout {timeout}: must be more than 0 seconds")
    if launcher is not None and launcher not in LAUNCHERS:
        raise CollspecError(f"--launcher {launcher}: use one of {', '.join(LAUNCHERS)}")
    if spec.launcher == "mpiexec" and launcher not in (None, "mpiexec"):
        raise CollspecError(f"--backend {spec.text} runs under mpiexec; drop --launcher {launcher}")
    for values, allowed, what in ((collectives, COLLECTIVES, "collective"), (dtypes, DTYPES, "dtype"), (ops, ALL_OPS, "op")):
        for value in values or ():
            if value not in allowed:
                raise CollspecError(f"unknown {what} {value!r}; use one of {', '.join(allowed)}")
    if spec.library is not None and not mpi_libs.library(spec.library).available():
        lib = mpi_libs.library(spec.library)
        raise CollspecError(f"--backend {spec.text}: {lib.title} is not installed under {lib.prefix}; `make install` in collspec's "
                            "checkout installs it (a plain pip install brings Open MPI only)")
    if spec.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise CollspecError(f"--backend {spec.text} on cuda needs a CUDA GPU and none is visible")
        if world_size > torch.cuda.device_count():
            raise CollspecError(f"--world-size {world_size}: only {torch.cuda.device_count()} GPU(s) visible")
