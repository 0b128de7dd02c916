"""An MSCCL++ execution plan as data: every operation resolved to the cells
it reads and writes and the synchronisation it takes part in.

The operations, as the MSCCL++ executor defines them (names from
``getOpType`` in src/core/executor/execution_plan.cc, effects from the
``handle*`` functions of src/core/include/execution_kernel.hpp;
docs/mscclpp.md has the details and the commit). ``s0`` is the first
``src_buff`` entry, ``d0`` the first ``dst_buff`` entry, and so on; "local"
buffers are named by ``type``, remote ones by ``buffer_id`` (a memory
channel's view of a peer's buffer), switch (NVLS multimem) ones by
``switch_channel_id``.

==========  =============================================================
op          effect (the ``Effect`` built by :mod:`.parse`)
==========  =============================================================
nop         ``__syncthreads()``: orders the thread block's ops around it
barrier     all ``num_threadblocks`` blocks of the GPU meet (DeviceSyncer)
signal      release-signal each listed memory channel's peer
wait        acquire-wait for each listed memory channel's peer
rlxsignal   relaxed signal: orders execution, not memory
rlxwait     relaxed wait: orders execution, not memory
sem_release release each listed device semaphore (memory order release)
sem_acquire acquire each listed device semaphore (memory order acquire)
copy        d0 := s0 (local)
put         d_k := s_k (remote d_k, local s_k in the buffer of s0)
get         executor reads the remote s_k at d_k's index and writes the
            local d_k buffer at s_k's index (handleGet swaps the offsets)
re          d0 := s0 + s1 + ... (local)
res         re, then every remote d_k (k >= 1) := d0's value
rre         d0 := s0 + remote s1 + remote s2 + ...
rres        rre, then every remote d_k (k >= 1) := the value
ppkt        packets of s0 written into each remote d_k (peer's scratch)
rppkt       read packets of local s0, write them into each remote d_k
cpkt        packets of s0 written into local d0
upkt        read packets of local s0 into d0
repkt       d0 := s0 + packets of s1, s2, ... (local scratch)
respkt      repkt, then packets of the value into each remote d_k (k>=1)
recpkt      repkt, plus packets of the value into local d1
recspkt     recpkt, then packets into each remote d_k (k >= 2)
glres       multimem: every group rank's d0 := sum over the group's s0
gstore      multimem: every group rank's d0 := local s0
gstorepkt   read packets of local s0, write them into every group rank's d0
pipeline    runs its ``ops`` (modelled for one iteration, see parse)
==========  =============================================================

Port channels: ``put`` (and ``ppkt``) over a port channel pushes a request
into the channel's FIFO; the host proxy copies later (a *proxy* op), in
FIFO order, before any later ``signal`` on that channel is delivered and
before a later ``flush`` returns. ``pws`` is put then signal; ``pwsf`` also
flushes, so its copy is done when the op ends. ``flush`` flushes the
channels of its first ``len(dst_buff)`` ``channel_ids`` (handleFlush counts
``nOutputs``). Refused (exit 2, naming the op and its JSON path): ``get``
and the ``re``/``rre`` families over port channels, which the executor
only implements for memory channels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INPUT, OUTPUT, SCRATCH = 0, 1, 2  # the executor's BufferType codes
BUFFER_CODES = {"i": INPUT, "o": OUTPUT, "s": SCRATCH}
BUFFER_NAMES = "ios"

#: executor limits (src/core/include/execution_common.hpp)
MAX_CHANNEL = 16
MAX_CHANNEL_PER_OPERATION = 8
MAX_OPERATION = 64
MAX_BUFFERS_PER_OPERATION = 10  # MAX_LOCAL_BUFFER_PER_OPERATION + MAX_CHANNEL_PER_OPERATION
MAX_DEVICE_SYNCERS = 16
MAX_DEVICE_SEMAPHORES = 16

#: names the executor knows (execution_plan.cc getOpType)
KNOWN_OPS = (
    "nop", "barrier", "put", "pws", "pwsf", "get", "copy", "signal", "wait", "flush", "re", "res", "rre", "rres",
    "ppkt", "rppkt", "respkt", "cpkt", "upkt", "repkt", "recpkt", "recspkt", "glres", "gstore", "gstorepkt",
    "rlxsignal", "rlxwait", "pipeline", "sem_acquire", "sem_release",
)
#: names modelled here (all of them; some channel types per op are refused by the parser)
MODELLED_OPS = KNOWN_OPS
#: ops that wait for every thread of the block (__syncthreads inside)
THREAD_SYNC = ("nop", "barrier")


@dataclass(eq=False, slots=True)
class Op:
    """One operation of one thread block, resolved.

    ``srcs`` / ``dsts`` are ``(rank, buffer, first cell, cells)`` ranges in
    the cell model of :mod:`.cells` (chunks split into ``parts``).
    ``combine``: ``copy`` (d_k := s_k pairwise), ``reduce`` (every d :=
    sum of every s), ``broadcast`` (every d := s0) or ``none``.
    A range's fifth entry says whether it is in LL packet format (a packet
    read waits for its packets to arrive).
    ``signals`` / ``waits`` / ``flushes`` list channel ends ``(gpu,
    "memory" | "port", channel)``, ``relaxed`` says whether they order
    memory; a *proxy* op is the asynchronous transfer of a port-channel
    put, done by the host proxy after ``issuer`` pushed it into the FIFO of
    the end ``fifo``; ``sem_acquire`` /
    ``sem_release`` list ``(gpu, semaphore)``; ``barrier`` is
    ``(barrier_id, num_threadblocks)``.
    """

    index: int
    gpu: int
    tb: int  # global thread block index
    tb_id: int
    pos: int  # index in the thread block's flattened op list
    name: str
    path: str
    combine: str = "none"
    srcs: list | tuple = ()
    dsts: list | tuple = ()
    signals: list | tuple = ()
    waits: list | tuple = ()
    relaxed: bool = False
    sem_acquire: list | tuple = ()
    sem_release: list | tuple = ()
    barrier: tuple | None = None
    flushes: list | tuple = ()
    proxy: bool = False
    issuer: int = -1
    fifo: tuple | None = None

    @property
    def thread_sync(self) -> bool:
        return self.name in THREAD_SYNC

    def describe(self) -> str:
        """``GPU 1 tb 0 op 6 (rres)``: how messages name an op."""
        return f"GPU {self.gpu} tb {self.tb_id} op {self.pos} ({self.name}{', by the proxy' if self.proxy else ''})"

    def where(self) -> dict:
        return {"gpu": self.gpu, "tb": self.tb_id, "op": self.pos, "type": self.name, "path": self.path}


@dataclass(eq=False)
class Plan:
    """A parsed plan: the header, per-GPU sizes, channels, and the ops in
    thread block order (``ops[k].index == k``)."""

    path: str
    name: str
    collective: str | None  # spec name (reduce_scatter, ...); None: no postcondition (synchronisation only)
    coll_written: str
    protocol: str
    inplace: bool
    ngpus: int
    parts: int  # cells per chunk (thread block groups split chunks)
    in_chunks: int
    out_chunks: int
    scratch_chunks: int  # the largest over GPUs
    tb_gpu: list[int]
    tb_ids: list[int]
    ops: list[Op]
    semaphores: list[list[int]]  # per GPU: initial values
    #: per GPU, per memory channel: (peer, tag); tags number a GPU's connections to one
    #: peer, memory channels first, then port channels (executor.cc setupConnections)
    memory_channels: list[list[tuple[int, int]]]
    port_channels: list[list[tuple[int, int]]]
    lint: list[tuple[str, str, str]] = field(default_factory=list)  # (rule, path, message)

    @property
    def threadblocks(self) -> int:
        return len(self.tb_gpu)
