"""Integer attributes of MSCCL files, read as the executors read them.

msccl-executor-nccl and RCCL read every integer attribute with
``strtol(value, NULL, 0)``: leading white space is skipped, a sign is
taken, ``0x``/``0X`` starts hexadecimal, a leading ``0`` octal, anything
else decimal; reading stops at the first character that is not a digit of
that base and what follows is ignored. So ``010`` is 8, ``0x10`` is 16 and
``008`` is 0.

collspec reads a value exactly as strtol does when strtol reads all of it
(trailing white space allowed): :func:`read` returns that value. A value
strtol would stop inside (``008``, ``1_0``, ``12abc``, ``3.0``, non-ASCII
digits such as ``٣``, an empty value) or that overflows a 64-bit ``long``
is refused by name: the executor would run it as another number than its
text shows, and collspec checks the numbers the executor runs.

>>> read("010"), read("0x10"), read(" -7 "), read("+0")
(8, 16, -7, 0)
>>> problem("008")
"strtol reads '008' as 0: it stops at '8', not an octal digit (a leading 0 means octal)"
>>> problem("1_0")
"strtol reads '1_0' as 1: it stops at '_'"
"""

from __future__ import annotations

import re

#: C isspace in the "C" locale
_SPACE = " \t\n\v\f\r"
#: what strtol(s, NULL, 0) reads in full (group 1: sign, 2: digits with prefix)
_WHOLE = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)[ \t\n\v\f\r]*", re.ASCII)
#: the prefix strtol(s, NULL, 0) reads
_PREFIX = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)?", re.ASCII)
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def _value(sign: str, digits: str) -> int:
    if len(digits.lstrip("0xX")) > 24:  # past 64 bits in every base (and past int()'s digit limit)
        return 1 << 70
    if digits[:2] in ("0x", "0X"):
        value = int(digits[2:], 16)
    elif digits.startswith("0"):
        value = int(digits, 8)
    else:
        value = int(digits)
    return -value if sign == "-" else value


def read(text: str) -> int | None:
    """The value strtol(text, NULL, 0) gives when it reads all of ``text``
    and fits a 64-bit long, else None (:func:`problem` says why)."""
    match = _WHOLE.fullmatch(text)
    if match is None:
        return None
    value = _value(match[1], match[2])
    return value if LONG_MIN <= value <= LONG_MAX else None


def problem(text: str) -> str:
    """Why :func:`read` refuses ``text``, in one phrase."""
    shown = text if len(text) <= 40 else text[:40] + "..."
    match = _PREFIX.match(text)
    if match is None or match[2] is None:
        return f"{shown!r} is not an integer (strtol reads no digits in it)"
    if _WHOLE.fullmatch(text) is not None:
        return f"{shown!r} is outside the 64-bit range strtol reads"
    value = _value(match[1], match[2])
    stop = text[match.end()]
    octal = stop in "89" and match[2].startswith("0") and match[2][:2] not in ("0x", "0X")
    why = f"it stops at {stop!r}, not an octal digit (a leading 0 means octal)" if octal else f"it stops at {stop!r}"
    return f"strtol reads {shown!r} as {value}: {why}"


#: a run of values joined by commas that numpy reads as strtol does: plain
#: decimals without leading zeros that int64 holds (possessive: 4x faster)
PLAIN_DECIMALS = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(?:,-?(?:0|[1-9][0-9]{0,17}))*+", re.ASCII)
