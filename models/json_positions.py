"""Where each value of a JSON document starts: its line and column.

``json`` gives values, not places. :func:`positions` walks the same text
token by token and returns, for the JSON paths asked for, the line and
column (both from 1; the column counts characters, that is Unicode code
points) of the value's first character. Paths are written as the MSCCL++
plan reader writes them: ``gpus[1].threadblocks[0].ops[12]``; the root is
the empty path. A key given twice in one object resolves to its last
occurrence, as :func:`json.loads` does.

>>> text = '{"steps": [\\n  [{"src": 0}],\\n  {"transfers": [{"src": 1}]}\\n]}'
>>> positions(text, {"", "steps[0][0]", "steps[1].transfers[0]", "steps[5]"})
{'': (1, 1), 'steps[0][0]': (2, 4), 'steps[1].transfers[0]': (3, 18)}

The text must be valid JSON (the format's reader has accepted it); keys
holding ``.``, ``[`` or ``]`` are written as they are, so such a path may
be ambiguous.
"""

from __future__ import annotations

import re
from bisect import bisect_right

#: one token: a structural character, a string, or a bare literal (number, true, false, null)
_TOKEN = re.compile(r'[{}\[\]:,]|"(?:[^"\\]|\\.)*"|[^\s{}\[\]:,"]+')


def positions(text: str, wanted: set[str]) -> dict[str, tuple[int, int]]:
    """(line, column) of the value at each path of ``wanted`` that the
    document has; paths it lacks are left out."""
    import json

    if not wanted:
        return {}
    breaks = [m.start() for m in re.finditer("\n", text)]
    found: dict[str, int] = {}
    # each open container: [path, is_object, next index or pending key]
    stack: list[list] = []
    path_here = ""
    expect_key = False
    for match in _TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if stack and stack[-1][1] and expect_key:
            if first == '"':
                stack[-1][2] = json.loads(token)
                expect_key = False
                continue
            if first == "}":
                stack.pop()
                expect_key = False
            continue  # ',' before a key
        if first in ",:":
            if first == "," and stack and stack[-1][1]:
                expect_key = True
            continue
        if first in "]}":
            stack.pop()
            continue
        # a value starts here
        if stack:
            parent, is_object, slot = stack[-1]
            if is_object:
                path_here = f"{parent}.{slot}" if parent else slot
            else:
                path_here = f"{parent}[{slot}]"
                stack[-1][2] = slot + 1
        else:
            path_here = ""
        if path_here in wanted:
            found[path_here] = match.start()
        if first == "{":
            stack.append([path_here, True, None])
            expect_key = True
        elif first == "[":
            stack.append([path_here, False, 0])
    out = {}
    for path, offset in found.items():
        line = bisect_right(breaks, offset - 1)  # newlines before the offset
        start = breaks[line - 1] + 1 if line else 0
        out[path] = (line + 1, offset - start + 1)
    return out
