"""MPI (mpi4py) behind the plug-in protocol, for processes started by mpiexec.

One class for every MPI library (:mod:`.mpi_libs`): the launcher sets
``MPI4PY_LIBMPI`` (which library mpi4py loads) and ``COLLSPEC_MPI_LIBRARY``
(which one that should be: the constructor checks the library's version
string, so a wrong library is a set-up error, not a silent substitute).

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
counts and ``MPI_Allgatherv``, after the ranks exchange their block sizes
(:data:`.mpi_libs.FUNCTIONS`: a forced algorithm is that function's). The
sizes go by ``MPI_Allgather`` of one int64 per rank, never by mpi4py's
pickled ``allgather``: that one runs ``MPI_Allgatherv``, so a forced
all-gather-v algorithm would run (and fail, or be refused) in this shim's
own bookkeeping instead of in the case.
Errors MPI raises for an operation or datatype it lacks (``MPI_ERR_OP``,
``MPI_ERR_TYPE``, ``MPI_ERR_UNSUPPORTED_OPERATION``) are refusals too, and so
is an error whose text is the library refusing a forced algorithm
(:attr:`~.mpi_libs.Library.refusal`, e.g. MPICH's "not usable").

``compose``, the spec's non-commutative op, is a user operation created with
``commute=False`` whose function is the spec's own combiner: MPI calls it as
``inoutvec = invec ⋆ inoutvec`` with ``invec`` from the lower ranks, so a
library that keeps rank order returns the spec's bits.
"""

from __future__ import annotations

import os
import re

#: What each library's MPI_Get_library_version starts with.
LIBRARY_VERSION = {"openmpi": "Open MPI", "mpich": "MPICH", "intelmpi": "Intel(R) MPI"}


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
        self.user_ops: dict = {}
        self.library = os.environ.get("COLLSPEC_MPI_LIBRARY")
        self.refusal = r"(?!)"
        if self.library:
            from .mpi_libs import library

            self.refusal = library(self.library).refusal
            found = MPI.Get_library_version()
            if not found.startswith(LIBRARY_VERSION[self.library]):
                raise RuntimeError(f"expected {library(self.library).title}, mpi4py loaded {found.splitlines()[0][:60]}")

    def _op(self, op: str, tensor=None):
        if op == "compose" and tensor is not None:
            return self._user_op(op, tensor)
        if op not in self.ops:
            raise NotImplementedError(f"MPI has no {op} operation")
        return self.ops[op]

    def _user_op(self, op: str, tensor):
        """A non-commutative MPI user op computing the spec's ``op`` on the tensor's dtype."""
        import numpy as np

        from ..spec.ops import combiner

        dtype = tensor.numpy().dtype
        if (op, dtype) not in self.user_ops:
            combine = combiner(op, dtype)

            def function(invec, inoutvec, datatype):
                mine = np.frombuffer(inoutvec, dtype=dtype)
                mine[:] = combine(np.frombuffer(invec, dtype=dtype), mine)

            self.user_ops[(op, dtype)] = self.MPI.Op.Create(function, commute=False)
        return self.user_ops[(op, dtype)]

    def _buffer(self, tensor, counts=None):
        """The tensor as an mpi4py buffer (shared memory), with ``counts`` for the v forms."""
        import torch

        if tensor.dtype != torch.bfloat16:
            array = tensor.numpy()
            return array if counts is None else [array, counts]
        if self.MPI.BFLOAT16_T == self.MPI.DATATYPE_NULL:
            raise NotImplementedError(f"{self._version()} has no bfloat16 datatype (MPI_BFLOAT16_T is null)")
        array = tensor.view(torch.int16).numpy()
        return [array, self.MPI.BFLOAT16_T] if counts is None else [array, counts, self.MPI.BFLOAT16_T]

    def _version(self) -> str:
        """The library's name and version, from the first line of MPI_Get_library_version."""
        return " ".join(self.MPI.Get_library_version().splitlines()[0].split(",")[0].split())

    def _call(self, function, *args, **kwargs) -> None:
        try:
            function(*args, **kwargs)
        except self.MPI.Exception as error:
            text = error.Get_error_string()
            refused = (self.MPI.ERR_OP, self.MPI.ERR_TYPE, getattr(self.MPI, "ERR_UNSUPPORTED_OPERATION", self.MPI.ERR_OP))
            if error.Get_error_class() in refused or re.search(self.refusal, text):
                lines = [re.sub(r"^\S+\(\d+\)\.*:\s*", "", line.strip()) for line in text.splitlines() if line.strip()]
                said = lines[-1] if lines else text
                if len(text) >= self.MPI.MAX_ERROR_STRING - 1:  # the library stopped at its buffer: say so, not a cut word
                    said += f" … (the library's message stops at its {self.MPI.MAX_ERROR_STRING}-character limit)"
                raise NotImplementedError(f"MPI refused: {said}") from error
            raise

    def _sizes(self, count: int) -> list[int]:
        """Every rank's ``count``, by ``MPI_Allgather`` (never a function a v-form case forces)."""
        import numpy as np

        mine, every = np.array([count], dtype=np.int64), np.zeros(self.comm.Get_size(), dtype=np.int64)
        self.comm.Allgather([mine, self.MPI.INT64_T], [every, self.MPI.INT64_T])
        return every.tolist()

    def all_reduce(self, tensor, op: str = "sum") -> None:
        self._call(self.comm.Allreduce, self.MPI.IN_PLACE, self._buffer(tensor), op=self._op(op, tensor))

    @staticmethod
    def _in_place(output, input) -> bool:
        return output.untyped_storage().data_ptr() == input.untyped_storage().data_ptr()

    def _refuse_in_place_scatter(self, output, input) -> None:
        if self._in_place(output, input):
            raise NotImplementedError("MPI_IN_PLACE reduce-scatter leaves the result at offset 0, not at the rank's block")

    def reduce_scatter(self, output, input, op: str = "sum") -> None:
        self._refuse_in_place_scatter(output, input)
        self._call(self.comm.Reduce_scatter_block, self._buffer(input), self._buffer(output), op=self._op(op, input))

    def reduce_scatter_v(self, output, input, op: str = "sum") -> None:
        self._refuse_in_place_scatter(output, input)
        counts = self._sizes(output.numel())
        self._call(self.comm.Reduce_scatter, self._buffer(input), self._buffer(output), recvcounts=counts, op=self._op(op, input))

    def all_gather(self, output, input) -> None:
        mine = self.MPI.IN_PLACE if self._in_place(output, input) else self._buffer(input)
        self._call(self.comm.Allgather, mine, self._buffer(output))

    def all_gather_v(self, output, input) -> None:
        received = self._buffer(output, self._sizes(input.numel()))
        mine = self.MPI.IN_PLACE if self._in_place(output, input) else self._buffer(input)
        self._call(self.comm.Allgatherv, mine, received)

    def broadcast(self, tensor, root: int) -> None:
        self._call(self.comm.Bcast, self._buffer(tensor), root=root)

    def reduce(self, tensor, root: int, op: str = "sum") -> None:
        mine, mpi_op = self._buffer(tensor), self._op(op, tensor)
        if self.rank == root:
            self._call(self.comm.Reduce, self.MPI.IN_PLACE, mine, op=mpi_op, root=root)
        else:
            self._call(self.comm.Reduce, mine, None, op=mpi_op, root=root)

    def all_to_all(self, output, input) -> None:
        self._call(self.comm.Alltoall, self._buffer(input), self._buffer(output))
