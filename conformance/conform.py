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
from ..spec import DTYPES, OPS, Violation
from ..spec.errors import CollspecError
from . import cases as case_lists
from . import findings, matrix, resolve, runner
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
        }
        extra = {
            "backend": self.backend.target,
            "capability": self.capability,
            "cases": [{"case": o.case.id, "status": o.status, **({"reason": o.note} if o.note else {})}
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
    on_start: Callable[[int], None] = lambda cases: None,
    on_outcome: Callable[[runner.Outcome], None] = lambda outcome: None,
) -> Conformance:
    """Run the conformance cases of ``mode`` against ``backend`` on ``world_size`` ranks.

    Bad options raise :class:`~collspec.spec.errors.CollspecError` before
    anything starts; ``on_start`` then gets the number of cases and
    ``on_outcome`` each case's outcome as it is judged.
    """
    spec = resolve.parse(backend, device)
    _check_options(spec, world_size, timeout, launcher, collectives, dtypes, ops)
    chosen = select(world_size, mode, repeat, seed, collectives, dtypes, ops, sizes)
    on_start(len(chosen))
    launcher = launcher or spec.launcher
    name = spec.text if spec.text in resolve.BUILTIN else spec.target

    def marked(outcome: runner.Outcome) -> runner.Outcome:
        violations = findings.mark(name, outcome.violations, strict)
        status = outcome.status
        if status == "fail" and not any(v.is_error for v in violations):
            status = "finding"
        return replace(outcome, violations=violations, status=status)

    outcomes: list[runner.Outcome] = []

    def record(outcome: runner.Outcome) -> None:
        outcomes.append(marked(outcome))
        on_outcome(outcomes[-1])

    settings = runner.Settings(spec, world_size, chosen, timeout, launcher, list(launcher_args or []))
    result = runner.run(settings, record)
    outcomes.sort(key=lambda o: (o.index, o.case is not None))
    return Conformance(spec, world_size, mode, outcomes, result,
                       {"mode": mode, "launcher": launcher, "seed": seed, "repeat": repeat, "timeout": timeout})


def _check_options(spec, world_size, timeout, launcher, collectives, dtypes, ops) -> None:
    if not 1 <= world_size <= MAX_WORLD:
        raise CollspecError(f"--world-size {world_size}: use 1 to {MAX_WORLD} ranks")
    if not timeout > 0:
        raise CollspecError(f"--timeout {timeout}: must be more than 0 seconds")
    if launcher is not None and launcher not in LAUNCHERS:
        raise CollspecError(f"--launcher {launcher}: use one of {', '.join(LAUNCHERS)}")
    if spec.launcher == "mpiexec" and launcher not in (None, "mpiexec"):
        raise CollspecError(f"--backend {spec.text} runs under mpiexec; drop --launcher {launcher}")
    for values, allowed, what in ((collectives, COLLECTIVES, "collective"), (dtypes, DTYPES, "dtype"), (ops, OPS, "op")):
        for value in values or ():
            if value not in allowed:
                raise CollspecError(f"unknown {what} {value!r}; use one of {', '.join(allowed)}")
    if spec.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise CollspecError(f"--backend {spec.text} on cuda needs a CUDA GPU and none is visible")
        if world_size > torch.cuda.device_count():
            raise CollspecError(f"--world-size {world_size}: only {torch.cuda.device_count()} GPU(s) visible")
