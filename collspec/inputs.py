"""Read an input file once, with a bound, and tell its format by content.

Every file ``collspec check`` and ``collspec prove --schedule`` read goes
through :func:`read_input`:

- the path is opened once and read once, at most :data:`MAX_FILE_BYTES`
  (and no more than the memory ceiling allows, see :mod:`collspec.limits`);
  a FIFO is read once, with the same bound, so a pipe fed once works;
- a character or block device, a directory or a socket (also through a
  symlink: ``schedule.json -> /dev/zero``) is refused by name;
- the format is decided by the content for any size: ``.xml`` is MSCCL XML;
  a ``.json`` file whose top level holds a ``gpus`` list is an MSCCL++
  execution plan, any other ``.json`` file a schedule (contracts.md);
- JSON is parsed once: NaN and Infinity, integers of more than 4,300
  digits and nesting deeper than :data:`MAX_JSON_DEPTH` are refused, then
  the parsed document goes to the format's reader.

Every problem raises :class:`~collspec.spec.errors.CollspecError` (exit 2)
naming the file.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from typing import Any

from .spec.errors import CollspecError

#: the largest file read (a schedule; plans and MSCCL files have their own, lower, limits)
MAX_FILE_BYTES = 2 << 30
#: JSON nesting a schedule (4 levels) or plan (about 10) never comes near
MAX_JSON_DEPTH = 64
KINDS = ("schedule", "plan", "xml")


class InputError(CollspecError):
    """An input file that cannot be read as given (exit 2)."""


@dataclass
class Input:
    """A file read once: its path, format (``schedule``, ``plan`` or
    ``xml``), bytes (XML) or parsed JSON document."""

    path: str
    kind: str
    data: bytes | None = None
    document: Any = None
    size: int = 0

    def schedule(self):
        """The file as a :class:`~collspec.models.schedule.Schedule` (an MSCCL
        program or MSCCL++ plan lowered to steps)."""
        from . import limits

        if self.kind == "schedule":
            from .models.schedule_json import from_json

            schedule = from_json(self.document, self.path)
            limits.admit_check(schedule, self.path)
            return schedule
        if self.kind == "plan":
            from .models.mscclpp.lower import schedule_of

            plan = self.program()
            if plan.collective is None:
                raise InputError(
                    f"{self.path}: collective {plan.coll_written!r} has no postcondition in collspec, so the plan has no "
                    f"result to prove; 'collspec check {self.path}' checks its synchronisation"
                )
            return schedule_of(plan)
        from .models.msccl.lower import schedule_of

        return schedule_of(self.program())

    def program(self):
        """An MSCCL :class:`~collspec.models.msccl.program.Program` or an
        MSCCL++ :class:`~collspec.models.mscclpp.plan.Plan` (read once, kept)."""
        if getattr(self, "_program", None) is None:
            if self.kind == "xml":
                from .models.msccl.parse import loads

                self._program = loads(self.data, self.path)
            elif self.kind == "plan":
                from .models.mscclpp.parse import from_document

                self._program = from_document(self.document, self.path, self.size)
            else:
                raise InputError(f"{self.path}: a schedule file, not an MSCCL program or MSCCL++ plan")
        return self._program


def read_bytes(path: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``, opened once and read once, refused when over
    ``limit`` bytes or not a regular file or FIFO."""
    try:
        info = os.stat(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    _refuse_special(path, info.st_mode)
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise InputError(f"{path}: {info.st_size} bytes is over the {limit}-byte limit for input files")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        _refuse_special(path, os.fstat(fd).st_mode)  # the path may have changed since the stat
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{path}: more than the {limit}-byte limit for input files")
    return data


def _refuse_special(path: str, mode: int) -> None:
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return
    what = (
        "a directory" if stat.S_ISDIR(mode) else "a character device" if stat.S_ISCHR(mode) else
        "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    )
    link = " (through a symbolic link)" if os.path.islink(path) else ""
    raise InputError(f"{path}: is {what}{link}; give a regular file or a pipe")


def read_input(path: str, limit: int | None = None) -> Input:
    """Read ``path`` once and decide its format (see the module text).
    ``limit``: the most bytes read (default: :data:`MAX_FILE_BYTES`, lowered
    by the memory ceiling of :mod:`collspec.limits`)."""
    from . import limits

    extension = os.path.splitext(path)[1].lower()
    if extension not in (".json", ".xml"):
        raise InputError(f"{path}: unknown schedule format {extension or '(no extension)'}; use .json or .xml")
    data = read_bytes(path, limits.file_bytes() if limit is None else limit)
    if extension == ".xml":
        return Input(path, "xml", data=data, size=len(data))
    document = parse_json(data, path)
    is_plan = isinstance(document, dict) and isinstance(document.get("gpus"), list)
    return Input(path, "plan" if is_plan else "schedule", document=document, size=len(data))


def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(data: bytes, path: str) -> Any:
    """The JSON document in ``data``, or InputError with the line and column."""
    from . import limits

    if len(data) > 1 << 20:  # before the parse: it is what takes the memory
        limits.admit(path, limits.json_bytes(data), "parsing its JSON")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start})") from None
    try:
        document = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as error:
        if b'"gpus"' in data[:4096] or b'"threadblocks"' in data[:4096]:  # a plan: its reader says where
            from .models.mscclpp.parse import loads

            loads(text, path)
        truncated = "; is the file truncated?" if error.pos >= len(text.rstrip()) else ""
        raise InputError(f"{path}: not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}{truncated}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as error:  # NaN, Infinity, an integer of over 4,300 digits
        raise InputError(f"{path}: invalid JSON: {str(error).split(';')[0]}") from None
    depth = json_depth(document)
    if depth > MAX_JSON_DEPTH:
        raise InputError(f"{path}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return document


def json_depth(document: Any, stop: int = MAX_JSON_DEPTH) -> int:
    """How deep lists and objects nest in ``document`` (a scalar: 0), or the
    first depth past ``stop``; without recursion."""
    deepest = 0
    pending = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        deepest = max(deepest, depth)
        if depth > stop:
            return depth
        pending.extend((v, depth + 1) for v in value if isinstance(v, (list, dict)))
    return deepest
