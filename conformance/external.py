"""One rank of a conformance job that an existing launcher started.

``collspec conform --launcher external`` runs in every process of a job that
``srun``, ``mpirun`` or ``torchrun`` started (:mod:`.cluster_env` says where
it is). There is no coordinator and nobody restarts a rank, so the ranks
watch each other through the job's store (a torch ``TCPStore`` that rank 0
serves at the rendezvous address, :mod:`.rendezvous`):

- set-up: every rank posts ``{rank, host, local_rank}`` (the rank table,
  :mod:`.where`), then the process group is made on the same store and the
  backend class instantiated, as the plug-in protocol promises;
- every rank runs the same plan, case after case (:func:`.rank._method`,
  :func:`.rank._prepare`, :func:`.rank._attempt`, the code the local
  launchers run) and posts its status and its buffers' bits; rank 0 judges
  the case with the coordinator's judge (:func:`.runner._complete`) and
  posts the verdict; the others wait for it, so the verdict is also the
  barrier between cases. Every rank records every verdict in its partial
  report (:mod:`.report_merge`), rewritten atomically as cases finish;
- a watchdog thread on every rank beats a counter in the store every
  :data:`BEAT` seconds and holds the case's deadline (``--timeout`` after
  the case began, judging and the verdict included). Rank 0's watchdog
  also notices a rank whose counter stopped for :data:`DEAD_AFTER` seconds.
  Past a deadline, or on a stopped rank, the watchdog posts one ``abort``
  (the first wins): a ``hang`` naming the ranks that did not finish, or a
  ``crash`` naming the ranks that died or raised; every rank's watchdog
  sees it, records it and the cases left as ``not-run``, writes its
  partial (rank 0: the merged report too) and ends the process (exit 1);
- a rank that loses the store has lost rank 0: it records a ``crash``
  naming rank 0 and its host. SIGTERM, SIGHUP and SIGINT (a launcher ending
  the job because some rank failed) are taken by a thread of their own, so
  they are recorded even while the rank waits inside a collective.

Every violation names the ranks' hosts and local ranks (:func:`.where.annotate`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta

from ..spec import Violation
from . import cluster_env, events, rendezvous, report_merge, runner, where
from .cases import Case

#: Seconds between heartbeats.
BEAT = 0.5
#: A rank whose heartbeat has not moved for this long is taken for dead.
DEAD_AFTER = 10.0
#: Past a deadline, the heartbeats are sampled this far apart to tell the dead from the stuck.
SAMPLE = 6 * BEAT
SETUP_TIMEOUT = runner.SETUP_TIMEOUT


@dataclass
class Job:
    """What every rank of the job runs (the same on every rank)."""

    spec: object  # resolve.BackendSpec
    cases: list[Case]
    timeout: float
    settings: dict
    json_path: str | None
    junit_path: str | None
    strict: bool = False
    expect_bits: str | None = None
    timing: dict | None = None
    start: int = 0
    earlier: list = field(default_factory=list)  # outcomes of the cases before ``start`` (--resume)
    earlier_table: dict = field(default_factory=dict)
    quiet: bool = False
    partials: bool = True  # write PATH.rank<K>.json (a timing run of collspec bench does not)


class Rank:
    """This process's part of the job (module text)."""

    def __init__(self, job: Job, place: cluster_env.Placement, partial_path: str | None, on_outcome=lambda o: None):
        self.job, self.place, self.rank, self.world = job, place, place.rank, place.world
        self.partial_path, self.on_outcome = partial_path, on_outcome
        self.table: dict[int, dict] = {self.rank: self._me()}
        self.outcomes: dict[int, object] = {}
        self.setup: list = []
        self.current = job.start
        self.deadline = time.monotonic() + SETUP_TIMEOUT
        self.lock = threading.Lock()
        self.ending = False
        self.began = time.monotonic()
        self.state = "running"
        self.phase = "setup"  # then "cases"
        self.ended = ""
        from . import conform as conform_module

        self.mark = conform_module.marker(job.spec, job.strict)

    def _me(self) -> dict:
        return {"rank": self.rank, "host": self.place.host, "local_rank": self.place.local_rank}

    # -- the partial report --------------------------------------------------------------------------

    def partial(self) -> dict:
        address = self.place.address or ""
        return {
            "command": report_merge.FORMAT, "rank": self.rank, "world_size": self.world,
            "subject": self.job.spec.text, "backend": self.job.spec.target, "device": self.job.spec.device,
            "placement": {**self.place.to_json(), "loopback_only": address.startswith("127.")},
            "settings": self.job.settings, "table": [self.table[r] for r in sorted(self.table)],
            "plan": [case.to_json() for case in self.job.cases],
            "outcomes": [report_merge.outcome_to_json(o) for o in [*self.setup, *self.job.earlier,
                                                                   *(self.outcomes[i] for i in sorted(self.outcomes))]],
            "state": self.state, "ended": self.ended, "current": self.current,
            "seconds": round(time.monotonic() - self.began, 2),
        }

    def save(self) -> None:
        if self.partial_path:
            report_merge.write_partial(self.partial_path, self.partial())

    def record(self, outcome) -> None:
        outcome = report_merge.restate(outcome, self.table)
        self.outcomes[outcome.index] = outcome
        self.save()
        self.on_outcome(outcome)

    def conformance(self) -> report_merge.JobConformance:
        data = self.partial()
        data["state"] = "finished" if self.state == "running" else self.state
        return report_merge.merge([data])

    # -- ending ------------------------------------------------------------------------------------

    def end(self, index: int | None, outcome, reason: str, code: int = 1) -> None:
        """Record ``outcome`` (the case that ended the job, or a set-up failure), the rest
        as not-run, write the reports and end the process. Runs once, from any thread."""
        with self.lock:
            already, self.ending = self.ending, True
        while already:  # another thread is ending the process, or the job finished: this one waits
            time.sleep(1)
        try:
            self.state, self.ended = "aborted", reason
            if outcome is not None and outcome.case is None:
                self.setup.append(report_merge.restate(outcome, self.table))
            elif outcome is not None and index not in self.outcomes:
                self.record(outcome)
            self.save()
            if self.rank == 0:
                self.finish_outputs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

    def finish_outputs(self) -> report_merge.JobConformance:
        result = self.conformance()
        report_merge.write_outputs(result, self.job.json_path, self.job.junit_path)
        if not self.job.quiet:
            from .output import print_summary

            print_summary(result)
            for line in result.by_host():
                print(f"  failures by host: {line}")
        return result


class Watchdog(threading.Thread):
    """Heartbeats, the case deadline, the abort record, and the signals (module text)."""

    def __init__(self, me: Rank, store_factory):
        super().__init__(daemon=True, name="collspec-watchdog")
        self.me, self.store = me, store_factory()
        self.stop = threading.Event()
        self.seen: dict[int, tuple[int, float]] = {}

    def run(self) -> None:
        me = self.me
        while not self.stop.is_set():
            try:
                self.store.add(f"hb/{me.rank}", 1)
                if self.store.check(["abort"]):
                    self.obey()
                if time.monotonic() > me.deadline:
                    self.expire()
                if me.rank == 0:
                    self.watch_beats()
            except (RuntimeError, OSError) as error:  # torch's store errors are RuntimeErrors
                if me.ending:
                    return
                self.lost(error)
            self.stop.wait(BEAT)

    # the store is rank 0's: losing it means rank 0 is gone
    def lost(self, error) -> None:
        me = self.me
        case = me.job.cases[me.current] if me.current < len(me.job.cases) else None
        text = f"{case.id}: " if case else "set-up: "
        violation = Violation("crash", f"{text}rank 0 stopped answering (the job's store it serves is gone: "
                                       f"{str(error).splitlines()[0][:160]})",
                              details={**runner.case_details(case), "ranks": [0], "how": "store lost"})
        me.end(me.current, runner.Outcome(me.current, case, "crash", [violation]), "rank 0 was lost")

    def watch_beats(self) -> None:
        me, now = self.me, time.monotonic()
        counts = self._beats()
        stopped = []
        if me.phase != "cases":
            return  # a rank still importing torch does not beat yet (the set-up deadline covers it); a finished one stops
        for rank, count in counts.items():
            last, since = self.seen.get(rank, (None, now))
            if count != last:
                self.seen[rank] = (count, now)
            elif now - since > DEAD_AFTER:
                stopped.append(rank)
        if stopped:
            self.post(self.diagnose(me.current, stopped=stopped))

    def _beats(self) -> dict[int, int]:
        """Every rank's heartbeat count (0: not begun)."""
        return {r: self.store.add(f"hb/{r}", 0) for r in range(self.me.world)}

    def expire(self) -> None:
        me = self.me
        first = self._beats()
        time.sleep(SAMPLE)
        second = self._beats()
        stopped = [r for r in range(me.world) if first[r] == second[r] and r != me.rank]  # this thread is the one sampling
        self.post(self.diagnose(me.current, stopped=stopped, hang=True))

    def diagnose(self, index: int, stopped: list[int], hang: bool = False) -> dict:
        """The abort record for case ``index``: who finished it, who raised, who stopped."""
        me = self.me
        if me.phase == "setup":
            missing = sorted(set(range(me.world)) - set(me.table))
            kind = "crash" if stopped else "hang"
            message = (f"set-up: rank(s) {', '.join(map(str, stopped))} stopped" if stopped else
                       f"set-up: rank(s) {', '.join(map(str, missing or range(me.world)))} did not get ready within "
                       f"{SETUP_TIMEOUT:.0f} s")
            return {"index": None, "kind": kind, "message": message, "ranks": stopped or missing}
        case = me.job.cases[index]
        finished = {}
        for rank in range(me.world):
            key = f"c{index}/done/{rank}"
            if self.store.check([key]):
                finished[rank] = json.loads(self.store.get(key))
        missing = sorted(set(range(me.world)) - set(finished))
        raised = sorted(r for r, event in finished.items() if event["status"] == "error")
        dead = sorted(set(stopped) & set(missing)) or sorted(stopped)
        if dead:
            return {"index": index, "kind": "crash", "ranks": dead, "waiting": [r for r in missing if r not in dead],
                    "message": f"{case.id}: rank(s) {', '.join(map(str, dead))} stopped (no heartbeat for "
                               f"{DEAD_AFTER if not hang else SAMPLE:g} s: the process died or froze); unfinished: "
                               f"rank(s) {', '.join(map(str, missing)) or 'none'}"}
        if raised:
            reason = finished[raised[0]]["reason"]
            return {"index": index, "kind": "crash", "ranks": raised, "waiting": missing, "reason": reason,
                    "message": f"{case.id}: rank(s) {', '.join(map(str, raised))} raised {reason}; rank(s) "
                               f"{', '.join(map(str, missing))} did not finish within {me.job.timeout:g} s (waiting in "
                               f"the collective for them)"}
        return {"index": index, "kind": "hang", "ranks": missing,
                "message": f"{case.id}: rank(s) {', '.join(map(str, missing))} did not finish within {me.job.timeout:g} s"
                           + (f" (rank(s) {', '.join(map(str, sorted(finished)))} did)" if finished else "")}

    def post(self, record: dict) -> None:
        self.store.compare_set("abort", "", json.dumps(record))
        self.obey()

    def obey(self) -> None:
        """End this rank as the abort record says."""
        me = self.me
        record = json.loads(self.store.get("abort"))
        index = record["index"]
        case = me.job.cases[index] if index is not None else None
        if index is not None and index not in me.outcomes and self.store.check([f"c{index}/verdict"]):
            me.record(_verdict(json.loads(self.store.get(f"c{index}/verdict")), me.job.cases))
        details = {**runner.case_details(case), "ranks": record["ranks"], "timeout": me.job.timeout,
                   **{k: record[k] for k in ("waiting", "reason") if k in record}}
        violation = Violation(record["kind"], record["message"], details=details)
        outcome = runner.Outcome(index if index is not None else 0, case, record["kind"], [violation])
        reason = f"the job ended at {'set-up' if case is None else case.id} ({record['kind']})"
        me.end(index, outcome, reason)


class _Guarded:
    """The job's store for the main thread: an error from it (rank 0, which serves it, is gone)
    ends the job as the watchdog does."""

    def __init__(self, store, on_lost):
        self._store, self._on_lost = store, on_lost

    def __getattr__(self, name):
        method = getattr(self._store, name)

        def call(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except RuntimeError as error:  # torch's DistNetworkError, DistStoreError
                self._on_lost(error)
                raise

        return call


def _verdict(data: dict, cases: list[Case]):
    return report_merge.outcome_from_json(data, cases)


def _signals(me: Rank) -> None:
    """Take SIGTERM, SIGHUP and SIGINT on a thread of their own: the main thread may be inside a
    collective, where a Python handler would not run until it returns. Python's C-level handler writes
    each signal's number to the wakeup descriptor at once; the thread reads it (no signal mask is
    changed, so processes a backend starts get the usual one)."""
    caught = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    readable, writable = os.pipe()
    os.set_blocking(writable, False)
    signal.set_wakeup_fd(writable, warn_on_full_buffer=False)
    for number in caught:
        signal.signal(number, lambda *_: None)  # the thread below acts; the main thread ignores it

    def wait() -> None:
        number = 0
        while number not in caught:
            number = os.read(readable, 1)[0]
        name = signal.Signals(number).name
        case = me.job.cases[me.current] if me.current < len(me.job.cases) else None
        where_ = case.id if case else "set-up"
        violation = Violation("crash", f"{where_}: rank {me.rank} was ended by {name} (a launcher ends every rank "
                                       f"when one fails)", details={**runner.case_details(case), "ranks": [me.rank],
                                                                    "how": name, "by": "signal"})
        me.end(me.current, runner.Outcome(me.current, case, "crash", [violation]),
               f"rank {me.rank} received {name}", code=128 + number)

    threading.Thread(target=wait, daemon=True, name="collspec-signals").start()


def run(job: Job, place: cluster_env.Placement, on_outcome=lambda o: None) -> report_merge.JobConformance:
    """Run this rank's part of the job; returns the job's conformance as this rank saw it."""
    from . import resolve

    partial = report_merge.partial_path(job.json_path if job.json_path not in (None, "-") else "collspec-conform.json",
                                        place.rank) if job.partials else None
    me = Rank(job, place, partial, on_outcome)
    for entry in job.earlier_table.values():
        me.table.setdefault(entry["rank"], entry)  # replaced by this job's table at set-up
    me.save()
    _signals(me)
    backend_class = resolve.load(job.spec.target)
    if place.address and not place.rendezvous.startswith("file:"):
        rendezvous.point_interfaces(place.address)
    store = rendezvous.connect(place, SETUP_TIMEOUT)
    address = place.address
    if address is None:
        address = rendezvous.store_address(store)
        place = replace(place, address=address)
        me.place = place
        rendezvous.point_interfaces(address)
    store_factory = rendezvous.client_factory(store, place)
    watchdog = Watchdog(me, store_factory)
    store = _Guarded(store, watchdog.lost)
    store.set(f"who/{me.rank}", json.dumps(me._me()))
    watchdog.start()
    store.wait([f"who/{r}" for r in range(me.world)], timedelta(seconds=SETUP_TIMEOUT))
    me.table = {r: json.loads(store.get(f"who/{r}")) for r in range(me.world)}
    me.save()
    import torch.distributed as dist

    kind = "gloo"
    if job.spec.device == "cuda":
        import torch

        torch.cuda.set_device(place.local_rank if torch.cuda.device_count() > 1 else 0)  # one GPU shown: that one
        kind = "nccl"
    group_store = dist.PrefixStore("collspec/pg/", store._store)
    dist.init_process_group(kind, store=group_store, rank=me.rank, world_size=me.world,
                            timeout=timedelta(seconds=SETUP_TIMEOUT + 2 * job.timeout))
    harness = dist.new_group(backend="gloo") if kind != "gloo" or job.timing else None
    try:
        backend = backend_class(me.rank, me.world)
    except Exception as error:  # the user's constructor
        from .rank import _describe

        text = _describe(error)
        violation = Violation("crash", f"set-up: rank {me.rank}: the backend's constructor raised {text}",
                              details={"ranks": [me.rank], "phase": "setup", "error": text})
        store.compare_set("abort", "", json.dumps({"index": None, "kind": "crash", "message": violation.message,
                                                   "ranks": [me.rank]}))
        me.end(None, runner.Outcome(0, None, "crash", [where.annotate(violation, me.table)]), "the backend's constructor raised")
    me.phase = "cases"
    _cases(me, store, backend, harness, dist)
    with me.lock:  # from here on nothing the watchdog sees ends the job
        me.ending, me.phase, me.state = True, "done", "finished"
    me.current = len(job.cases)
    me.deadline = float("inf")
    me.save()
    store._store.set(f"bye/{me.rank}", "1")
    if me.rank == 0:
        result = me.finish_outputs()
        try:  # the store lives in this process: let the others read the last verdict first
            store._store.wait([f"bye/{r}" for r in range(me.world)], timedelta(seconds=30))
        except RuntimeError:
            pass
    else:
        result = me.conformance()
    # end the threads that hold sockets before the interpreter does (a running C++ thread at exit aborts)
    watchdog.stop.set()
    watchdog.join(timeout=10)
    dist.destroy_process_group()
    return result


def _cases(me: Rank, store, backend, harness, dist) -> None:
    """Run, post, judge (rank 0) and record every case from ``me.job.start`` on (module text)."""
    from .collectives import COLLECTIVES
    from .rank import _attempt, _method, _prepare
    from .tensors import to_numpy

    job, plan = me.job, {"device": me.job.spec.device}
    settings = runner.Settings(job.spec, me.world, job.cases, job.timeout, "external", timing=job.timing,
                               expect_bits=job.expect_bits)
    judge_dir = tempfile.mkdtemp(prefix="collspec-job-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) \
        if me.rank == 0 else None
    for index in range(job.start, len(job.cases)):
        case = job.cases[index]
        me.current, me.deadline = index, time.monotonic() + job.timeout
        call, status, reason = _method(backend, COLLECTIVES[case.collective], case, me.world)
        done = {"status": status, "reason": reason}
        payload = b""
        if call is not None:
            layout, tensors, input_view, output_view = _prepare(case, me.world, me.rank, job.spec.device)
            if job.timing:
                done = _timed(call, backend, input_view, output_view, case, plan, job.timing, harness, dist)
            else:
                failure = _attempt(lambda: call(backend, input_view, output_view, case), plan)
                if failure is None:
                    payload = b"".join(to_numpy(tensors[name]).tobytes() for name in layout.storages)
                    done = {"status": "ok"}
                else:
                    done = {"status": failure[0], "reason": failure[1]}
        if payload:
            store.set(f"c{index}/buf/{me.rank}", payload)
        store.set(f"c{index}/done/{me.rank}", json.dumps(done))
        if me.rank == 0:
            verdict = _judge(me, store, settings, index, judge_dir)
            store.set(f"c{index}/verdict", json.dumps(report_merge.outcome_to_json(verdict)))
        else:
            verdict = _verdict(json.loads(_wait(store, f"c{index}/verdict")), job.cases)
        me.record(verdict)
    if judge_dir:
        os.rmdir(judge_dir)


def _timed(call, backend, input_view, output_view, case, plan, timing, harness, dist) -> dict:
    """nccl-tests' loop, as :func:`.rank._time_cases` runs it: warm-up, a barrier, ``iters`` timed calls."""
    from .rank import _attempt

    failure = _attempt(lambda: [call(backend, input_view, output_view, case) for _ in range(timing["warmup"])], plan)
    dist.barrier(group=harness)
    began = time.perf_counter()
    failure = failure or _attempt(lambda: [call(backend, input_view, output_view, case) for _ in range(timing["iters"])], plan)
    seconds = (time.perf_counter() - began) / timing["iters"]
    return {"status": failure[0], "reason": failure[1]} if failure else {"status": "ok", "seconds": seconds}


def _wait(store, key: str) -> bytes:
    """Poll for ``key`` (the watchdog holds the deadline and ends the process past it)."""
    pause = 0.0005
    while not store.check([key]):
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return store.get(key)


def _judge(me: Rank, store, settings: runner.Settings, index: int, judge_dir: str):
    """Rank 0: every rank's status and bits for case ``index``, judged as the coordinator judges."""
    dones = {}
    for rank in range(me.world):
        dones[rank] = json.loads(_wait(store, f"c{index}/done/{rank}"))
        if dones[rank]["status"] == "ok" and not settings.timing:
            with open(events.buffers_path(judge_dir, index, rank), "wb") as handle:
                handle.write(store.get(f"c{index}/buf/{rank}"))
            store.delete_key(f"c{index}/buf/{rank}")
    for rank in range(me.world):
        store.delete_key(f"c{index}/done/{rank}")
    if index > 0:
        store.delete_key(f"c{index - 1}/verdict")  # every rank has read it: they all posted case ``index``
    outcome = runner._complete(settings, judge_dir, index, dones)
    return report_merge.restate(me.mark(outcome), me.table)
