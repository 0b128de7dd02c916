"""The JSON schedule format of contracts.md: load with validation, save.

Loading never trusts the file: every malformed part raises
:class:`ScheduleFormatError` naming the file, the step, the transfer and the
field, which the command line turns into exit status 2.

>>> text = '{"collective": "allreduce", "ranks": 2, "chunks": 1, "steps": [[{"src": 0, "dst": 1, "chunk": 0, "op": "reduce"}]]}'
>>> loads(text).transfers
1
>>> loads(text.replace('"dst": 1', '"dst": 2'), "s.json")
Traceback (most recent call last):
...
collspec.models.schedule_json.ScheduleFormatError: s.json: step 0, transfer 0: field 'dst' = 2 is out of range 0..1
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..spec.collectives import collective_name
from ..spec.errors import SpecError
from .layout import ScheduleError, owner_problem
from .schedule import OP_CODES, OP_NAMES, Schedule, Step

MAX_RANKS = 1 << 16
MAX_CHUNKS = 1 << 20
MAX_TRANSFERS = 50_000_000
#: steps: a ring over MAX_RANKS ranks has 2 x (65536 - 1); each step costs the checker about 0.1 ms (docs/limits.md)
MAX_STEPS = 1 << 17
MAX_FILE_BYTES = 2 << 30

_TRANSFER_KEYS = {"src", "dst", "chunk", "src_chunk", "dst_chunk", "op"}
_TOP_KEYS = {"collective", "ranks", "chunks", "steps", "name", "owner", "root", "link_capacity", "channels"}
_CHANNEL_KEYS = {"ring", "tree", "count"}
_STEP_KEYS = {"transfers", "name", "phase"}


class ScheduleFormatError(ScheduleError):
    """A schedule file that is not valid (exit 2). Says where and what."""


def load(path: str) -> Schedule:
    """Read a schedule file (contracts.md's JSON format)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ScheduleFormatError(f"{path}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit")
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise ScheduleFormatError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ScheduleFormatError(f"{path}: not UTF-8 text") from None
    return loads(text, path)


def loads(text: str, source: str = "<schedule>") -> Schedule:
    """Parse and validate a schedule from JSON text."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ScheduleFormatError(f"{source}: not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None
    return from_json(data, source)


def from_json(data: Any, source: str = "<schedule>") -> Schedule:
    """Validate a parsed JSON document and build the schedule."""

    def fail(message: str, where: str = "") -> ScheduleFormatError:
        return ScheduleFormatError(f"{source}: {where + ': ' if where else ''}{message}")

    if not isinstance(data, dict):
        raise fail(f"the top level must be an object, got {type(data).__name__}")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise fail(f"unknown field {unknown[0]!r}; expected {', '.join(sorted(_TOP_KEYS))}")
    for key in ("collective", "ranks", "chunks", "steps"):
        if key not in data:
            raise fail(f"missing field {key!r}")
    if not isinstance(data["collective"], str):
        raise fail("field 'collective' must be a string")
    try:
        collective = collective_name(data["collective"])
    except SpecError as error:
        raise fail(str(error)) from None
    ranks = _integer(data["ranks"], "ranks", 1, MAX_RANKS, fail)
    chunks = _integer(data["chunks"], "chunks", 1, MAX_CHUNKS, fail)
    root = _integer(data.get("root", 0), "root", 0, ranks - 1, fail)
    capacity = _integer(data.get("link_capacity", 1), "link_capacity", 1, MAX_CHUNKS, fail)
    owner = _owner(data.get("owner"), collective, ranks, chunks, fail)
    name = data.get("name", "")
    if not isinstance(name, str):
        raise fail("field 'name' must be a string")
    channels = _channels(data.get("channels"), ranks, fail)
    if not isinstance(data["steps"], list):
        raise fail(f"field 'steps' must be a list of steps, got {type(data['steps']).__name__}")
    if len(data["steps"]) > MAX_STEPS:
        raise fail(f"{len(data['steps'])} steps, more than the {MAX_STEPS} collspec checks (docs/limits.md)")

    steps = []
    total = 0
    for s, raw in enumerate(data["steps"]):
        transfers, phase, step_name = _step(raw, s, fail)
        total += len(transfers)
        if total > MAX_TRANSFERS:
            raise fail(f"more than {MAX_TRANSFERS} transfers")
        columns = {k: np.empty(len(transfers), dtype=np.int64) for k in ("src", "dst", "src_chunk", "dst_chunk", "op")}
        for t, transfer in enumerate(transfers):
            where = f"step {s}, transfer {t}"
            _object(transfer, "transfer", _TRANSFER_KEYS, "src, dst, chunk (or src_chunk and dst_chunk), op", fail, where)
            for key in ("src", "dst", "op"):
                if key not in transfer:
                    raise fail(f"missing field {key!r}", where)
            columns["src"][t] = _integer(transfer["src"], "src", 0, ranks - 1, fail, where)
            columns["dst"][t] = _integer(transfer["dst"], "dst", 0, ranks - 1, fail, where)
            for side in ("src_chunk", "dst_chunk"):
                if side in transfer:
                    value = transfer[side]
                elif "chunk" in transfer:
                    value = transfer["chunk"]
                else:
                    raise fail(f"missing field {side!r} (or 'chunk')", where)
                columns[side][t] = _integer(value, side if side in transfer else "chunk", 0, chunks - 1, fail, where)
            if not isinstance(transfer["op"], str) or transfer["op"] not in OP_CODES:
                raise fail(f"field 'op' = {transfer['op']!r}; use 'reduce' or 'copy'", where)
            columns["op"][t] = OP_CODES[transfer["op"]]
        steps.append(Step.of(columns["src"], columns["dst"], columns["src_chunk"], columns["dst_chunk"], columns["op"], phase, step_name))
    schedule = Schedule(collective, ranks, chunks, tuple(steps), name=name or os.path.basename(source), owner=owner, root=root, link_capacity=capacity)
    try:
        schedule.layout
    except ScheduleError as error:
        raise fail(str(error)) from None
    if channels is not None:
        schedule.meta["channel_table"] = channels
    return schedule



def _object(entry, what: str, keys, expected: str, fail, where: str) -> None:
    """Refuse ``entry`` unless it is an object whose fields are all in ``keys``
    (the message names the first unknown field and the ``expected`` ones)."""
    if not isinstance(entry, dict):
        raise fail(f"a {what} must be an object, got {type(entry).__name__}", where)
    extra = sorted(set(entry) - keys)
    if extra:
        raise fail(f"unknown field {extra[0]!r}; expected {expected}", where)

def _channels(raw, ranks: int, fail) -> list[dict] | None:
    """The optional ``channels`` list NCCL models write: per channel its ring
    (a permutation of the ranks) or tree (0 or 1), and its element count.
    Informative: the steps alone are what is checked."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise fail(f"field 'channels' must be a list of channels, got {type(raw).__name__}")
    out = []
    for c, entry in enumerate(raw):
        where = f"channel {c}"
        _object(entry, "channel", _CHANNEL_KEYS, "ring or tree, count", fail, where)
        if "count" not in entry:
            raise fail("missing field 'count'", where)
        item = {"count": _integer(entry["count"], "count", 0, MAX_TRANSFERS, fail, where)}
        if "ring" in entry:
            ring = entry["ring"]
            if not isinstance(ring, list) or sorted(v for v in ring if isinstance(v, int) and not isinstance(v, bool)) != list(range(ranks)):
                raise fail(f"field 'ring' must be a permutation of the ranks 0..{ranks - 1}", where)
            item["ring"] = list(ring)
        if "tree" in entry:
            item["tree"] = _integer(entry["tree"], "tree", 0, 1, fail, where)
        out.append(item)
    return out


def _integer(value: Any, field: str, low: int, high: int, fail, where: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        shown = json.dumps(value)
        raise fail(f"field {field!r} must be an integer, got {shown if len(shown) <= 60 else shown[:57] + '...'}", where)
    if not low <= value <= high:
        raise fail(f"field {field!r} = {value} is out of range {low}..{high}", where)
    return value


def _step(raw: Any, s: int, fail) -> tuple[list, str | None, str | None]:
    where = f"step {s}"
    if isinstance(raw, list):
        return raw, None, None
    if not isinstance(raw, dict):
        raise fail(f"a step must be a list of transfers or an object with 'transfers', got {type(raw).__name__}", where)
    extra = sorted(set(raw) - _STEP_KEYS)
    if extra:
        raise fail(f"unknown field {extra[0]!r}; expected transfers, name, phase", where)
    if not isinstance(raw.get("transfers"), list):
        raise fail("field 'transfers' must be a list", where)
    for key in ("name", "phase"):
        if key in raw and not isinstance(raw[key], str):
            raise fail(f"field {key!r} must be a string", where)
    return raw["transfers"], raw.get("phase"), raw.get("name")


def _owner(raw: Any, collective: str, ranks: int, chunks: int, fail) -> tuple[tuple[int, ...], ...] | None:
    if raw is None:
        return None
    if collective != "reduce_scatter":
        raise fail(f"field 'owner' applies to reduce_scatter only, not {collective}")
    if not isinstance(raw, list) or len(raw) != ranks:
        raise fail(f"field 'owner' must list one chunk (or a list of chunks) per rank: {ranks} entries")
    owner = []
    for r, entry in enumerate(raw):
        entries = entry if isinstance(entry, list) else [entry]
        owner.append(tuple(_integer(c, "owner", 0, chunks - 1, fail, f"owner of rank {r}") for c in entries))
    problem = owner_problem(owner, ranks, chunks)
    if problem:
        raise fail(problem)
    return tuple(owner)


def to_json(schedule: Schedule) -> dict:
    """The schedule as a JSON document of contracts.md's format."""
    steps = []
    for step in schedule.steps:
        transfers = []
        for i in range(len(step)):
            t = step.transfer(i)
            if t["src_chunk"] == t["dst_chunk"]:
                t = {"src": t["src"], "dst": t["dst"], "chunk": t["src_chunk"], "op": t["op"]}
            transfers.append(t)
        if step.phase is None and step.name is None:
            steps.append(transfers)
        else:
            entry: dict[str, Any] = {"transfers": transfers}
            if step.name is not None:
                entry["name"] = step.name
            if step.phase is not None:
                entry["phase"] = step.phase
            steps.append(entry)
    out: dict[str, Any] = {"collective": schedule.collective, "ranks": schedule.ranks, "chunks": schedule.chunks}
    if schedule.name:
        out["name"] = schedule.name
    if schedule.owner is not None:
        out["owner"] = [list(o) for o in schedule.owner]
    if schedule.collective in ("broadcast", "reduce"):
        out["root"] = schedule.root
    if schedule.link_capacity != 1:
        out["link_capacity"] = schedule.link_capacity
    if schedule.meta and schedule.meta.get("channel_table"):
        out["channels"] = schedule.meta["channel_table"]
    out["steps"] = steps
    return out


def dumps(schedule: Schedule) -> str:
    return json.dumps(to_json(schedule), indent=1)


__all__ = ["ScheduleFormatError", "load", "loads", "from_json", "to_json", "dumps", "OP_NAMES"]
