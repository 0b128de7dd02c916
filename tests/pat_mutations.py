"""Bugs planted in nccl-pat's programs, shared by the tests of its rows."""

from __future__ import annotations

import dataclasses

from collspec.models import indexing as ix


def last_message_again(made, when):
    """``made`` with one message more where ``when(n)`` holds: the last
    message sent again (a step too many); elsewhere ``made`` unchanged."""

    def steps(n):
        return made.steps(n) + ix.where(when(n), 1, 0)

    def transfer(n, s, r, j):
        last = made.steps(n) - 1
        return made.transfer(n, ix.where(s > last, last, s), r, j)

    return dataclasses.replace(made, steps=steps, transfer=transfer)
