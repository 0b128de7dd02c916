"""The JSON report every checking command writes, and how it is written.

Format (contracts.md): ``{"ok", "command", "subject", "violations",
"stats"}``; extra keys are allowed. ``ok`` is false exactly when some
violation has severity ``error``. Files are written atomically: a reader
sees the old report or the whole new one, never half of it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from .spec.errors import CollspecError
from .spec.violations import Violation


@dataclass
class Report:
    command: str
    subject: str
    violations: list[Violation] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(v.is_error for v in self.violations)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_json(self) -> dict[str, Any]:
        out = {
            "ok": self.ok,
            "command": self.command,
            "subject": self.subject,
            "violations": [v.to_json() for v in self.violations],
            "stats": self.stats,
        }
        out.update(self.extra)
        return out


def write_json(data: dict[str, Any], path: str) -> None:
    """Write ``data`` to ``path`` atomically, or to stdout when path is '-'."""
    write_text(json.dumps(data, indent=2, sort_keys=False, default=_json_default) + "\n", path)


def write_text(text: str, path: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader sees the old file or the
    whole new one), or to stdout when path is '-'. The file gets the mode an
    ordinary new file gets (0666 less the umask), not mkstemp's private 0600."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CollspecError(f"cannot write {path}: folder {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".collspec-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _json_default(value: Any) -> Any:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        np = None
    if np is not None and isinstance(value, np.generic):
        return value.item()
    if np is not None and isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def print_violations(report: Report, limit: int = 20, stream=None) -> None:
    """Human-readable summary of a report on stderr-like ``stream``."""
    stream = stream or sys.stdout
    errors = [v for v in report.violations if v.is_error]
    warnings = [v for v in report.violations if not v.is_error]
    for v in (errors + warnings)[:limit]:
        print(f"  {v}", file=stream)
    hidden = len(report.violations) - limit
    if hidden > 0:
        print(f"  ... and {hidden} more (use --json for all of them)", file=stream)
    verdict = "ok" if report.ok else "FAILED"
    print(f"{report.command} {report.subject}: {verdict} ({len(errors)} errors, {len(warnings)} warnings)", file=stream)
