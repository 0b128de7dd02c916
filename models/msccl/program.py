"""An MSCCL program as data: the ``<algo>`` file after parsing.

Steps are stored column-wise (one numpy array per attribute, one entry per
``<step>`` in file order, thread block after thread block), so a file of
tens of thousands of steps is cheap to analyse.

The step types, as the public executors define them (msccl-executor-nccl
and RCCL, ``msccl_parser.cc`` for the names and ``msccl_kernel.cu`` /
``msccl_kernel_impl.h`` for what each does; docs/msccl.md has the details):

======  =========================  =======================================
type    name                       effect on the GPU running it
======  =========================  =======================================
s       send                       send ``src``
r       receive                    ``dst`` := received
rcs     receive-copy-send          ``dst`` := received; send received
rrs     receive-reduce-send        send received + ``src`` (nothing stored)
rrc     receive-reduce-copy        ``dst`` := received + ``src``
rrcs    receive-reduce-copy-send   ``dst`` := received + ``src``; send it
cpy     local copy                 ``dst`` := ``src``
re      local reduce               ``dst`` := ``dst`` + ``src``
nop     no operation               only waits on its dependency
res     residual add (SCCL)        ``dst`` += two residual tensors outside
                                   the collective's buffers
ra      residual add (older MSCCL) the same as ``res``
======  =========================  =======================================

A thread block sends to its ``send`` peer and receives from its ``recv``
peer, on channel ``chan``. ``cnt`` consecutive chunks move in one step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

#: step type -> (sends, receives, reduces, reads src, writes dst)
STEP_TYPES: dict[str, tuple[bool, bool, bool, bool, bool]] = {
    "s": (True, False, False, True, False),
    "r": (False, True, False, False, True),
    "rcs": (True, True, False, False, True),
    "rrs": (True, True, True, True, False),
    "rrc": (False, True, True, True, True),
    "rrcs": (True, True, True, True, True),
    "cpy": (False, False, False, True, True),
    "re": (False, False, True, True, True),
    "nop": (False, False, False, False, False),
    "res": (False, False, True, False, True),
    "ra": (False, False, True, False, True),
}
TYPE_NAMES: tuple[str, ...] = tuple(STEP_TYPES)
TYPE_CODES: dict[str, int] = {name: code for code, name in enumerate(TYPE_NAMES)}
NOP = TYPE_CODES["nop"]
RE = TYPE_CODES["re"]
#: residual adds (``res`` from SCCL, ``ra`` from microsoft/msccl)
RESIDUAL = np.array([name in ("res", "ra") for name in TYPE_NAMES], dtype=bool)
#: local reduces read their destination too (``dst`` += ...)
READS_DST = np.array([name in ("re", "res", "ra") for name in TYPE_NAMES], dtype=bool)


def _type_mask(column: int) -> np.ndarray:
    return np.array([STEP_TYPES[name][column] for name in TYPE_NAMES], dtype=bool)


#: indexed by type code
SENDS, RECEIVES, REDUCES, READS_SRC, WRITES_DST = (_type_mask(k) for k in range(5))

BUFFERS = ("i", "o", "s")  # input, output, scratch
BUFFER_CODES = {name: code for code, name in enumerate(BUFFERS)}
INPUT, OUTPUT, SCRATCH = range(3)

#: executor limits (msccl_struct.h of msccl-executor-nccl and RCCL)
MAX_STEPS_PER_TB = 64  # MSCCL_MAX_NUM_STEPS
MAX_COUNT = 72  # MSCCL_MAX_COUNT: cnt must be below it
MAX_REDUCE_FUSION = 16  # MSCCL_MAX_REDUCE_FUSION


@dataclass(eq=False)
class Program:
    """A parsed ``<algo>``.

    ``attrs`` holds the ``<algo>`` attributes as written (strings) and
    ``lines`` the line of each element kind's first occurrence for
    messages. Per GPU: ``i_chunks``, ``o_chunks``, ``s_chunks``. Per thread
    block (global index, GPU-major): ``tb_gpu``, ``tb_id`` (the id written
    in the file), ``tb_send``, ``tb_recv``, ``tb_chan``, ``tb_first`` (its
    first step) and ``tb_steps``. Per step (global index, file order):
    ``gpu``, ``tb`` (global thread block), ``pos`` (index inside its
    thread block), ``type`` (code into :data:`TYPE_NAMES`), ``src_buf`` /
    ``src_off`` / ``dst_buf`` / ``dst_off`` (codes into :data:`BUFFERS`),
    ``cnt``, ``depid`` (a thread block id on the same GPU, or -1), ``deps``,
    ``hasdep``, ``line`` and ``column`` (of the ``<step>``'s ``<``, from 1,
    in characters).
    """

    path: str
    attrs: dict[str, str]
    algo_line: int
    name: str
    collective: str  # canonical spec name (reduce_scatter, ...)
    coll_written: str  # as written in the file
    ngpus: int
    chunks: int  # nchunksperloop
    nchannels: int
    proto: str
    inplace: bool
    outofplace: bool
    root: int
    i_chunks: np.ndarray
    o_chunks: np.ndarray
    s_chunks: np.ndarray
    gpu_line: np.ndarray
    tb_gpu: np.ndarray
    tb_id: np.ndarray
    tb_send: np.ndarray
    tb_recv: np.ndarray
    tb_chan: np.ndarray
    tb_first: np.ndarray
    tb_steps: np.ndarray
    tb_line: np.ndarray
    gpu: np.ndarray
    tb: np.ndarray
    pos: np.ndarray
    type: np.ndarray
    src_buf: np.ndarray
    src_off: np.ndarray
    dst_buf: np.ndarray
    dst_off: np.ndarray
    cnt: np.ndarray
    depid: np.ndarray
    deps: np.ndarray
    hasdep: np.ndarray
    line: np.ndarray
    column: np.ndarray
    #: attributes no executor reads, as (element, attribute, line)
    unknown_attrs: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.type)

    @property
    def threadblocks(self) -> int:
        return len(self.tb_gpu)

    def where(self, step: int) -> dict:
        """The location of a step for a report: GPU, thread block, step, type, line, column."""
        tb = int(self.tb[step])
        return {
            "gpu": int(self.gpu[step]),
            "tb": int(self.tb_id[tb]),
            "step": int(self.pos[step]),
            "type": TYPE_NAMES[int(self.type[step])],
            "line": int(self.line[step]),
            "column": int(self.column[step]),
        }

    def describe(self, step: int) -> str:
        """``GPU 2 tb 1 step 5 (rrs)``: how messages name a step."""
        w = self.where(step)
        return f"GPU {w['gpu']} tb {w['tb']} step {w['step']} ({w['type']})"

    @cached_property
    def gpu_tb_base(self) -> np.ndarray:
        """Global index of each GPU's thread block 0."""
        counts = np.bincount(self.tb_gpu, minlength=self.ngpus)[: self.ngpus]
        return np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)


def spread(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items with ``counts[k]`` parts each: (item of each part, index of
    the part inside its item).

    >>> [a.tolist() for a in spread([2, 0, 1])]
    [[0, 0, 2], [0, 1, 0]]
    """
    counts = np.asarray(counts, dtype=np.int64)
    item = np.repeat(np.arange(counts.size), counts)
    starts = np.cumsum(counts) - counts
    return item, np.arange(item.size) - starts[item]
