"""The coordinator: start the ranks, watch them, judge every case.

The ranks run the plan's cases back to back; the coordinator follows their
events (:mod:`.events`) and judges each case (:mod:`.checks`) as soon as
every rank has finished it, so checking overlaps running.

A case every rank finished is judged and the run goes on, with no restart:

- a rank whose backend raised (anything but NotImplementedError and
  TypeError) fails the case as a ``crash`` naming every rank that raised,
  each with its own exception (``details["errors"]``); the others' buffers
  are not judged;
- ``unsupported`` on any rank makes the case ``unsupported``;
- ``n/a``: unequal blocks for a class without the ``_v`` method (the same
  on every rank): not applicable to this backend, neither a pass nor a
  failure;
- else the buffers are judged: ``pass`` or ``fail``.

Every case has a deadline: ``timeout`` seconds after the previous case
finished on every rank (after set-up for the first). Past it the case is a
``hang`` naming the ranks that did not finish, or, when some rank raised
(its peers then wait in the collective for it), a ``crash`` naming the
ranks that raised and the ones left waiting. A rank that dies is a
``crash`` naming it and its exit code or signal; a rank that exits before
its cases are done dies, whatever its exit code (0 included). Only after a hang or a
death, every process of the run is killed (:mod:`.procs`) and the ranks are
started afresh from the next case. A death costs seconds and each restart
moves past the case that died, so after a crash the ranks are always
restarted (an algorithm that aborts on every case gets a ``crash`` verdict on
every case). A hang costs ``timeout`` seconds, so after :data:`MAX_RESTARTS`
hangs the cases left are reported ``not-run``, with that reason in the
outcome's ``note``. A failure during set-up (the backend cannot be loaded, its
constructor raises, a rank never gets ready) ends the run: loading errors are
bad input (exit 2), the others a ``crash`` or ``hang`` with every case
``not-run``.

Whatever ends a start of the ranks (its end, a crash, a hang, a signal),
every process of the run is killed (:class:`.procs.Run`) and whatever its
processes left in shared memory is removed (:mod:`.footprint`) before the
run returns.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..spec import Violation, as_dtype
from ..spec.errors import CollspecError
from . import events, footprint, launch, procs
from .buffers import layout_of
from .cases import Case
from .checks import judge, judge_bits
from .data import guard
from .procs import kill_tagged
from .resolve import BackendSpec

#: Restarts after a hang (each costs the case's timeout); after a crash there is no limit.
MAX_RESTARTS = 8
SETUP_TIMEOUT = 180.0


@dataclass
class Outcome:
    """What became of one case: ``pass``, ``fail``, ``unsupported``, ``n/a``, ``hang``, ``crash`` or
    ``not-run``; ``note`` says why a case is ``n/a``, ``not-run`` (or, from
    :mod:`.conform`, why a forced algorithm's ``MPI_Init`` aborted)."""

    index: int
    case: Case | None
    status: str
    violations: list[Violation] = field(default_factory=list)
    seconds: float | None = None
    note: str = ""
    digest: str | None = None  # a hash of every rank's buffers after the call (bit-reproducibility)


@dataclass
class Settings:
    backend: BackendSpec
    world: int
    cases: list[Case]
    timeout: float
    launcher: str
    launcher_args: list[str] = field(default_factory=list)
    timing: dict | None = None
    variables: dict[str, str] = field(default_factory=dict)  # set for every rank (a forced MPI algorithm)
    expect_bits: str | None = None  # --expect bits:ALGO: also compare with that model bit for bit


@dataclass
class Result:
    outcomes: list[Outcome]
    restarts: int
    loopback_only: bool
    seconds: float
    output: str = ""  # what the launcher and the ranks printed (the start of each log)
    interrupted: str | None = None  # the signal that ended the run (SIGTERM, ...), None when it ran to its end


class _SetupFailed(Exception):
    def __init__(self, violation: Violation):
        super().__init__(violation.message)
        self.violation = violation


def run(settings: Settings, on_outcome: Callable[[Outcome], None] = lambda outcome: None) -> Result:
    """Run every case of ``settings`` and return one outcome per case, in order.

    SIGINT, SIGTERM and SIGHUP (Ctrl-C, ``timeout``, a job scheduler, a closed
    terminal) end the run as its end does: every process of the run killed,
    everything it left in /dev/shm removed, the cases not judged yet
    ``not-run`` with the signal in their note, and :attr:`Result.interrupted`
    naming it (only where this runs in the main thread; elsewhere the
    signals keep their handlers).
    """
    if settings.world < 1:
        raise CollspecError(f"--world-size {settings.world}: needs at least 1 rank")
    began, run_id = time.monotonic(), uuid.uuid4().hex
    run_dir = tempfile.mkdtemp(prefix="collspec-conform-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    os.mkdir(os.path.join(run_dir, "tmp"))
    outcomes: list[Outcome] = []

    def record(outcome: Outcome) -> None:
        outcomes.append(outcome)
        on_outcome(outcome)

    restarts, hangs, loopback_only, position = 0, 0, True, 0
    stopped, interrupted = "", None
    owned, seen = procs.Run(run_id), footprint.Footprint(run_dir)
    variables = {**footprint.variables(os.path.join(run_dir, "tmp"), settings.backend.library), **settings.variables}
    previous = _catch_signals()
    try:
        with owned:
            plan_path = _write_plan(run_dir, settings)
            while position < len(settings.cases):
                launch_dir = os.path.join(run_dir, f"launch{restarts}")
                os.mkdir(launch_dir)
                started = launch.start(settings.launcher, plan_path, launch_dir, settings.world, position, run_id,
                                       settings.launcher_args, settings.backend.library, variables)
                owned.add(started.process.pid)
                loopback_only = loopback_only and started.loopback_only
                failed = "hang"  # until _watch says otherwise (a set-up failure, a signal)
                try:
                    position, failed = _watch(settings, started, launch_dir, position, record, _Looking(owned, seen))
                except _SetupFailed as failure:
                    record(Outcome(position, None, failure.violation.kind, [failure.violation]))
                    break
                finally:
                    _ignore_signals()  # a second signal must not cut the clean-up short
                    seen.observe(owned.members())
                    started.settle(wait_first=failed != "hang")
                    owned.end()
                    started.stop()
                    owned.release(started.process.pid)
                    _catch_signals()
                if not failed:
                    break
                hangs += failed == "hang"
                if hangs > MAX_RESTARTS:
                    stopped = f"not run: the ranks hung {hangs} times, the limit of restarts after a hang ({MAX_RESTARTS})"
                    break
                restarts += 1
    except Interrupted as signal_received:
        interrupted = signal_received.name
        stopped = f"not run: the run was ended by {interrupted}"
    finally:
        _ignore_signals()
        owned.end()
        kill_tagged(run_id)
        seen.remove()
        seen.close()
        output = _output(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        _restore_signals(previous)
    judged = {o.index for o in outcomes if o.case is not None}
    for index, case in enumerate(settings.cases):
        if index not in judged:
            record(Outcome(index, case, "not-run", note=stopped))
    return Result(sorted(outcomes, key=lambda o: (o.index, o.case is not None)), restarts, loopback_only,
                  time.monotonic() - began, output, interrupted)


class Interrupted(BaseException):
    """A signal that ends the run (:data:`SIGNALS`), raised in the coordinator."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.name = signal.Signals(number).name


#: The signals that end a run cleanly (Ctrl-C, ``timeout`` and job schedulers, a closed terminal).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise(number, _frame) -> None:
    raise Interrupted(number)


def _catch_signals() -> dict | None:
    """Make :data:`SIGNALS` raise :class:`Interrupted`; returns the handlers they had (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return {number: signal.signal(number, _raise) for number in SIGNALS}


def _ignore_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for number in SIGNALS:
            signal.signal(number, signal.SIG_IGN)


def _restore_signals(previous: dict | None) -> None:
    if previous is not None:
        for number, handler in previous.items():
            signal.signal(number, handler)


class _Looking:
    """Which /dev/shm entries the run's processes use, looked at when an entry
    appears, when a rank gets ready and every second (:mod:`.footprint`)."""

    def __init__(self, owned: procs.Run, seen: footprint.Footprint):
        self.owned, self.seen, self.last = owned, seen, 0.0

    def __call__(self, pause: float, now: bool = False) -> None:
        appeared = self.seen.wait(pause)
        if now or appeared or time.monotonic() - self.last > 1.0:
            self.seen.observe(self.owned.members())
            self.last = time.monotonic()


def _output(run_dir: str, limit: int = 16384) -> str:
    """The first ``limit`` bytes of every log of the run (launcher and ranks, every start)."""
    parts = []
    for root, _, files in sorted(os.walk(run_dir)):
        for name in sorted(f for f in files if f.endswith(".log")):
            try:
                with open(os.path.join(root, name), "rb") as handle:
                    parts.append(handle.read(limit).decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(parts)


def _write_plan(run_dir: str, settings: Settings) -> str:
    plan = {
        "target": settings.backend.target,
        "device": settings.backend.device,
        "timeout": settings.timeout,
        "setup_timeout": SETUP_TIMEOUT,
        "timing": settings.timing,
        "cases": [case.to_json() for case in settings.cases],
    }
    path = os.path.join(run_dir, "plan.json")
    with open(path, "w") as handle:
        json.dump(plan, handle)
    return path


def _watch(settings: Settings, started: launch.Launch, launch_dir: str, position: int, record, look) -> tuple[int, str]:
    """Follow one start of the ranks until the cases run out or one fails;
    ``look(pause, now)`` waits between polls (and looks at what the ranks use).

    Returns the index of the next case to run and the kind of the failure
    that stopped this start (``crash`` or ``hang``; "" when none did).
    """
    world, cases = settings.world, settings.cases
    reader = events.Reader(launch_dir, world)
    ready: set[int] = set()
    done: dict[int, dict[int, dict]] = {}
    exits: dict[int, dict] = {}
    finished: set[int] = set()
    current = position
    deadline = time.monotonic() + SETUP_TIMEOUT
    pause = 0.001
    while True:
        gone = started.gone()  # before reading, so that a clean exit's last events are read first
        news = reader.poll()
        got_ready = False
        for rank, event in news:
            kind = event["e"]
            if kind == "fatal":
                if event["usage"]:
                    raise CollspecError(event["error"])
                raise _SetupFailed(Violation("crash", f"set-up: rank {rank}: the backend's constructor raised {event['error']}",
                                             details={"ranks": [rank], "phase": "setup", "error": event["error"]}))
            if kind == "ready":
                ready.add(rank)
                got_ready = True
                if len(ready) == world:
                    deadline = time.monotonic() + settings.timeout
            elif kind == "done":
                done.setdefault(event["case"], {})[rank] = event
            elif kind == "exit":
                exits[rank] = event
            elif kind == "finished":
                finished.add(rank)
        while current < len(cases) and len(done.get(current, {})) == world:
            record(_complete(settings, launch_dir, current, done.pop(current)))
            current += 1
            deadline = time.monotonic() + settings.timeout
        if current >= len(cases):
            return current, ""
        dead = _dead(exits, gone, finished)
        if dead:
            violation = _crash(settings, launch_dir, current, dead, done.get(current, {}), phase="setup" if len(ready) < world else None)
            if len(ready) < world:
                raise _SetupFailed(violation)
            record(Outcome(current, cases[current], "crash", [violation]))
            return current + 1, "crash"
        if time.monotonic() > deadline:
            if len(ready) < world:
                missing = sorted(set(range(world)) - ready)
                raise _SetupFailed(Violation("hang", f"set-up: rank(s) {_list(missing)} did not get ready within {SETUP_TIMEOUT:.0f} s",
                                             details={"ranks": missing, "phase": "setup"}))
            violation = _hang(settings, current, done.get(current, {}))
            record(Outcome(current, cases[current], violation.kind, [violation]))
            return current + 1, "hang"
        pause = 0.001 if news else min(pause * 2, 0.02)
        look(pause, got_ready)


def _dead(exits: dict[int, dict], gone: dict[int, str], finished: set[int] = frozenset()) -> dict[int, str]:
    """Ranks that ended abnormally, first to die first, with how: by a signal,
    with an exit code other than 0, or with any exit code before their cases
    were done (a ``finished`` event).

    >>> _dead({1: {"t": 2.0, "signal": None, "code": 0}, 0: {"t": 3.0, "signal": None, "code": 1}}, {})
    {1: 'exit code 0 before its cases were done', 0: 'exit code 1'}
    >>> _dead({0: {"t": 1.0, "signal": None, "code": 0}}, {}, finished={0})
    {}
    """
    ordered = sorted(exits.items(), key=lambda item: item[1]["t"])
    dead = {}
    for rank, event in ordered:
        if event["signal"]:
            dead[rank] = f"signal {event['signal']}"
        elif event["code"] != 0:
            dead[rank] = f"exit code {event['code']}"
        elif rank not in finished:
            dead[rank] = "exit code 0 before its cases were done"
    for rank, how in gone.items():
        if rank not in exits:
            dead.setdefault(rank, how)
    return dead


def _list(ranks) -> str:
    return ", ".join(map(str, ranks))


def case_details(case: Case | None) -> dict:
    if case is None:
        return {"phase": "setup"}
    details = {"case": case.id, "collective": case.collective, "dtype": case.dtype, "op": case.op, "size": case.count,
               "inplace": case.inplace, "root": case.root, "seed": case.seed}
    return details if case.algorithm is None else {**details, "algorithm": case.algorithm}


def _log_tail(launch_dir: str, rank: int, lines: int = 6) -> list[str]:
    name = f"rank{rank}.log" if rank >= 0 else "launcher.log"
    try:
        with open(os.path.join(launch_dir, name), errors="replace") as handle:
            return [line.rstrip() for line in handle.readlines()[-lines:]]
    except OSError:
        return []


def _crash(settings, launch_dir, index, dead: dict[int, str], finished: dict, phase=None) -> Violation:
    case = settings.cases[index] if phase is None else None
    first = next(iter(dead))
    where = "during set-up" if case is None else f"during {case.id}"
    unfinished = sorted(r for r in range(settings.world) if r not in finished)
    text = f"rank {first} died ({dead[first]}) {where}" if first >= 0 else f"{dead[first]} {where}"
    if len(dead) > 1:
        text += f"; then rank(s) {_list(r for r in dead if r != first)} ended too"
    said = _last_words(launch_dir, first)
    return Violation("crash", f"{text} (unfinished: rank(s) {_list(unfinished)})" + (f": {said}" if said else ""),
                     details={**case_details(case), "ranks": [first] if first >= 0 else [],
                              "how": dead[first], "log": _log_tail(launch_dir, first),
                              **({"said": said} if said else {})})


#: A line in which a dying process says why (a failed assertion, an abort, a fatal signal).
LAST_WORDS = r"Assertion failed|Assertion `|Fatal error|Segmentation fault|MPI_ABORT|Abort\(|Aborted"


def _last_words(launch_dir: str, rank: int, limit: int = 65536) -> str:
    """The first line of the rank's log (of this start) matching :data:`LAST_WORDS`, or "".

    A backtrace's last lines are addresses; the reason is printed before them.
    """
    import re

    name = f"rank{rank}.log" if rank >= 0 else "launcher.log"
    try:
        with open(os.path.join(launch_dir, name), "rb") as handle:
            text = handle.read(limit).decode(errors="replace")
    except OSError:
        return ""
    match = re.search(rf"^.*(?:{LAST_WORDS}).*$", text, re.M)
    return " ".join(match.group(0).split())[:300] if match else ""


def _hang(settings: Settings, index: int, finished: dict) -> Violation:
    """A ``hang``; or a ``crash`` when some rank raised and left its peers waiting."""
    case = settings.cases[index]
    missing = sorted(set(range(settings.world)) - set(finished))
    raised = sorted(r for r, event in finished.items() if event["status"] == "error")
    if raised:
        reason = finished[raised[0]]["reason"]
        return Violation(
            "crash",
            f"{case.id}: {_each(finished, raised, 'raised')}; rank(s) {_list(missing)} did not finish within "
            f"{settings.timeout:g} s (waiting in the collective for them)",
            details={**case_details(case), "ranks": raised, "reason": reason, "errors": _errors(finished, raised),
                     "waiting": missing, "timeout": settings.timeout},
        )
    return Violation(
        "hang",
        f"{case.id}: rank(s) {_list(missing)} did not finish within {settings.timeout:g} s"
        + (f" (rank(s) {_list(sorted(finished))} did)" if finished else ""),
        details={**case_details(case), "ranks": missing, "timeout": settings.timeout},
    )


def _errors(dones: dict[int, dict], ranks: list[int]) -> dict[int, str]:
    """{rank: its own reason} for ``ranks``."""
    return {rank: dones[rank]["reason"] for rank in ranks}


def _each(dones: dict[int, dict], ranks: list[int], verb: str) -> str:
    """Each rank with its own error; ranks with the same one together, in rank order.

    >>> _each({0: {"reason": "ValueError: x"}, 1: {"reason": "OSError: reset"}, 3: {"reason": "OSError: reset"}}, [0, 1, 3], "raised")
    'rank(s) 0 raised ValueError: x; rank(s) 1, 3 raised OSError: reset'
    """
    grouped: dict[str, list[int]] = {}
    for rank in ranks:
        grouped.setdefault(dones[rank]["reason"], []).append(rank)
    return "; ".join(f"rank(s) {_list(same)} {verb} {reason}" for reason, same in grouped.items())


def _complete(settings: Settings, launch_dir: str, index: int, dones: dict[int, dict]) -> Outcome:
    """Judge a case every rank has finished."""
    case = settings.cases[index]
    for status, kind in (("error", "crash"), ("unsupported", "unsupported")):
        ranks = sorted(r for r, event in dones.items() if event["status"] == status)
        if ranks:
            _discard_buffers(launch_dir, index, dones)
            reason = dones[ranks[0]]["reason"]
            verb = "raised" if status == "error" else "does not support it:"
            violation = Violation(
                kind,
                f"{case.id}: {_each(dones, ranks, verb)}",
                severity="error" if status == "error" else "warning",
                details={**case_details(case), "ranks": ranks, "reason": reason, "errors": _errors(dones, ranks)},
            )
            return Outcome(index, case, kind, [violation])
    if any(event["status"] == "n/a" for event in dones.values()):
        _discard_buffers(launch_dir, index, dones)
        return Outcome(index, case, "n/a", note=next(e["reason"] for e in dones.values() if e["status"] == "n/a"))
    if settings.timing is not None:
        return Outcome(index, case, "pass", seconds=max(event["seconds"] for event in dones.values()))
    finals = [_read_buffers(launch_dir, case, settings.world, rank, index) for rank in range(settings.world)]
    violations = judge(case, settings.world, finals)
    if settings.expect_bits:
        violations += judge_bits(case, settings.world, finals, settings.expect_bits)
    digest = hashlib.sha256(b"".join(image.tobytes() for final in finals for image in final.values())).hexdigest()
    return Outcome(index, case, "fail" if violations else "pass", violations, digest=digest)


def _discard_buffers(launch_dir: str, index: int, dones: dict[int, dict]) -> None:
    """Remove the buffers of the ranks that returned, for a case that is not judged."""
    for rank, event in dones.items():
        if event["status"] == "ok":
            try:
                os.unlink(events.buffers_path(launch_dir, index, rank))
            except FileNotFoundError:
                pass


def _read_buffers(launch_dir: str, case: Case, world: int, rank: int, index: int) -> dict[str, np.ndarray]:
    path = events.buffers_path(launch_dir, index, rank)
    flat = np.fromfile(path, dtype=as_dtype(case.dtype))
    os.unlink(path)
    images, at, g = {}, 0, guard(case.dtype)
    for name, length in layout_of(case, world, rank).storages.items():
        images[name] = flat[at : at + length + 2 * g]
        at += length + 2 * g
    return images
