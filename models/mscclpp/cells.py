"""Where a plan's buffers live in the cells of a models
:class:`~collspec.models.schedule.Layout`: the cell map of the MSCCL
importer (:class:`collspec.models.msccl.cells.CellMap`), reused.

Every rank's input, output and scratch buffers are cut into the plan's
chunks (the same chunk size for all three, see :mod:`.parse`), each split
into ``parts`` cells. In place (``"inplace": true``), the input and output
are one memory as the executor's callers pass them: the same buffer for
allreduce and alltoall; for allgather rank r's input is block r of its
output; for reducescatter rank r's output is block r of its input. Out of
place they are separate cells. After the data and the scratch cells, each
rank gets the *register* cells that :mod:`.lower` uses to hold a reduction
while it is computed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..msccl.cells import IN_PLACE, OUT_OF_PLACE, CellMap

__all__ = ["PlanCells", "cell_map", "IN_PLACE", "OUT_OF_PLACE"]


@dataclass(frozen=True)
class PlanCells(CellMap):
    """MSCCL's cell map, with names that show chunk parts and registers."""

    parts: int = 1

    def names(self) -> tuple[str, ...]:
        names = super().names()
        out = []
        for k, name in enumerate(names):
            if k >= self.message_base:
                out.append(f"register {k - self.message_base}")
                continue
            buffer, _, rest = name.partition("[")
            index = int(rest.rstrip("]"))
            out.append(name if self.parts == 1 else f"{buffer}[{index // self.parts}.{index % self.parts}]")
        return tuple(out)


def cell_map(plan, registers: int = 0) -> PlanCells:
    """The cell map of ``plan`` with ``registers`` register cells per rank."""
    p = plan.parts
    in_size, out_size = plan.in_chunks * p, plan.out_chunks * p
    mode = IN_PLACE if plan.inplace else OUT_OF_PLACE
    data = in_size + out_size if mode == OUT_OF_PLACE else max(in_size, out_size)
    scratch = plan.scratch_chunks * p
    return PlanCells(
        mode=mode, collective=plan.collective, ranks=plan.ngpus, chunks=max(in_size, out_size), in_size=in_size,
        out_size=out_size, scratch_base=data, message_base=data + scratch, cells=data + scratch + registers, root=0,
        output_name="i", parts=p,
    )
