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


def one_on(field, when, original):
    """A stand-in for ``nccl_pat.pat_program`` (``original``, same
    signature) whose programs have the transfer's ``field`` (``dst``,
    ``dst_chunk``, ...) one on, mod N, where ``when(n, s, r, j)`` holds;
    elsewhere the original program."""

    def program(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
        made = original(collective, aggregation, chunk, count, post, dtype)

        def transfer(n, s, r, j):
            t = made.transfer(n, s, r, j)
            value = getattr(t, field)
            return dataclasses.replace(t, **{field: ix.where(when(n, s, r, j), ix.wrap(value + 1, n), value)})

        return dataclasses.replace(made, transfer=transfer)

    return program


def _loop_and_slot(made, n, s, j, chunk, count):
    """(loop, loops, element x of the slot) of ``made`` at step s, slot j, as its generator computes them."""
    from collspec.models.generators import nccl_pat

    per = nccl_pat._nonzero(nccl_pat.steps_per_loop(n, made.choices["aggregation"](n), made.choices["post"](n)))
    return ix.floordiv(s, per), nccl_pat.loop_count(chunk, count), j % nccl_pat.chunk_width(chunk, count)


def last_loop_shifted(made, chunk, count):
    """``made`` (a call with ``chunk`` and ``count``) with the last loop's
    element offset off by one (cells one further) where there are several
    loops: a bug that only shows with several loops."""

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        loop, loops, _ = _loop_and_slot(made, n, s, j, chunk, count)
        off = ix.where(ix.both(loops >= 2, loop == loops - 1), 1, 0)
        return dataclasses.replace(t, src_chunk=t.src_chunk + off, dst_chunk=t.dst_chunk + off)

    return dataclasses.replace(made, transfer=transfer)


def second_element_into_first(made, chunk, count):
    """``made`` with a block's element x >= 1 of a loop sent into the
    element before it (cells one lower): a bug that only shows at count >= 2,
    already within one loop."""

    def transfer(n, s, r, j):
        t = made.transfer(n, s, r, j)
        _, _, x = _loop_and_slot(made, n, s, j, chunk, count)
        off = ix.where(x >= 1, 1, 0)
        return dataclasses.replace(t, src_chunk=t.src_chunk - off, dst_chunk=t.dst_chunk - off)

    return dataclasses.replace(made, transfer=transfer)


def on_python_ints_only(made, chunk, count):
    """``made`` with every transfer sent back to its own rank where count is
    a Python int >= 2 that chunk does not divide, unchanged where chunk and
    count are Z3 terms: a generator branch on the options' type (as
    ``nccl_pat._plain`` and ``_size`` branch), which the schedule of a
    user's call takes and a proof over Z3 chunk and count does not."""
    if ix._symbolic(chunk, count) or chunk is None or count is None or count < 2 or count % chunk == 0:
        return made

    def transfer(n, s, r, j):
        return dataclasses.replace(made.transfer(n, s, r, j), dst=r)

    return dataclasses.replace(made, transfer=transfer)
