"""Read the elements of a plainly written MSCCL file from its bytes, with
numpy, instead of one Python call per element.

:mod:`.parse` reads a file with expat's element handlers: per ``<step>``
a Python call and a dict of ten new strings, about 40% of checking a
32k-step file. Files as MSCCLang and collspec write them are plain:
ASCII, no comments, declarations, processing instructions, references,
tabs, carriage returns or apostrophes, a newline never inside a tag, and
every ``<step>`` spelled like the first one but for its values. Such a
file is still parsed by the defused expat parser (which refuses what it
refuses and checks that the XML is well formed) but without element
handlers; then every ``<`` opens a tag, every ``>`` closes one, and an
attribute value is the text between two quotes, exactly as expat reads it.

:func:`scan` returns None for anything else, and for any file that breaks
the nesting rules: :mod:`.parse` then reads it with the handlers, which
report problems in document order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: bytes that make a file not plain (see the module text), and what may not follow a '<'
NOT_PLAIN = (b"&", b"'", b"\r", b"\t")
NOT_A_TAG = (ord("!"), ord("?"))
#: inside a tag: the text between an attribute's value and the next one's
_BETWEEN = re.compile(r" ([^ =]+)=")
#: inside a tag: the text after the last value
_END = re.compile(r" ?/?>")


@dataclass
class Scanned:
    """Elements of a plain file: (attributes, line) of ``<algo>`` and of each
    ``<gpu>`` and ``<tb>``; per ``<tb>``, the index of its ``<gpu>`` and how
    many ``<step>``s came before it; per ``<step>``, its line and the
    column of its ``<`` (from 1; the file is ASCII, so bytes); per step
    attribute, every step's value joined by commas."""

    algo: tuple[dict, int]
    gpus: list[tuple[dict, int]]
    tbs: list[tuple[dict, int]]
    tb_gpu: np.ndarray
    tb_first_step: np.ndarray
    step_lines: np.ndarray
    step_columns: np.ndarray
    step_values: dict[str, str]


def scan(data: bytes, parse, nesting: tuple[str, ...]) -> Scanned | None:
    """The elements of ``data`` if it is plain and well formed (``parse``
    runs an expat parser without element handlers over it and returns
    False where it fails), else None. ``nesting``: element names by depth."""
    if not data.isascii() or any(mark in data for mark in NOT_PLAIN):
        return None
    text = np.frombuffer(data, dtype=np.uint8)
    opens = np.flatnonzero(text == ord("<"))
    if np.any(np.isin(text[np.minimum(opens + 1, text.size - 1)], NOT_A_TAG)) or not parse(data):
        return None  # a comment, declaration or processing instruction; XML that is not well formed
    closes = np.flatnonzero(text == ord(">"))
    newlines = np.flatnonzero(text == ord("\n"))
    lines = np.searchsorted(newlines, opens)
    if opens.size != closes.size or np.any(lines != np.searchsorted(newlines, closes)):
        return None  # a '>' outside a tag's end, or a newline inside a tag
    lines += 1
    end = text[opens + 1] == ord("/")
    empty = text[closes - 1] == ord("/")
    change = np.where(end, -1, np.where(empty, 0, 1))
    depth = np.cumsum(change) - change  # of each element, at its start tag
    starts = [np.flatnonzero(~end & (depth == d)) for d in range(len(nesting))]
    if sum(len(s) for s in starts) != np.count_nonzero(~end) or not np.all(empty[starts[-1]]):
        return None  # an element inside a <step>
    if not all(_named(text, opens[s], name) for s, name in zip(starts, nesting)):
        return None
    tags = [[_attributes(data[opens[k] : closes[k] + 1].decode(), name) for k in s.tolist()] for s, name in zip(starts[:-1], nesting)]
    if any(tag is None for level in tags for tag in level):
        return None
    steps = starts[-1]
    values = _step_values(text, opens[steps], closes[steps], nesting[-1]) if steps.size else None
    if values is None:
        return None
    algo, gpus, tbs = ([(dict(zip(*tag)), int(lines[k])) for tag, k in zip(level, s.tolist())] for level, s in zip(tags, starts))
    return Scanned(
        algo=algo[0],
        gpus=gpus,
        tbs=tbs,
        tb_gpu=np.searchsorted(starts[1], starts[2]) - 1,
        tb_first_step=np.searchsorted(steps, starts[2]),
        step_lines=lines[steps],
        step_columns=opens[steps] - np.r_[-1, newlines][lines[steps] - 1],
        step_values=values,
    )


def _named(text: np.ndarray, opens: np.ndarray, name: str) -> bool:
    """Do the tags at ``opens`` all open a ``name`` element?"""
    expected = np.frombuffer(name.encode(), dtype=np.uint8)
    spelled = text[np.minimum(opens[:, None] + np.arange(1, expected.size + 2), text.size - 1)]
    return bool(np.all(spelled[:, :-1] == expected) and np.all(np.isin(spelled[:, -1], list(b" />"))))


def _attributes(tag: str, name: str) -> tuple[list[str], list[str]] | None:
    """(names, values) of the attributes of a plain tag, else None."""
    parts = tag[len(name) + 1 :].split('"')
    names = [_BETWEEN.fullmatch(gap) for gap in parts[:-1:2]]
    if not _END.fullmatch(parts[-1]) or None in names:
        return None
    names = [match[1] for match in names]
    if any(":" in n or n.startswith("xmlns") for n in names):
        return None  # namespaces: the defused parser reads them differently
    return names, parts[1::2]


def _step_values(text: np.ndarray, opens: np.ndarray, closes: np.ndarray, name: str) -> dict[str, str] | None:
    """Every step's value of each attribute, joined by commas, when every
    step tag is spelled like the first one but for its values, else None."""
    first = text[opens[0] : closes[0] + 1].tobytes().decode()
    spelled = _attributes(first, name)
    if spelled is None:
        return None
    names, _ = spelled
    gaps = [gap.encode() for gap in first.split('"')[0::2]]
    quotes = np.flatnonzero(text == ord('"'))
    low = np.searchsorted(quotes, opens)
    if np.any(np.searchsorted(quotes, closes) - low != 2 * len(names)):
        return None
    at = quotes[low[:, None] + np.arange(2 * len(names))]  # [step, quote]
    # the text around the values: from '<' to the first quote, between values, to '>'
    for k, gap in enumerate(gaps):
        start = opens if k == 0 else at[:, 2 * k - 1] + 1
        stop = closes + 1 if k == len(names) else at[:, 2 * k]
        if np.any(stop - start != len(gap)):
            return None
        if not np.all(np.lib.stride_tricks.sliding_window_view(text, len(gap))[start] == np.frombuffer(gap, np.uint8)):
            return None
    return {n: _joined(text, at[:, 2 * k] + 1, at[:, 2 * k + 1]) for k, n in enumerate(names)}


def _joined(text: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> str:
    """The spans ``text[starts[k]:stops[k]]`` joined by commas."""
    size = stops - starts + 1  # each span and the comma after it
    first = np.cumsum(size) - size
    joined = text[np.repeat(starts - first, size) + np.arange(int(size.sum()))]
    joined[first + size - 1] = ord(",")
    return joined[:-1].tobytes().decode("ascii")
