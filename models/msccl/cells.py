"""Where an MSCCL program's buffers live in the cells of a models
:class:`~collspec.models.schedule.Layout`.

``nchunksperloop`` (C) cuts the collective's whole buffer into chunks: the
vector of all-reduce, broadcast and reduce, the whole output of all-gather,
the whole input of reduce-scatter, one rank's buffer of all-to-all. So a
GPU's input and output buffers hold (msccl_parser.cc, ``sizeMultiplier``):

==============  ============  ============
collective      input chunks  output chunks
==============  ============  ============
allreduce       C             C
broadcast       C             C
reduce          C             C
alltoall        C             C
allgather       C / N         C
reduce_scatter  C             C / N
==============  ============  ============

In place, the two buffers are one memory, as the executors decide
(``mscclInternalSchedulerSelectAlgo`` in msccl_lifecycle.cc): the same
buffer for allreduce, broadcast, reduce and alltoall; for allgather rank
r's input is block r of its output (``i[k]`` is ``o[r*C/N + k]``); for
reduce_scatter rank r's output is block r of its input (``o[k]`` is
``i[r*C/N + k]``). Out of place the buffers are separate cells.

Cells per rank: the data cells, then the scratch buffer, then one cell per
chunk the GPU receives (the message in flight, see :mod:`.lower`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..schedule import INDEX, Layout
from .program import INPUT, OUTPUT, SCRATCH

IN_PLACE, OUT_OF_PLACE = "in-place", "out-of-place"
_BLOCK_INPUT = ("allgather",)
_BLOCK_OUTPUT = ("reduce_scatter",)


def data_sizes(collective: str, chunks: int, ngpus: int, fail: Callable[[str, str], Exception]) -> tuple[int, int]:
    """(input chunks, output chunks) of one GPU; ``fail(what, fix)`` builds the
    error for a chunk count the collective cannot split."""
    if collective in _BLOCK_INPUT + _BLOCK_OUTPUT + ("alltoall",):
        if chunks % ngpus:
            raise fail(f"a {collective} needs nchunksperloop divisible by ngpus (got {chunks} for {ngpus} GPUs)", "use a multiple of ngpus")
        block = chunks // ngpus
        if collective in _BLOCK_INPUT:
            return block, chunks
        if collective in _BLOCK_OUTPUT:
            return chunks, block
    return chunks, chunks


@dataclass(frozen=True)
class CellMap:
    """The cell of every (rank, buffer, offset) in one mode, and the Layout."""

    mode: str
    collective: str
    ranks: int
    chunks: int
    in_size: int
    out_size: int
    scratch_base: int
    message_base: int
    cells: int
    root: int
    output_name: str  # "i" or "o": how in-place shared cells are named

    def cell(self, rank, buffer, offset) -> np.ndarray:
        """Vectorised: the cell holding ``buffer[offset]`` on ``rank``."""
        rank, buffer, offset = (np.asarray(a, dtype=np.int64) for a in (rank, buffer, offset))
        if self.mode == OUT_OF_PLACE:
            base = np.array([0, self.in_size, self.scratch_base], dtype=np.int64)
            return base[buffer] + offset
        block = self.chunks // self.ranks
        shift = np.zeros_like(offset)
        if self.collective in _BLOCK_INPUT:
            shift = np.where(buffer == INPUT, rank * block, 0)
        elif self.collective in _BLOCK_OUTPUT:
            shift = np.where(buffer == OUTPUT, rank * block, 0)
        return np.where(buffer == SCRATCH, self.scratch_base, shift) + offset

    def layout(self) -> Layout:
        n = self.ranks
        none = np.zeros(0, dtype=INDEX)
        inputs = tuple(self.cell(r, INPUT, np.arange(self.in_size)).astype(INDEX) for r in range(n))
        outputs = tuple(
            none if (self.collective == "reduce" and r != self.root) else self.cell(r, OUTPUT, np.arange(self.out_size)).astype(INDEX)
            for r in range(n)
        )
        return Layout(cells=self.cells, inputs=inputs, outputs=outputs, cell_names=self.names())

    def names(self) -> tuple[str, ...]:
        if self.mode == OUT_OF_PLACE:
            data = [f"i[{k}]" for k in range(self.in_size)] + [f"o[{k}]" for k in range(self.out_size)]
        else:
            shared = "o" if self.collective in _BLOCK_INPUT else "i" if self.collective in _BLOCK_OUTPUT else self.output_name
            data = [f"{shared}[{k}]" for k in range(self.scratch_base)]
        scratch = [f"s[{k}]" for k in range(self.message_base - self.scratch_base)]
        messages = [f"message chunk {k}" for k in range(self.cells - self.message_base)]
        return tuple(data + scratch + messages)


def cell_map(program, mode: str, message_cells: int) -> CellMap:
    """The cell map of ``program`` in ``mode`` with room for ``message_cells``
    received chunks per rank."""
    n, c = program.ngpus, program.chunks
    in_size, out_size = data_sizes(program.collective, c, n, lambda what, fix: ValueError(what))
    data = in_size + out_size if mode == OUT_OF_PLACE else c
    scratch = int(program.s_chunks.max()) if program.ngpus else 0
    output_name = "o" if int(program.o_chunks.max()) > 0 else "i"
    return CellMap(
        mode=mode, collective=program.collective, ranks=n, chunks=c, in_size=in_size, out_size=out_size,
        scratch_base=data, message_base=data + scratch, cells=data + scratch + message_cells, root=program.root,
        output_name=output_name,
    )
