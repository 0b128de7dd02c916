"""MPI (mpi4py) behind the plug-in protocol, for processes started by mpiexec.

Each method is one MPI call on the rank's CPU tensors, viewed as numpy
arrays. What MPI cannot express is refused with NotImplementedError, so it
is reported ``unsupported``, never passed:

- ``avg``: MPI has no averaging operation (a sum and a division would be this
  shim's arithmetic, not MPI's);
- bfloat16 where the MPI library has no bfloat16 datatype (``MPI.BFLOAT16_T``
  is null, as in Open MPI 5.0); where it has one, the buffer is passed with it;
- in-place reduce-scatter: ``MPI_IN_PLACE`` leaves the result at the start of
  the buffer, not at the rank's block as the NCCL convention requires.

In-place all-gather is ``MPI_IN_PLACE`` (same convention as NCCL). Equal
blocks are ``MPI_Reduce_scatter_block`` and ``MPI_Allgather``; unequal blocks
(``reduce_scatter_v``, ``all_gather_v``) are ``MPI_Reduce_scatter`` with
counts and ``MPI_Allgatherv``, after the ranks exchange their block sizes.
Errors MPI raises for an operation or datatype it lacks (``MPI_ERR_OP``,
``MPI_ERR_TYPE``) are refusals too.
"""

from __future__ import annotations


class Mpi:
    """The collectives of ``MPI_COMM_WORLD``."""

    def __init__(self, rank: int, world_size: int):
        from mpi4py import MPI

        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        if (self.comm.Get_rank(), self.comm.Get_size()) != (rank, world_size):
            raise RuntimeError(
                f"MPI says rank {self.comm.Get_rank()} of {self.comm.Get_size()}, "
                f"torch.distributed rank {rank} of {world_size}: launch with mpiexec -n {world_size}"
            )
        self.rank = rank
        self.ops = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}

    def _op(self, op: str):
        if op not in self.ops:
            raise NotImplementedError(f"MPI has no {op} operation")
        return self.ops[op]

    def _buffer(self, tensor, counts=None):
        """The tensor as an mpi4py buffer (shared memory), with ``counts`` for the v forms."""
        import torch

        if tensor.dtype != torch.bfloat16:
            array = tensor.numpy()
            return array if counts is None else [array, counts]
        if self.MPI.BFLOAT16_T == self.MPI.DATATYPE_NULL:
            raise NotImplementedError(f"{self.MPI.Get_library_version().split(',')[0]} has no bfloat16 datatype (MPI_BFLOAT16_T is null)")
        array = tensor.view(torch.int16).numpy()
        return [array, self.MPI.BFLOAT16_T] if counts is None else [array, counts, self.MPI.BFLOAT16_T]

    def _call(self, function, *args, **kwargs) -> None:
        try:
            function(*args, **kwargs)
        except self.MPI.Exception as error:
            if error.Get_error_class() in (self.MPI.ERR_OP, self.MPI.ERR_TYPE):
                raise NotImplementedError(f"MPI refused: {error.Get_error_string()}") from error
            raise

    def all_reduce(self, tensor, op: str = "sum") -> None:
        self._call(self.comm.Allreduce, self.MPI.IN_PLACE, self._buffer(tensor), op=self._op(op))

    @staticmethod
    def _in_place(output, input) -> bool:
        return output.untyped_storage().data_ptr() == input.untyped_storage().data_ptr()

    def _refuse_in_place_scatter(self, output, input) -> None:
        if self._in_place(output, input):
            raise NotImplementedError("MPI_IN_PLACE reduce-scatter leaves the result at offset 0, not at the rank's block")

    def reduce_scatter(self, output, input, op: str = "sum") -> None:
        self._refuse_in_place_scatter(output, input)
        self._call(self.comm.Reduce_scatter_block, self._buffer(input), self._buffer(output), op=self._op(op))

    def reduce_scatter_v(self, output, input, op: str = "sum") -> None:
        self._refuse_in_place_scatter(output, input)
        counts = self.comm.allgather(output.numel())
        self._call(self.comm.Reduce_scatter, self._buffer(input), self._buffer(output), recvcounts=counts, op=self._op(op))

    def all_gather(self, output, input) -> None:
        mine = self.MPI.IN_PLACE if self._in_place(output, input) else self._buffer(input)
        self._call(self.comm.Allgather, mine, self._buffer(output))

    def all_gather_v(self, output, input) -> None:
        received = self._buffer(output, self.comm.allgather(input.numel()))
        mine = self.MPI.IN_PLACE if self._in_place(output, input) else self._buffer(input)
        self._call(self.comm.Allgatherv, mine, received)

    def broadcast(self, tensor, root: int) -> None:
        self._call(self.comm.Bcast, self._buffer(tensor), root=root)

    def reduce(self, tensor, root: int, op: str = "sum") -> None:
        mine = self._buffer(tensor)
        if self.rank == root:
            self._call(self.comm.Reduce, self.MPI.IN_PLACE, mine, op=self._op(op), root=root)
        else:
            self._call(self.comm.Reduce, mine, None, op=self._op(op), root=root)

    def all_to_all(self, output, input) -> None:
        self._call(self.comm.Alltoall, self._buffer(input), self._buffer(output))
