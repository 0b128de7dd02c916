"""Where in its file each violation is: the line and column of the
offending element, for reports that point into files (SARIF).

- MSCCL XML: the ``<step>`` a violation names (its ``line`` and ``column``
  details, recorded by the parser); a lint warning, the first place it
  lists (its line); anything about the whole program, the ``<algo>``.
- MSCCL++ plans: the op (or other element) at the violation's ``path``,
  found in the file's text by :mod:`collspec.models.json_positions`;
  anything about the whole plan, the top-level object.
- Schedule files: the transfer the violation names (in its ``step``, the
  first transfer whose ``src``, ``dst`` and chunks agree with what the
  violation states), else the step; anything about the whole schedule
  (ownership, warnings about every rank), the top-level object.

Each location is ``(line, column)``, both from 1, column in characters;
either is None where it is not known (a lint place gives only its line).
"""

from __future__ import annotations

#: kinds whose ``chunk`` detail names the written (destination) cell
_CELL_KINDS = ("race", "missing-contribution", "duplicate-contribution", "postcondition")


def locate(path: str, kind: str, subject, violations) -> list[tuple[int | None, int | None]]:
    """One ``(line, column)`` per violation, in order. ``kind`` and
    ``subject`` as :data:`collspec.commands.check.FORMATS` and the
    format's reader give them (an MSCCL program, an MSCCL++ plan, a
    schedule)."""
    if kind == "msccl":
        return [_msccl(subject, v) for v in violations]
    from .models.json_positions import positions

    text = _text(path)
    if kind == "mscclpp":
        paths = [v.details.get("path") for v in violations]
    else:
        steps = _steps_of(text)
        paths = [_transfer_path(subject, steps, v) for v in violations]
    places = positions(text, {p for p in paths if p is not None} | {""})
    root = places.get("", (None, None))
    return [places.get(p, root) for p in paths]


def _msccl(program, violation) -> tuple[int | None, int | None]:
    details = violation.details
    if "line" in details:
        return details["line"], details.get("column")
    where = details.get("where") or []
    if where and "line" in where[0]:
        return where[0]["line"], where[0].get("column")
    return program.algo_line, None


def _text(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


def _steps_of(text: str) -> list:
    """The file's ``steps`` as written (a list of transfers, or an object
    holding ``transfers``)."""
    import json

    return json.loads(text).get("steps", [])


def _transfer_path(schedule, steps: list, violation) -> str | None:
    s = violation.step
    if s is None or not 0 <= s < len(steps):
        return None
    step_path = f"steps[{s}]"
    listed = isinstance(steps[s], dict)
    at = f"{step_path}.transfers" if listed else step_path
    step = schedule.steps[s]
    details = violation.details
    wanted = {"src": violation.src, "dst": violation.dst, "src_chunk": details.get("src_chunk"), "dst_chunk": details.get("dst_chunk")}
    if violation.kind in _CELL_KINDS and "chunk" in details:
        wanted["dst_chunk"] = details["chunk"]
    for j in range(len(step)):
        if all(value is None or int(getattr(step, name)[j]) == value for name, value in wanted.items()):
            return f"{at}[{j}]"
    return step_path


def locate_error(path: str, message: str) -> tuple[int | None, int | None]:
    """Where a format error (one line, as the readers write them) points:
    ``FILE:LINE:`` (MSCCL), ``line L column C`` (JSON syntax), a JSON path
    (``FILE: gpus[0].threadblocks[1]...:``, MSCCL++) or ``step S, transfer
    T`` (schedule files) found in the file's text; (None, None) if none."""
    import re

    from .models.json_positions import positions

    rest = message[len(path) :] if message.startswith(path) else message
    if (m := re.match(r":(\d+):", rest)) and int(m[1]) > 0:
        return int(m[1]), None
    if m := re.search(r"\bline (\d+),? column (\d+)", rest):
        return int(m[1]), int(m[2])
    wanted = []
    if m := re.match(r": step (\d+)(?:, transfer (\d+))?:", rest):
        step = f"steps[{m[1]}]"
        wanted = [f"{step}[{m[2]}]", f"{step}.transfers[{m[2]}]"] if m[2] else []
        wanted.append(step)
    elif m := re.match(r": ([A-Za-z_]\w*(?:\[\d+\]|\.\w+)*):", rest):
        path_in_file = m[1]
        while path_in_file:
            wanted.append(path_in_file)
            path_in_file = re.sub(r"(\[\d+\]|\.?\w+)$", "", path_in_file)
    if not wanted:
        return None, None
    try:
        places = positions(_text(path), set(wanted))
    except (OSError, ValueError):
        return None, None
    for candidate in wanted:  # the most precise first
        if candidate in places:
            return places[candidate]
    return None, None
