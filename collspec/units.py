"""Byte sizes on the command line: ``4K``, ``64M``, ``60GB``, ``1.5GiB``.

K, M, G, T and KiB, MiB, GiB, TiB are binary (powers of 1024, as nccl-tests
reads ``-b 8 -e 128M``); KB, MB, GB, TB are decimal (powers of 1000, as in
"60 GB of gradients").

>>> parse_size("4K"), parse_size("60GB"), parse_size("1.5KiB")
(4096, 60000000000, 1536)
>>> format_size(120e9), format_size(116.25e9), format_size(64 * 2**20)
('120 GB', '116.2 GB', '64 MiB')
"""

from __future__ import annotations

import re

from .spec.errors import CollspecError

_BINARY = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_DECIMAL = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def parse_size(text: str) -> int:
    """A byte count from text; raises CollspecError with a hint when malformed."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(i?B)?\s*", str(text), re.IGNORECASE)
    if not match:
        raise CollspecError(f"size {text!r} is not a byte count; write e.g. 1024, 4K, 64M, 60GB or 1.5GiB")
    number, prefix, suffix = float(match.group(1)), match.group(2).upper(), (match.group(3) or "")
    if suffix.upper() == "B" and prefix:
        factor = _DECIMAL[prefix + "B"]
    else:
        factor = _BINARY[prefix]
    value = number * factor
    if value != int(value):
        raise CollspecError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def parse_size_range(text: str) -> tuple[int, int]:
    """``MIN:MAX`` sizes (``1K:64M``); a single size means MIN = MAX."""
    low, _, high = str(text).partition(":")
    first = parse_size(low)
    last = parse_size(high) if high else first
    if last < first:
        raise CollspecError(f"size range {text!r} ends below its start")
    return first, last


def format_size(nbytes: float) -> str:
    """Decimal units for a whole number of kilobytes, else binary units."""
    decimal = nbytes >= 1000 and float(nbytes) % 1000 == 0
    units = (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)) if decimal else (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
    for unit, factor in units:
        if nbytes >= factor:
            return f"{nbytes / factor:.4g} {unit}"
    return f"{nbytes:g} B"


def format_seconds(seconds: float) -> str:
    """3.6 s, 420 ms, 30 us."""
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"
