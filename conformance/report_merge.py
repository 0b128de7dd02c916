"""Partial reports of a job's ranks, and the one report made from them.

Under ``--launcher external`` every rank keeps its own *partial report*,
``PATH.rank<K>.json`` beside ``--json PATH``, rewritten atomically as cases
finish: the plan, the rank table (:mod:`.where`), every verdict the rank
has seen, and its ``state``: ``running`` (the rank has not ended: if the job
is over, it died without a word), ``finished`` or ``aborted`` (a hang, a
dead peer, a signal: ``ended`` says which). Rank 0 writes the merged
``--json``/``--junit`` from its own; :func:`merge` makes the same report
from any set of partials (``collspec report merge``), which is how a job
whose rank 0 died still gets one:

- every case takes the first verdict any partial holds;
- a rank whose partial is still ``running`` died at the case after its
  last verdict: that case is a ``crash`` naming it and its host, unless a
  survivor's record already judged it;
- cases nobody judged are ``not-run``, with the reason.

:func:`resume_point` reads a merged report (or a partial) for ``--resume``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from ..report import write_json
from ..spec import Violation
from ..spec.errors import CollspecError
from . import runner, where
from .cases import Case
from .conform import Conformance
from .resolve import BackendSpec

FORMAT = "conform-partial"


def partial_path(json_path: str, rank: int) -> str:
    """``out.json`` -> ``out.json.rank3.json``."""
    return f"{json_path}.rank{rank}.json"


def violation_from_json(data: dict) -> Violation:
    rest = {k: v for k, v in data.items() if k not in ("kind", "severity", "message", "step", "src", "dst")}
    return Violation(data["kind"], data["message"], data.get("step"), data.get("src"), data.get("dst"),
                     data.get("severity", "error"), rest)


def outcome_to_json(outcome: runner.Outcome) -> dict:
    return {"index": outcome.index, "case": outcome.case.id if outcome.case else None, "status": outcome.status,
            "note": outcome.note, "seconds": outcome.seconds, "digest": outcome.digest,
            "violations": [v.to_json() for v in outcome.violations]}


def outcome_from_json(data: dict, cases: list[Case]) -> runner.Outcome:
    case = cases[data["index"]] if data["case"] is not None else None
    return runner.Outcome(data["index"], case, data["status"], [violation_from_json(v) for v in data["violations"]],
                          data.get("seconds"), data.get("note", ""), data.get("digest"))


@dataclass
class JobConformance(Conformance):
    """A :class:`.conform.Conformance` of a job: its report adds the rank table,
    each case's ranks with their hosts, and the failures grouped by host."""

    table: dict = field(default_factory=dict)
    placement: dict = field(default_factory=dict)

    def by_host(self) -> list[str]:
        return where.by_host(self.violations, self.table)

    def report(self):
        report = super().report()
        ranks = [self.table[r] for r in sorted(self.table)]
        report.extra["cases"] = [{**entry, "ranks": ranks} for entry in report.extra["cases"]]
        report.extra.update(placement=self.placement, ranks=ranks, by_host=self.by_host())
        return report


def load(path: str) -> dict:
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as error:
        raise CollspecError(f"{path}: cannot read a report ({error})") from None
    if not isinstance(data, dict):
        raise CollspecError(f"{path}: not a collspec report")
    return data


def write_partial(path: str, partial: dict) -> None:
    write_json(partial, path)


def merge(partials: list[dict]) -> JobConformance:
    """One report from the partial reports of a job (module text)."""
    if not partials:
        raise CollspecError("report merge: no partial reports given")
    for data in partials:
        if data.get("command") != FORMAT:
            raise CollspecError(f"report merge: {data.get('_path', 'an input')} is not a partial report of collspec conform --launcher external")
    first = min(partials, key=lambda p: p["rank"])
    plan = [Case.from_json(c) for c in first["plan"]]
    for data in partials:
        if [c["collective"] for c in data["plan"]] != [c.collective for c in plan] or data["world_size"] != first["world_size"] \
                or data["backend"] != first["backend"]:
            raise CollspecError(f"report merge: {data.get('_path', 'rank ' + str(data['rank']))} is of another job "
                                f"(a different backend, world size or case plan)")
    table: dict[int, dict] = {}
    for data in partials:
        for entry in data["table"]:
            table.setdefault(entry["rank"], entry)
    judged: dict[int, runner.Outcome] = {}
    setup: list[runner.Outcome] = []
    for data in sorted(partials, key=lambda p: p["rank"]):
        for item in data["outcomes"]:
            outcome = outcome_from_json(item, plan)
            if outcome.case is None:
                if not setup:
                    setup.append(outcome)
            elif outcome.status != "not-run" and (outcome.index not in judged or _signalled(judged[outcome.index])):
                judged[outcome.index] = outcome  # a rank's own "ended by SIGTERM" yields to what another saw
    _died(partials, table, plan, judged)
    ended = next((p["ended"] for p in sorted(partials, key=lambda p: p["rank"]) if p.get("ended")), "")
    outcomes = setup + [judged.get(i) or runner.Outcome(i, case, "not-run", note=_not_run(ended))
                        for i, case in enumerate(plan)]
    seconds = max((p.get("seconds", 0.0) for p in partials), default=0.0)
    result = runner.Result(outcomes, 0, bool(first["placement"].get("loopback_only")), seconds)
    spec = BackendSpec(first["subject"], first["backend"], first.get("device", "cpu"))
    settings = {**first["settings"], "ranks_reported": sorted(p["rank"] for p in partials)}
    return JobConformance(spec, first["world_size"], first["settings"].get("mode", "quick"), outcomes, result, settings,
                          table=table, placement=first["placement"])


def _not_run(ended: str) -> str:
    return f"not run: {ended}; start the cases left with --resume REPORT" if ended else "not run: the job ended before it"


def _died(partials: list[dict], table: dict, plan: list[Case], judged: dict) -> None:
    """A rank whose partial is still ``running`` died at the case after its
    last verdict: judge that case a ``crash`` naming it, unless it is judged."""
    dead: dict[int, list[int]] = {}
    for data in partials:
        if data["state"] == "running":
            seen = [item["index"] for item in data["outcomes"] if item["case"] is not None]
            at = max(seen) + 1 if seen else data["settings"].get("resumed_from", {}).get("case", 0)
            dead.setdefault(at, []).append(data["rank"])
    for index, ranks in sorted(dead.items()):
        if index >= len(plan) or (index in judged and not _signalled(judged[index])):
            continue
        case = plan[index]
        then = ""
        if index in judged:  # the launcher ended the others when these died
            ended = sorted({r for v in judged[index].violations for r in v.details.get("ranks", [])})
            then = f"; then rank(s) {', '.join(map(str, ended))} were ended by {judged[index].violations[0].details.get('how')}"
        violation = Violation(
            "crash",
            f"{case.id}: rank(s) {', '.join(map(str, ranks))} ended during this case without a record (killed or lost){then}",
            details={**runner.case_details(case), "ranks": ranks, "how": "no record"},
        )
        judged[index] = runner.Outcome(index, case, "crash", [where.annotate(violation, table)])


def _signalled(outcome: runner.Outcome) -> bool:
    """Whether the outcome is only a rank's record of being ended by a signal."""
    return bool(outcome.violations) and all(v.details.get("by") == "signal" for v in outcome.violations)


def resume_point(path: str, plan: list[Case]) -> tuple[int, list[runner.Outcome], dict]:
    """From a merged report or a partial: (the first case to run, the outcomes
    before it, the earlier job's rank table). Bad input if its cases are not this plan's."""
    data = load(path)
    if data.get("command") == FORMAT:
        data = merge([data]).report().to_json()
    if data.get("command") != "conform" or not isinstance(data.get("cases"), list):
        raise CollspecError(f"--resume {path}: not a report of collspec conform")
    ids = [entry["case"] for entry in data["cases"]]
    if ids != [case.id for case in plan]:
        raise CollspecError(f"--resume {path}: its {len(ids)} cases are not the {len(plan)} cases of these options; "
                            "give the same --backend, --world-size and filters as the job it reports")
    finished = [i for i, entry in enumerate(data["cases"]) if entry["status"] != "not-run"]
    start = finished[-1] + 1 if finished else 0
    by_case: dict[str, list[Violation]] = {}
    for item in data.get("violations", []):
        if item.get("case") is not None:
            by_case.setdefault(item["case"], []).append(violation_from_json(item))
    earlier = [runner.Outcome(i, plan[i], entry["status"], by_case.get(entry["case"], []), note=entry.get("reason", ""))
               for i, entry in enumerate(data["cases"][:start])]
    table = {entry["rank"]: entry for entry in data.get("ranks", [])}
    return start, earlier, table


def write_outputs(conformance: JobConformance, json_path: str | None, junit_path: str | None) -> None:
    from .junit import write

    if json_path:
        write_json(conformance.report().to_json(), json_path)
    if junit_path:
        write(conformance, junit_path)


def with_partials(paths: list[str]) -> list[dict]:
    out = []
    for path in paths:
        data = load(path)
        data["_path"] = path
        out.append(data)
    return out


def restate(outcome: runner.Outcome, table: dict) -> runner.Outcome:
    """``outcome`` with every violation naming its ranks' hosts."""
    return replace(outcome, violations=[where.annotate(v, table) for v in outcome.violations])
