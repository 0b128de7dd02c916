"""Read an MSCCL++ execution plan (JSON) into a :class:`~.plan.Plan`,
refusing anything the executor would refuse and anything hostile.

The file is untrusted. Every problem raises :class:`PlanFormatError` with
one line ``FILE: JSON.PATH: what is wrong`` (the command line turns it into
exit status 2), for example
``plan.json: gpus[0].threadblocks[3].ops[2].src_buff[0].index: 9 is out of range 0..3``:

- a file over :data:`MAX_FILE_BYTES`, invalid or truncated JSON (with the
  line and column), NaN or Infinity, nesting deeper than Python can parse;
- a missing field or one of the wrong type (``true`` is not a number);
- counts beyond the limits below, GPU or thread block ids that are not
  0..n-1 in order, a peer, channel, remote buffer, switch channel,
  semaphore or barrier id out of range, a chunk range outside its buffer;
- executor limits (src/core/include/execution_common.hpp): more than 64
  operations in a thread block (pipelines count with their inner ops), more
  than 16 channels of a type in a thread block, more than 8 channels or 10
  buffers in one operation, more than 16 semaphores in one operation,
  barrier ids from 16 on;
- an operation name the executor does not know, and a channel type an op
  does not support in the executor (``get`` or a reduction over a port
  channel): refused, never skipped;
- an in-place plan of a collective without a postcondition in collspec
  (``sendrecv``, the DSL's ``test``, ...): how its input and output alias
  is the collective's. Out of place such a plan is read, with a lint
  warning ``no-postcondition``, and :func:`~.verify.verify` checks its
  synchronisation only.

Cells. The executor cuts each rank's buffers into chunks of one size,
derived from the message size (``getOffset`` / ``getSizeAndChunks`` in
execution_plan.cc: rank size / ``input_chunks``, the same chunk size for
input, output and scratch). The model keeps one cell per chunk, split into
``parts`` cells when thread block groups (``tbg_info``) split chunks:
``parts`` is the least common multiple of the group sizes, which is exact
for every message size whose chunks split evenly into ``parts`` aligned
pieces (``calcOffset``). Pipelines (``pipeline`` with ``iter_context``)
are modelled for the message sizes at which the body runs once (each
chunk at most ``unit_size`` bytes).
"""

from __future__ import annotations

import json
import math
import os

from ...spec.errors import CollspecError
from .plan import (
    BUFFER_CODES, INPUT, KNOWN_OPS, MAX_BUFFERS_PER_OPERATION, MAX_CHANNEL, MAX_CHANNEL_PER_OPERATION,
    MAX_DEVICE_SEMAPHORES, MAX_DEVICE_SYNCERS, MAX_OPERATION, MODELLED_OPS, OUTPUT, SCRATCH, Op, Plan,
)

MAX_FILE_BYTES = 64 << 20
MAX_GPUS = 4096
MAX_CHUNKS = 1 << 20
MAX_THREADBLOCKS = 4096  # per GPU
MAX_OPS = 1 << 20  # in the whole plan
MAX_PARTS = 64
#: cells per rank x ranks the result check may hold
MAX_CELLS = 1 << 23

#: plan collective -> spec collective; others have no postcondition here
COLLECTIVES = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reduce_scatter", "alltoall": "alltoall"}
PROTOCOLS = ("Simple", "LL")
CHANNEL_TYPES = ("memory", "port", "switch", "none")


class PlanFormatError(CollspecError):
    """A plan that cannot be checked as given (exit 2)."""


def looks_like_plan(text: str) -> bool:
    """Is this JSON text an execution plan (a top-level ``gpus`` list of
    objects with ``threadblocks``)? Invalid JSON counts as a plan when
    ``"gpus"`` appears near its start (a truncated plan)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return '"gpus"' in text[:4096] or '"threadblocks"' in text[:4096]
    if not isinstance(obj, dict) or not isinstance(obj.get("gpus"), list):
        return False
    return all(isinstance(g, dict) and "threadblocks" in g for g in obj["gpus"][:1]) and bool(obj["gpus"])


def load(path: str) -> Plan:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise PlanFormatError(f"{path}: the file has {size} bytes, more than the {MAX_FILE_BYTES} this checker reads")
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise PlanFormatError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlanFormatError(f"{path}: not UTF-8 text (byte {error.start})") from None
    return loads(text, path)


def _no_constants(name):
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str, path: str = "<plan>") -> Plan:
    """Parse and resolve a plan given as JSON text."""
    if len(text) > MAX_FILE_BYTES:
        raise PlanFormatError(f"{path}: the plan has {len(text)} characters, more than {MAX_FILE_BYTES}")
    try:
        obj = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as error:
        raise PlanFormatError(f"{path}: line {error.lineno} column {error.colno}: invalid JSON ({error.msg}); is the file truncated?") from None
    except ValueError as error:
        raise PlanFormatError(f"{path}: invalid JSON: {error}") from None
    except RecursionError:
        raise PlanFormatError(f"{path}: JSON nested too deeply") from None
    return _Reader(path).plan(obj)


def from_document(obj, path: str = "<plan>", size: int = 0) -> Plan:
    """Resolve a plan already parsed from JSON (``size``: the file's bytes,
    held to :data:`MAX_FILE_BYTES`)."""
    if size > MAX_FILE_BYTES:
        raise PlanFormatError(f"{path}: the file has {size} bytes, more than the {MAX_FILE_BYTES} this checker reads")
    return _Reader(path).plan(obj)


class _Reader:
    def __init__(self, path: str):
        self.path = path
        self.lint: list[tuple[str, str, str]] = []

    # -- typed access -------------------------------------------------------------

    def fail(self, where: str, what: str) -> PlanFormatError:
        return PlanFormatError(f"{self.path}: {where}: {what}")

    def get(self, obj: dict, key: str, where: str, kind, default=...):
        try:
            value = obj[key]
        except (KeyError, TypeError):
            if not isinstance(obj, dict):
                raise self.fail(where or "(top level)", f"expected an object, got {_type_name(obj)}") from None
            if default is ...:
                raise self.fail(_at(where, key), "missing") from None
            return default
        if type(value) is kind:
            return value
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(_at(where, key), f"expected an integer, got {_show(value)}")
        elif kind is bool:
            raise self.fail(_at(where, key), f"expected true or false, got {_show(value)}")
        elif not isinstance(value, kind):
            raise self.fail(_at(where, key), f"expected {_KIND_NAMES.get(kind, kind.__name__)}, got {_show(value)}")
        return value

    def count(self, obj, key, where, low, high, default=...):
        value = self.get(obj, key, where, int, default)
        if not low <= value <= high:
            raise self.fail(f"{where}.{key}" if where else key, f"{value} is out of range {low}..{high}")
        return value

    def items(self, obj, key, where, limit, default=...):
        value = self.get(obj, key, where, list, default)
        if len(value) > limit:
            raise self.fail(f"{where}.{key}", f"{len(value)} entries, more than the {limit} allowed")
        return value

    def index(self, value, at: str, size: int, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(at, f"expected an integer, got {_show(value)}")
        if not 0 <= value < size:
            raise self.fail(at, f"{value} is out of range 0..{size - 1}" if size else f"{value}: there is no {what}")
        return value

    # -- the plan -----------------------------------------------------------------

    def plan(self, obj) -> Plan:
        if not isinstance(obj, dict):
            raise self.fail("(top level)", f"expected an object, got {_type_name(obj)}")
        name = self.get(obj, "name", "", str)
        coll = self.get(obj, "collective", "", str)
        protocol = self.get(obj, "protocol", "", str)
        if protocol not in PROTOCOLS:
            raise self.fail("protocol", f"{protocol!r} is not one of {', '.join(PROTOCOLS)}")
        inplace = self.get(obj, "inplace", "", bool)
        collective = COLLECTIVES.get(coll)
        if collective is None:
            if inplace:
                raise self.fail(
                    "collective",
                    f"{coll!r} has no postcondition in collspec, and in place its input and output alias in a way only "
                    f"the collective defines; in-place plans for {', '.join(COLLECTIVES)} are checked",
                )
            self.lint.append((
                "no-postcondition", "collective",
                f"{coll!r} has no postcondition in collspec (it checks the result of {', '.join(COLLECTIVES)}): "
                "only the synchronisation is checked (race, deadlock, unmatched), not what the plan computes",
            ))
        for key in ("reuse_resources", "use_double_scratch_buffer"):
            self.get(obj, key, "", bool, False)
        self.count(obj, "buffer_alignment", "", 1, 1 << 20, 16)
        self.count(obj, "num_threads_per_block", "", 1, 1024, 1024)
        for key in ("min_message_size", "max_message_size"):
            self.count(obj, key, "", 0, (1 << 64) - 1, 0)
        gpus = self.items(obj, "gpus", "", MAX_GPUS)
        if not gpus:
            raise self.fail("gpus", "no GPUs")
        self.ngpus = n = len(gpus)
        # first pass: sizes and channels of every GPU (ops refer to peers')
        self.sizes, self.mem, self.port, self.nvls, self.remote, self.sems = [], [], [], [], [], []
        for g, gpu in enumerate(gpus):
            at = f"gpus[{g}]"
            if self.get(gpu, "id", at, int) != g:
                raise self.fail(f"{at}.id", f"{gpu['id']} but GPUs must be listed by id 0..{n - 1} in order (the executor reads gpus[rank])")
            self.sizes.append(tuple(self.count(gpu, key, at, 0, MAX_CHUNKS) for key in ("input_chunks", "output_chunks", "scratch_chunks")))
            self._channels(gpu, at, g)
        parts = self._parts(gpus)
        if collective is None:  # out of place: each GPU's own declared sizes bound its ranges
            in_c, out_c = max(s[0] for s in self.sizes), max(s[1] for s in self.sizes)
        else:
            in_c, out_c = self._data_sizes(collective, inplace)
        scratch = max(s for _, _, s in self.sizes)
        if n * (in_c + out_c + scratch) * parts > MAX_CELLS:
            raise self.fail("gpus", f"{n} GPUs x {in_c + out_c + scratch} chunks x {parts} parts is more cells than the {MAX_CELLS} this checker holds")
        self.parts = parts
        self.inplace, self.collective = inplace, collective
        self.in_c, self.out_c = in_c, out_c
        ops: list[Op] = []
        tb_gpu, tb_ids = [], []
        for g, gpu in enumerate(gpus):
            at = f"gpus[{g}]"
            tbs = self.items(gpu, "threadblocks", at, MAX_THREADBLOCKS)
            for t, tb in enumerate(tbs):
                tat = f"{at}.threadblocks[{t}]"
                if self.get(tb, "id", tat, int) != t:
                    raise self.fail(f"{tat}.id", f"{tb['id']} but thread blocks must be listed by id 0..{len(tbs) - 1} in order")
                self._threadblock(tb, tat, g, t, len(tb_gpu), ops)
                tb_gpu.append(g)
                tb_ids.append(t)
                if len(ops) > MAX_OPS:
                    raise self.fail(tat, f"more than {MAX_OPS} operations in the plan")
        return Plan(
            path=self.path, name=name, collective=collective, coll_written=coll, protocol=protocol, inplace=inplace,
            ngpus=n, parts=parts, in_chunks=in_c, out_chunks=out_c, scratch_chunks=scratch, tb_gpu=tb_gpu, tb_ids=tb_ids,
            ops=ops, semaphores=self.sems, memory_channels=self.mem, port_channels=self.port, lint=self.lint,
        )

    def _data_sizes(self, collective: str, inplace: bool) -> tuple[int, int]:
        """Input and output chunks (the same on every GPU), checked against the collective."""
        n = self.ngpus
        in_c = {s[0] for s in self.sizes}
        out_c = {s[1] for s in self.sizes}
        if len(in_c) > 1 or len(out_c) > 1:
            raise self.fail("gpus", "GPUs declare different input_chunks or output_chunks; the executor gives every rank one chunk size")
        i, o = in_c.pop(), out_c.pop()
        if i == 0 and o == 0:
            raise self.fail("gpus[0]", "input_chunks and output_chunks are both 0 (the executor refuses: 'Output or Input chunks must be greater than 0')")
        want = {"allreduce": lambda i: i, "alltoall": lambda i: i, "allgather": lambda i: i * n}
        if collective == "reduce_scatter":
            if o == 0 and inplace:
                o = i // n
            if i != o * n:
                raise self.fail("gpus[0].output_chunks", f"a reducescatter needs input_chunks = {n} x output_chunks (got {i} and {o})")
            return i, o
        if o == 0 and inplace:  # in place the output is the input's memory
            o = want[collective](i)
        if i == 0 and inplace and collective != "allgather":
            i = o
        if o != want[collective](i):
            raise self.fail("gpus[0].output_chunks", f"a {collective} on {n} GPUs needs output_chunks = {want[collective](1)} x input_chunks (got {i} and {o})")
        if collective == "alltoall" and i % n:
            raise self.fail("gpus[0].input_chunks", f"an alltoall needs input_chunks divisible by the {n} GPUs (got {i})")
        return i, o

    def _parts(self, gpus) -> int:
        parts = 1
        for g, gpu in enumerate(gpus):
            tbs = gpu.get("threadblocks") if isinstance(gpu, dict) else None
            for t, tb in enumerate(tbs if isinstance(tbs, list) else []):
                for k, op in enumerate(tb.get("ops", []) if isinstance(tb, dict) and isinstance(tb.get("ops"), list) else []):
                    for o in [op] + (op.get("ops", []) if isinstance(op, dict) and isinstance(op.get("ops"), list) else []):
                        if isinstance(o, dict) and "tbg_info" in o:
                            at = f"gpus[{g}].threadblocks[{t}].ops[{k}].tbg_info"
                            size = self.count(o["tbg_info"], "tbg_size", at, 1, MAX_PARTS)
                            parts = math.lcm(parts, size)
                            if parts > MAX_PARTS:
                                raise self.fail(at, f"thread block groups of these sizes split chunks into {parts} parts, more than {MAX_PARTS}")
        return parts

    def _channels(self, gpu, at: str, g: int) -> None:
        mem, port, nvls, ordinal, port_ordinal = [], [], [], {}, {}
        for c, chan in enumerate(self.items(gpu, "channels", at, 1 << 16)):
            cat = f"{at}.channels[{c}]"
            kind = self.get(chan, "channel_type", cat, str)
            if kind not in CHANNEL_TYPES:
                raise self.fail(f"{cat}.channel_type", f"{kind!r} is not one of {', '.join(CHANNEL_TYPES)}")
            if kind == "switch":
                key = "buffer_type"
                if "buffer_type" not in chan and "buff" in chan:
                    key = "buff"
                    self.lint.append(("switch-buff", f"{cat}.buff", "the switch channel names its buffer with 'buff'; execution_plan.cc (parseChannels) reads 'buffer_type'"))
                buf = self._buffer_type(self.get(chan, key, cat, str), f"{cat}.{key}")
                for r, group in enumerate(self.items(chan, "rank_groups", cat, MAX_GPUS)):
                    rat = f"{cat}.rank_groups[{r}]"
                    ranks = [self.index(x, f"{rat}.ranks[{k}]", self.ngpus, "GPU") for k, x in enumerate(self.items(group, "ranks", rat, MAX_GPUS))]
                    self.count(group, "size", rat, 0, MAX_GPUS)
                    if g not in ranks:
                        raise self.fail(f"{rat}.ranks", f"GPU {g} is not in its own switch group {ranks}")
                    if len(set(ranks)) != len(ranks):
                        raise self.fail(f"{rat}.ranks", f"a rank appears twice in {ranks}")
                    nvls.append((buf, ranks))
            elif kind in ("memory", "port"):
                for k, peer in enumerate(self.items(chan, "connected_to", cat, MAX_GPUS)):
                    peer = self.index(peer, f"{cat}.connected_to[{k}]", self.ngpus, "GPU")
                    if kind == "memory":
                        mem.append((peer, ordinal.get(peer, 0)))
                        ordinal[peer] = ordinal.get(peer, 0) + 1
                    else:
                        port.append((peer, port_ordinal.get(peer, 0)))
                        port_ordinal[peer] = port_ordinal.get(peer, 0) + 1
        port = [(peer, ordinal.get(peer, 0) + k) for peer, k in port]  # tags continue after the memory channels
        remote = []
        for b, buf in enumerate(self.items(gpu, "remote_buffers", at, 1 << 16)):
            bat = f"{at}.remote_buffers[{b}]"
            rank = self.index(self.get(buf, "rank", bat, int), f"{bat}.rank", self.ngpus, "GPU")
            kinds = self.get(buf, "access_channel_types", bat, list)
            for k, x in enumerate(kinds):
                if x not in CHANNEL_TYPES:
                    raise self.fail(f"{bat}.access_channel_types[{k}]", f"{_show(x)} is not one of {', '.join(CHANNEL_TYPES)}")
            remote.append((rank, self._buffer_type(self.get(buf, "type", bat, str), f"{bat}.type"), tuple(kinds)))
        sems = [self.count(s, "init_value", f"{at}.semaphores[{k}]", -(1 << 31), (1 << 31) - 1) for k, s in enumerate(self.items(gpu, "semaphores", at, 1 << 16, []))]
        self.mem.append(mem)
        self.port.append(port)
        self.nvls.append(nvls)
        self.remote.append(remote)
        self.sems.append(sems)

    def _buffer_type(self, value: str, at: str) -> int:
        if value not in BUFFER_CODES:
            raise self.fail(at, f"{value!r} is not a buffer type (i, o or s)")
        return BUFFER_CODES[value]

    def _threadblock(self, tb, at: str, g: int, t: int, global_tb: int, ops: list[Op]) -> None:
        chans = {"memory": [], "port": [], "switch": []}
        for c, chan in enumerate(self.items(tb, "channels", at, 1 << 10, [])):
            cat = f"{at}.channels[{c}]"
            kind = self.get(chan, "channel_type", cat, str)
            if kind not in chans:
                raise self.fail(f"{cat}.channel_type", f"{kind!r} is not one of memory, port, switch")
            size = {"memory": len(self.mem[g]), "switch": len(self.nvls[g]), "port": len(self.port[g])}[kind]
            for k, cid in enumerate(self.get(chan, "channel_ids", cat, list)):
                chans[kind].append(self.index(cid, f"{cat}.channel_ids[{k}]", size, f"{kind} channel on GPU {g}"))
        for kind, listed in chans.items():
            if len(listed) > MAX_CHANNEL:
                raise self.fail(f"{at}.channels", f"{len(listed)} {kind} channels, more than the executor's {MAX_CHANNEL} per thread block (MAX_CHANNEL)")
        bufs = {"memory": [], "port": []}
        for r, ref in enumerate(self.items(tb, "remote_buffer_refs", at, 1 << 10, [])):
            rat = f"{at}.remote_buffer_refs[{r}]"
            kind = self.get(ref, "access_channel_type", rat, str)
            if kind not in bufs:
                raise self.fail(f"{rat}.access_channel_type", f"{kind!r} is not memory or port")
            for k, b in enumerate(self.get(ref, "remote_buffer_ids", rat, list)):
                bufs[kind].append(self.index(b, f"{rat}.remote_buffer_ids[{k}]", len(self.remote[g]), f"remote buffer on GPU {g}"))
        for kind, listed in bufs.items():
            if len(listed) > MAX_CHANNEL:
                raise self.fail(f"{at}.remote_buffer_refs", f"{len(listed)} {kind} remote buffers, more than the executor's {MAX_CHANNEL} per thread block")
        self.tb = {"g": g, "t": t, "global": global_tb, "chans": chans, "bufs": bufs, "n": 0}
        tb_ops = lambda: self.tb["n"]  # noqa: E731 - proxy transfers do not count
        for k, op in enumerate(self.items(tb, "ops", at, 1 << 16)):
            oat = f"{at}.ops[{k}]"
            name = self.get(op, "name", oat, str)
            if name == "pipeline":
                self._op(op, oat, ops, pipeline=True)
                for j, inner in enumerate(self.items(op, "ops", oat, MAX_OPERATION + 1)):
                    if isinstance(inner, dict) and inner.get("name") == "pipeline":
                        raise self.fail(f"{oat}.ops[{j}]", "a pipeline inside a pipeline (the executor runs only one level)")
                    self._op(inner, f"{oat}.ops[{j}]", ops)
            else:
                self._op(op, oat, ops)
            if tb_ops() > MAX_OPERATION:
                raise self.fail(oat, f"the thread block has more than {MAX_OPERATION} operations (pipelines count with their inner ops); the executor refuses it (MAX_OPERATION)")

    # -- operations ------------------------------------------------------------------

    def _op(self, obj, at: str, ops: list[Op], pipeline: bool = False) -> None:
        tb = self.tb
        name = self.get(obj, "name", at, str)
        if name not in KNOWN_OPS:
            raise self.fail(f"{at}.name", f"unknown operation {name!r} (execution_plan.cc getOpType knows {', '.join(KNOWN_OPS)})")
        chan_type = self.get(obj, "channel_type", at, str, None)
        if chan_type is not None and chan_type not in CHANNEL_TYPES:
            raise self.fail(f"{at}.channel_type", f"{chan_type!r} is not one of {', '.join(CHANNEL_TYPES)}")
        if chan_type == "port" and name not in ("put", "pws", "pwsf", "signal", "wait", "rlxsignal", "rlxwait", "flush", "ppkt", "rppkt"):
            raise self.fail(f"{at}.channel_type", f"operation {name!r} over a port channel: the executor implements it for memory channels only; refused")
        if name in ("pws", "pwsf", "flush") and chan_type != "port":
            raise self.fail(f"{at}.channel_type", f"{name} needs channel_type 'port', got {_show(chan_type)}")
        op = Op(index=len(ops), gpu=tb["g"], tb=tb["global"], tb_id=tb["t"], pos=0, name=name, path=at)
        op.pos = tb["n"]
        tb["n"] += 1
        if name == "nop":
            pass
        elif pipeline:
            ctx = self.get(obj, "iter_context", at, dict)
            self.count(ctx, "unit_size", f"{at}.iter_context", 1, (1 << 32) - 1)
            self.count(ctx, "num_chunks", f"{at}.iter_context", 1, MAX_CHUNKS)
            op.name = "pipeline"
        elif name == "barrier":
            bid = self.count(obj, "barrier_id", at, 0, MAX_DEVICE_SYNCERS - 1)
            op.barrier = (bid, self.count(obj, "num_threadblocks", at, 1, MAX_THREADBLOCKS))
        elif name in ("signal", "wait", "rlxsignal", "rlxwait"):
            if chan_type not in ("memory", "port"):
                raise self.fail(f"{at}.channel_type", f"{name} needs channel_type 'memory' or 'port', got {_show(chan_type)}")
            ends = [(tb["g"], chan_type, c) for c in self._channel_ids(obj, at, chan_type)]
            if not ends:
                raise self.fail(f"{at}.channel_ids", "no channels")
            if "signal" in name:
                op.signals = ends
            else:
                op.waits = ends
            op.relaxed = name.startswith("rlx") and chan_type == "memory"  # a port channel has no relaxed signal
        elif name == "flush":
            ends = [(tb["g"], "port", c) for c in self._channel_ids(obj, at, "port")]
            outputs = len(obj.get("dst_buff", [])) if isinstance(obj.get("dst_buff", []), list) else 0
            op.flushes = ends[:outputs]
            if len(op.flushes) < len(ends):
                self.lint.append(("flush-noop", at, f"handleFlush flushes op.nOutputs channels, the number of dst_buff entries ({outputs}), not the {len(ends)} listed in channel_ids; the others are not flushed"))
        elif name in ("sem_acquire", "sem_release"):
            ids = self.items(obj, "semaphore_ids", at, MAX_DEVICE_SEMAPHORES)
            sems = [(tb["g"], self.index(s, f"{at}.semaphore_ids[{k}]", len(self.sems[tb["g"]]), f"semaphore on GPU {tb['g']}")) for k, s in enumerate(ids)]
            if name == "sem_acquire":
                op.sem_acquire = sems
            else:
                op.sem_release = sems
        else:
            proxies = self._data_op(obj, at, op, name, chan_type)
            ops.append(op)
            for k, (end, srcs, dsts, signal) in enumerate(proxies or ()):
                ops.append(Op(
                    index=len(ops), gpu=op.gpu, tb=op.tb, tb_id=op.tb_id, pos=op.pos, name=name, path=f"{at}.dst_buff[{k}]",
                    combine="pairs", srcs=srcs, dsts=dsts, signals=[end] if signal else (), proxy=True, issuer=op.index, fifo=end,
                ))
            return
        ops.append(op)

    def _port_put(self, s, d, at: str, op: Op, name: str, packets: bool) -> list:
        """Port-channel puts: ``(end, srcs, dsts, signal)`` per destination,
        the copy the proxy makes (handlePut / handlePutPackets, PORT: thread
        k puts src_buff[k] to dst_buff[k] through channel_ids[k])."""
        ids = self._channel_ids(self._current, at, "port")
        self._need(len(ids) >= len(d) and len(s) >= len(d), at, "channel_ids", f"{name} over port channels puts dst_buff[k] through channel_ids[k] from src_buff[k]: {len(d)} destinations need as many channels and sources")
        out = []
        for k in range(len(d)):
            src = self._local(s[k], f"{at}.src_buff[{k}]")
            dst = self._port_remote(d[k], f"{at}.dst_buff[{k}]")
            if packets:  # the source already holds packets; they are copied as they are
                src = src[:4] + (False,)
                dst = self._scratch(dst, f"{at}.dst_buff[{k}]")[:4] + (True,)
            out.append(((op.gpu, "port", ids[k]), [src], [dst], name == "pws"))
        return out

    def _channel_ids(self, obj, at: str, kind: str) -> list[int]:
        ids = self.items(obj, "channel_ids", at, MAX_CHANNEL_PER_OPERATION)
        listed = self.tb["chans"][kind]
        return [listed[self.index(c, f"{at}.channel_ids[{k}]", len(listed), f"{kind} channel in this thread block")] for k, c in enumerate(ids)]

    def _data_op(self, obj, at: str, op: Op, name: str, chan_type):
        self._current = obj
        if "channel_ids" in obj and chan_type != "port":
            self._channel_ids(obj, at, chan_type if chan_type in ("memory", "switch") else "memory")
        tbg = (0, 1)
        if "tbg_info" in obj:
            info = self.get(obj, "tbg_info", at, dict)
            size = self.count(info, "tbg_size", f"{at}.tbg_info", 1, MAX_PARTS)
            tbg = (self.count(info, "tb_id", f"{at}.tbg_info", 0, size - 1), size)
        srcs = self.items(obj, "src_buff", at, MAX_BUFFERS_PER_OPERATION)
        dsts = self.items(obj, "dst_buff", at, MAX_BUFFERS_PER_OPERATION)
        if not srcs or not dsts:
            raise self.fail(f"{at}.{'src_buff' if not srcs else 'dst_buff'}", f"{name} needs at least one entry")
        s = [self._buff(b, f"{at}.src_buff[{k}]", chan_type, tbg) for k, b in enumerate(srcs)]
        d = [self._buff(b, f"{at}.dst_buff[{k}]", chan_type, tbg) for k, b in enumerate(dsts)]
        g = op.gpu
        local = lambda r, k, role: self._local(r, f"{at}.{role}[{k}]")  # noqa: E731
        remote = lambda r, k, role: self._remote(r, f"{at}.{role}[{k}]")  # noqa: E731
        switch = lambda r, k, role: self._switch(r, f"{at}.{role}[{k}]")  # noqa: E731
        pk = lambda r: r[:4] + (True,)  # noqa: E731 - the same range, in packet format

        if chan_type == "port":
            sizes = {b[3] for b in s + d}
            if len(sizes) > 1:
                raise self.fail(at, f"{name} moves ranges of different sizes ({sorted(sizes)} cells); the executor uses one size for all, so this plan computes on partial chunks")
            if name in ("put", "pws", "ppkt"):
                op.combine = "none"
                return self._port_put(s, d, at, op, name, packets=name == "ppkt")
            if name == "pwsf":  # put, signal and flush: the copy is done when the op ends
                ends = self._channel_ids(obj, at, "port")
                self._need(len(ends) >= len(d) and len(s) >= len(d), at, "channel_ids", f"pwsf puts dst_buff[k] through channel_ids[k] from src_buff[k]: {len(d)} destinations need as many channels and sources")
                op.combine = "pairs"
                op.srcs = [local(s[k], k, "src_buff") for k in range(len(d))]
                op.dsts = [self._port_remote(d[k], f"{at}.dst_buff[{k}]") for k in range(len(d))]
                op.signals = [(op.gpu, "port", c) for c in ends[: len(d)]]
                return None
            if name == "rppkt":  # wait for the local packets, then the proxy copies them to every destination
                ends = self._channel_ids(obj, at, "port")
                self._need(len(ends) >= len(d), at, "channel_ids", f"rppkt over port channels puts dst_buff[k] through channel_ids[k]: {len(d)} destinations need as many channels")
                packets = pk(self._scratch(local(s[0], 0, "src_buff"), f"{at}.src_buff[0]"))
                op.combine, op.srcs, op.dsts = "none", [packets], []
                return [((op.gpu, "port", ends[k]), [packets[:4] + (False,)], [pk(self._scratch(self._port_remote(d[k], f"{at}.dst_buff[{k}]"), f"{at}.dst_buff[{k}]"))], False) for k in range(len(d))]

        if name == "copy":
            op.combine, op.srcs, op.dsts = "pairs", [local(s[0], 0, "src_buff")], [local(d[0], 0, "dst_buff")]
        elif name == "put":
            if chan_type != "memory":
                raise self.fail(f"{at}.channel_type", f"put needs channel_type 'memory' (port channels are not modelled yet), got {_show(chan_type)}")
            self._need(len(s) >= len(d), at, "src_buff", f"put copies src_buff[k] to dst_buff[k]: {len(d)} destinations need {len(d)} sources")
            base = local(s[0], 0, "src_buff")
            op.combine = "pairs"
            op.srcs = [(g, base[1], local(s[k], k, "src_buff")[2], s[k][3], False) for k in range(len(d))]
            op.dsts = [remote(d[k], k, "dst_buff") for k in range(len(d))]
            self._lint_types(s[: len(d)], at, "put")
        elif name == "get":
            self._need(len(s) == len(d), at, "dst_buff", f"get copies src_buff[k] to dst_buff[k]: {len(s)} sources need {len(s)} destinations")
            op.combine, op.srcs, op.dsts = "pairs", [], []
            for k in range(len(s)):
                rs, ld = remote(s[k], k, "src_buff"), local(d[k], k, "dst_buff")
                # handleGet: reads the remote buffer at dst_buff's offset and writes the local one at src_buff's
                op.srcs.append(self._fit((rs[0], rs[1], ld[2], rs[3], False), f"{at}.dst_buff[{k}].index"))
                op.dsts.append(self._fit((g, ld[1], rs[2], rs[3], False), f"{at}.src_buff[{k}].index"))
                if rs[2] != ld[2]:
                    self.lint.append(("get-offsets-swapped", at, "get's src_buff and dst_buff indexes differ; the executor's handleGet reads the remote buffer at dst_buff's index and writes the local buffer at src_buff's index, which is what is checked"))
        elif name in ("re", "res", "rre", "rres"):
            reads_remote = name.startswith("rr")
            op.combine = "reduce"
            op.srcs = [local(s[0], 0, "src_buff")] + [(remote if reads_remote else local)(s[k], k, "src_buff") for k in range(1, len(s))]
            op.dsts = [local(d[0], 0, "dst_buff")]
            if name.endswith("s"):
                op.dsts += [remote(d[k], k, "dst_buff") for k in range(1, len(d))]
            elif len(d) > 1:
                self.lint.append(("extra-destinations", at, f"{name} writes only dst_buff[0]; the other {len(d) - 1} entries are ignored by the executor"))
        elif name in ("ppkt", "rppkt", "cpkt", "upkt"):
            if name == "ppkt":
                base = local(s[0], 0, "src_buff")
                self._need(len(s) >= len(d), at, "src_buff", f"ppkt copies src_buff[k] to dst_buff[k]: {len(d)} destinations need {len(d)} sources")
                op.combine = "pairs"
                op.srcs = [(g, base[1], local(s[k], k, "src_buff")[2], s[k][3], False) for k in range(len(d))]
                op.dsts = [pk(self._scratch(remote(d[k], k, "dst_buff"), f"{at}.dst_buff[{k}]")) for k in range(len(d))]
            elif name == "rppkt":
                op.combine = "broadcast"
                op.srcs = [pk(self._scratch(local(s[0], 0, "src_buff"), f"{at}.src_buff[0]"))]
                op.dsts = [pk(self._scratch(remote(d[k], k, "dst_buff"), f"{at}.dst_buff[{k}]")) for k in range(len(d))]
            elif name == "cpkt":
                op.combine, op.srcs, op.dsts = "pairs", [local(s[0], 0, "src_buff")], [pk(local(d[0], 0, "dst_buff"))]
            else:
                op.combine = "pairs"
                op.srcs = [pk(self._scratch(local(s[0], 0, "src_buff"), f"{at}.src_buff[0]"))]
                op.dsts = [local(d[0], 0, "dst_buff")]
        elif name in ("repkt", "respkt", "recpkt", "recspkt"):
            op.combine = "reduce"
            op.srcs = [local(s[0], 0, "src_buff")] + [pk(self._scratch(local(s[k], k, "src_buff"), f"{at}.src_buff[{k}]")) for k in range(1, len(s))]
            op.dsts = [local(d[0], 0, "dst_buff")]
            first_remote = 1
            if name.startswith("rec"):
                self._need(len(d) >= 2, at, "dst_buff", f"{name} writes dst_buff[0] and packets into dst_buff[1]")
                op.dsts.append(pk(local(d[1], 1, "dst_buff")))
                first_remote = 2
            if name.endswith("spkt"):
                op.dsts += [pk(self._scratch(remote(d[k], k, "dst_buff"), f"{at}.dst_buff[{k}]")) for k in range(first_remote, len(d))]
        elif name in ("glres", "gstore", "gstorepkt"):
            group_d = switch(d[0], 0, "dst_buff")
            if name == "glres":
                op.combine, op.srcs = "reduce", switch(s[0], 0, "src_buff")
                if sorted(r for r, *_ in op.srcs) != sorted(r for r, *_ in group_d):
                    self.lint.append(("switch-groups-differ", at, "glres loads from one switch group and stores to another"))
                op.dsts = group_d
            else:
                op.combine = "broadcast"
                src = local(s[0], 0, "src_buff")
                op.srcs = [pk(src) if name == "gstorepkt" else src]
                op.dsts = [pk(r) if name == "gstorepkt" else r for r in group_d]
        else:  # pragma: no cover - every modelled name is handled above
            raise self.fail(f"{at}.name", f"operation {name!r} is not modelled")
        sizes = {r[3] for r in op.srcs + op.dsts}
        if len(sizes) > 1:
            raise self.fail(at, f"{name} moves ranges of different sizes ({sorted(sizes)} cells); the executor uses one size for all, so this plan computes on partial chunks")
        reduce_op = obj.get("reduce_op")
        if reduce_op is not None and reduce_op != "sum":
            self.lint.append(("reduce-op-ignored", f"{at}.reduce_op", f"reduce_op {reduce_op!r}: execution_plan.cc does not read reduce_op, the executor always adds (checked as a sum)"))

    def _need(self, ok: bool, at: str, field_: str, what: str) -> None:
        if not ok:
            raise self.fail(f"{at}.{field_}", what)

    def _lint_types(self, ranges, at, name) -> None:
        if len({r[1] for r in ranges}) > 1:
            self.lint.append(("mixed-source-buffers", at, f"{name} reads every source from src_buff[0]'s buffer type (handlePut)"))

    def _buff(self, b, at: str, chan_type, tbg) -> tuple:
        """``(kind, ref, first cell, cells)``: kind is local / remote / switch."""
        if not isinstance(b, dict):
            raise self.fail(at, f"expected an object, got {_type_name(b)}")
        index = self.count(b, "index", at, 0, MAX_CHUNKS)
        size = self.count(b, "size", at, 1, MAX_CHUNKS)
        if "buffer_id" in b:
            kind, ref = "remote", self.get(b, "buffer_id", at, int)
            if chan_type == "port":
                pass  # resolved by _port_remote against the thread block's port remote buffers
            elif chan_type != "memory":
                raise self.fail(f"{at}.buffer_id", f"a remote buffer through channel_type {_show(chan_type)}: remote buffers are reached through memory or port channels")
            else:
                ref = self.tb["bufs"]["memory"][self.index(ref, f"{at}.buffer_id", len(self.tb["bufs"]["memory"]), "memory remote buffer in this thread block")]
        elif "switch_channel_id" in b:
            listed = self.tb["chans"]["switch"]
            kind = "switch"
            ref = listed[self.index(self.get(b, "switch_channel_id", at, int), f"{at}.switch_channel_id", len(listed), "switch channel in this thread block")]
        elif "type" in b:
            kind, ref = "local", self._buffer_type(self.get(b, "type", at, str), f"{at}.type")
        else:
            raise self.fail(at, "names no buffer (type, buffer_id or switch_channel_id)")
        p = self.parts
        first, cells = index * p, size * p
        tb_id, groups = tbg
        share = cells // groups
        return (kind, ref, first + tb_id * share, share, at, index, size)

    def _limit(self, rank: int, buf: int) -> int:
        declared = self.sizes[rank][buf]
        aliased = {INPUT: self.in_c, OUTPUT: self.out_c, SCRATCH: 0}[buf] if self.inplace else 0
        return max(declared, aliased)

    def _checked(self, rank: int, buf: int, b: tuple) -> tuple:
        _, _, first, cells, at, index, size = b
        limit = self._limit(rank, buf)
        if index + size > limit:
            what = "ios"[buf]
            raise self.fail(f"{at}.index", f"chunks {index}..{index + size - 1} of {what} on GPU {rank}, which has {limit} chunk(s) (0..{limit - 1})" if limit else f"GPU {rank} has no {what} chunks")
        return (rank, buf, first, cells, False)

    def _fit(self, r: tuple, at: str) -> tuple:
        limit = self._limit(r[0], r[1]) * self.parts
        if r[2] + r[3] > limit:
            raise self.fail(at, f"the executor's get moves cells {r[2]}..{r[2] + r[3] - 1} of {'ios'[r[1]]} on GPU {r[0]}, which has {limit} cell(s)")
        return r

    def _local(self, b, at: str) -> tuple:
        if b[0] != "local":
            raise self.fail(at, f"expected a local buffer (type), got a {b[0]} one")
        return self._checked(self.tb["g"], b[1], b)

    def _remote(self, b, at: str) -> tuple:
        if b[0] != "remote":
            raise self.fail(at, f"expected a remote buffer (buffer_id), got a {b[0]} one")
        rank, buf, _ = self.remote[self.tb["g"]][b[1]]
        return self._checked(rank, buf, b)

    def _port_remote(self, b, at: str) -> tuple:
        if b[0] != "remote":
            raise self.fail(at, f"expected a remote buffer (buffer_id), got a {b[0]} one")
        listed = self.tb["bufs"]["port"]
        ref = self.index(b[1], f"{at}.buffer_id", len(listed), "port remote buffer in this thread block")
        rank, buf, _ = self.remote[self.tb["g"]][listed[ref]]
        return self._checked(rank, buf, b)

    def _switch(self, b, at: str) -> list:
        if b[0] != "switch":
            raise self.fail(at, f"expected a switch buffer (switch_channel_id), got a {b[0]} one")
        buf, ranks = self.nvls[self.tb["g"]][b[1]]
        return [self._checked(r, buf, b) for r in ranks]

    def _scratch(self, r: tuple, at: str) -> tuple:
        if r[1] != SCRATCH:
            raise self.fail(at, "packets live in a scratch buffer ('s'); the executor addresses this range as scratch")
        return r


_KIND_NAMES = {str: "a string", list: "a list", dict: "an object"}


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _type_name(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _show(value) -> str:
    text = json.dumps(value) if not isinstance(value, (dict, list)) else _type_name(value)
    return text if len(text) <= 40 else text[:37] + "..."
