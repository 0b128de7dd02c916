"""Errors collspec reports to a user as bad input.

Every error a user can cause derives from :class:`CollspecError`; the command
line turns one into a one-line message and exit status 2. Anything else that
escapes is a bug in collspec, not in the user's input.
"""

from __future__ import annotations


class CollspecError(Exception):
    """Bad input or usage. The message says what to change."""


class SpecError(CollspecError, ValueError):
    """A collective's precondition does not hold.

    ``rank`` and ``field`` name where: for example rank 2's ``dtype``, or the
    ``root`` argument (rank ``None``).
    """

    def __init__(self, message: str, *, rank: int | None = None, field: str | None = None):
        super().__init__(message)
        self.rank = rank
        self.field = field
