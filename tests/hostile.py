"""Generators of hostile inputs: files inside the declared limits that once
crashed collspec or ran away with its time or memory.

Each generator returns the file's bytes; :data:`CASES` names them with the
command that reads them and the exit statuses that are right for them. The
tests (tests/test_hostile_inputs.py) and bench/hostile_inputs.py share this
table, so what is timed is what is tested.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable

DATA = os.path.join(os.path.dirname(__file__), "..", "models")
PLAN_REDUCE = os.path.join(DATA, "mscclpp", "data", "plan-reduce.json")


def schedule(ranks: int, chunks: int, steps, collective: str = "allreduce", **extra) -> bytes:
    return json.dumps({"collective": collective, "ranks": ranks, "chunks": chunks, "steps": steps, **extra}).encode()


def nested_schedule(depth: int = 990) -> bytes:
    """A schedule whose ``ranks`` is a list nested ``depth`` deep."""
    return b'{"collective": "allreduce", "ranks": ' + b"[" * depth + b"1" + b"]" * depth + b', "chunks": 1, "steps": []}'


def nested_plan(depth: int = 100_000) -> bytes:
    """A plan whose ``name`` is nested ``depth`` deep before its ``gpus``."""
    plan = json.loads(open(PLAN_REDUCE, "rb").read())
    body = json.dumps(plan)[1:]
    return b'{"name": ' + b"[" * depth + b"]" * depth + b", " + body.encode().replace(b'"name": "reduce", ', b"", 1)


def op_list() -> bytes:
    return schedule(2, 1, [[{"src": 0, "dst": 1, "chunk": 0, "op": ["reduce"]}]])


def long_integer(digits: int = 5000) -> bytes:
    return schedule(2, 1, []).replace(b'"ranks": 2', b'"ranks": ' + b"9" * digits)


def huge_cells() -> bytes:
    """65,536 ranks x 2^20 chunks: inside the format's limits, 2^36 cells."""
    return schedule(1 << 16, 1 << 20, [])


def square(n: int = 4096, with_steps: bool = False) -> bytes:
    """n ranks x n chunks, no steps or one ring-like step of n transfers."""
    steps = [[{"src": r, "dst": (r + 1) % n, "chunk": r, "op": "reduce"} for r in range(n)]] if with_steps else []
    return schedule(n, n, steps)


def one_wide_step(transfers: int = 1_000_000) -> bytes:
    t = '{"src": 0, "dst": 1, "chunk": 0, "op": "reduce"}'
    return ('{"collective": "allreduce", "ranks": 2, "chunks": 1, "steps": [[' + ",".join([t] * transfers) + "]]}").encode()


def empty_steps(count: int = 3_000_000) -> bytes:
    return ('{"collective": "allreduce", "ranks": 2, "chunks": 1, "steps": [' + ",".join(["[]"] * count) + "]}").encode()


def many_steps(count: int = 120_000) -> bytes:
    t = '[{"src": 0, "dst": 1, "chunk": 0, "op": "copy"}]'
    return ('{"collective": "allreduce", "ranks": 2, "chunks": 1, "steps": [' + ",".join([t] * count) + "]}").encode()


# -- MSCCL XML --------------------------------------------------------------------

STEP = '<step s="{s}" type="{type}" srcbuf="i" srcoff="{off}" dstbuf="i" dstoff="{off}" cnt="{cnt}" depid="-1" deps="-1" hasdep="0"/>'


def xml(ngpus: int, chunks: int, gpus: str, coll: str = "allreduce", head: str = "") -> bytes:
    return (
        f'{head}<algo name="h" proto="Simple" nchannels="1" nchunksperloop="{chunks}" ngpus="{ngpus}" coll="{coll}" inplace="1">\n'
        f"{gpus}</algo>\n"
    ).encode()


def xml_pair(chunks: int = 4, cnt: int | None = None, head: str = "", tb_id: str = "0") -> bytes:
    """Two GPUs all-reducing ``chunks`` chunks: each reduces half into the other, then copies it back."""
    half = chunks // 2
    cnt = half if cnt is None else cnt
    gpus = ""
    for g in (0, 1):
        mine, other = g * half, (1 - g) * half
        steps = [
            STEP.format(s=0, type="s", off=other, cnt=cnt),
            STEP.format(s=1, type="rrcs", off=mine, cnt=cnt),
            STEP.format(s=2, type="r", off=other, cnt=cnt),
        ]
        tid = tb_id if g == 0 else "0"
        gpus += f'<gpu id="{g}" i_chunks="{chunks}" o_chunks="0" s_chunks="0">\n<tb id="{tid}" send="{1 - g}" recv="{1 - g}" chan="0">\n' + "\n".join(steps) + "\n</tb>\n</gpu>\n"
    return xml(2, chunks, gpus, head=head)


def xml_encoding(name: str) -> bytes:
    return xml_pair(head=f'<?xml version="1.0" encoding="{name}"?>\n')


def xml_no_threadblocks(ngpus: int = 2048) -> bytes:
    gpus = "".join(f'<gpu id="{g}" i_chunks="{ngpus}" o_chunks="0" s_chunks="0">\n</gpu>\n' for g in range(ngpus))
    return xml(ngpus, ngpus, gpus)


def xml_one_connection(sends: int = 300_000) -> bytes:
    """GPU 0 sends chunk 0 to GPU 1 ``sends`` times on one connection; GPU 1 receives as often."""
    s = "\n".join(STEP.format(s=k, type="s", off=0, cnt=1) for k in range(sends))
    r = "\n".join(STEP.format(s=k, type="r", off=1, cnt=1) for k in range(sends))
    gpus = (
        f'<gpu id="0" i_chunks="2" o_chunks="0" s_chunks="0">\n<tb id="0" send="1" recv="-1" chan="0">\n{s}\n</tb>\n</gpu>\n'
        f'<gpu id="1" i_chunks="2" o_chunks="0" s_chunks="0">\n<tb id="0" send="-1" recv="0" chan="0">\n{r}\n</tb>\n</gpu>\n'
    )
    return xml(2, 2, gpus)


def xml_attribute(value: str, name: str = "srcoff") -> bytes:
    """The two-GPU program with one step's ``name`` written as ``value``
    (in the first step of GPU 0, whose decimal value is 2)."""
    text = xml_pair().decode()
    return text.replace(f'{name}="2"', f'{name}="{value}"', 1).encode()


# -- MSCCL++ plans ----------------------------------------------------------------


def plan_nops(ngpus: int = 4096) -> bytes:
    gpus = [{"id": g, "input_chunks": 1, "output_chunks": 0, "scratch_chunks": 0, "channels": [], "remote_buffers": [], "threadblocks": [{"id": 0, "ops": [{"name": "nop"}]}]} for g in range(ngpus)]
    return json.dumps({"name": "nops", "collective": "allreduce", "protocol": "Simple", "inplace": True, "gpus": gpus}).encode()


def plan_reduce_chunks(chunks: int = 1 << 20) -> bytes:
    plan = json.loads(open(PLAN_REDUCE, "rb").read())
    for gpu in plan["gpus"]:
        for key in ("input_chunks", "output_chunks", "scratch_chunks"):
            gpu[key] = chunks
    return json.dumps(plan).encode()


def plan_sendrecv() -> bytes:
    """Two GPUs swap i[0] into each other's o[0], out of place (no postcondition)."""
    from sendrecv_plan import PLAN

    return json.dumps(PLAN).encode()


@dataclass(frozen=True)
class Case:
    """A hostile input: its file name, bytes, the command (argv after the
    file is put in) and the exit statuses that are right for it."""

    name: str
    suffix: str
    make: Callable[[], bytes]
    command: tuple[str, ...] = ("check",)
    statuses: tuple[int, ...] = (0, 1, 2)


#: the defects and runaways of the hostile-input review, one row each
CASES = [
    Case("plan-name-nested-100000", ".json", nested_plan, statuses=(2,)),
    Case("schedule-nested-990", ".json", nested_schedule, statuses=(2,)),
    Case("xml-encoding-x-nonsense", ".xml", lambda: xml_encoding("x-nonsense"), statuses=(2,)),
    Case("xml-encoding-shift_jis", ".xml", lambda: xml_encoding("shift_jis"), statuses=(2,)),
    Case("xml-encoding-utf-7", ".xml", lambda: xml_encoding("utf-7"), statuses=(2,)),
    Case("xml-encoding-utf-32", ".xml", lambda: xml_encoding("utf-32"), statuses=(2,)),
    Case("xml-tb-id-2^63", ".xml", lambda: xml_pair(tb_id="9223372036854775808"), statuses=(2,)),
    Case("transfer-op-list", ".json", op_list, statuses=(2,)),
    Case("integer-5000-digits", ".json", long_integer, statuses=(2,)),
    Case("65536-ranks-x-2^20-chunks", ".json", huge_cells, statuses=(2,)),
    Case("65536-ranks-x-2^20-chunks-prove", ".json", huge_cells, command=("prove", "--schedule"), statuses=(2,)),
    Case("plan-sendrecv-prove", ".json", plan_sendrecv, command=("prove", "--schedule"), statuses=(2,)),
    Case("plan-4096-gpus-nop", ".json", plan_nops),
    Case("4096x4096-no-steps", ".json", square),
    Case("4096x4096-one-step", ".json", lambda: square(with_steps=True)),
    Case("one-step-1000000-transfers", ".json", one_wide_step),
    Case("3000000-empty-steps", ".json", empty_steps),
    Case("120000-steps", ".json", many_steps),
    Case("xml-2048-gpus-no-tb", ".xml", xml_no_threadblocks),
    Case("xml-300000-sends-one-connection", ".xml", xml_one_connection),
    Case("plan-reduce-2^20-chunks", ".json", plan_reduce_chunks),
    Case("xml-2-gpus-2^20-chunks", ".xml", lambda: xml_pair(1 << 20, cnt=1 << 19)),
]
