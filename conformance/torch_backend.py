"""torch.distributed's own collectives behind the plug-in protocol (gloo, nccl).

A thin shim: each method is one torch.distributed call. What torch refuses
for an (op, dtype) or a shape, it refuses by raising; the shim turns the
refusals it recognises (:data:`REFUSALS`) into NotImplementedError, so they
are reported ``unsupported`` with torch's own message, and lets every other
error through (reported as a ``crash``).

``reduce_scatter`` and ``all_gather`` take equal blocks, as the protocol
promises (``reduce_scatter_tensor``, ``all_gather_into_tensor``). Unequal
blocks (``reduce_scatter_v``, ``all_gather_v``) go through the list forms of
the API, after the ranks exchange their block sizes, since each rank only
knows its own. gloo refuses unequal all-gather blocks (reported
``unsupported``); nccl takes them.
"""

from __future__ import annotations

#: Substrings of the errors torch.distributed raises when it refuses a call
#: before communicating (seen with gloo in torch 2.13: integer AVG fails to
#: cast the mean back; unequal all-gather blocks fail a size check).
REFUSALS = ("can't be cast", "not supported", "unsupported", "cannot use", "does not support", "invalid tensor size")


class TorchDistributed:
    """The collectives of the default process group, on the rank's tensors."""

    def __init__(self, rank: int, world_size: int):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.world_size = rank, world_size
        self.ops = _Ops({
            "sum": dist.ReduceOp.SUM,
            "prod": dist.ReduceOp.PRODUCT,
            "min": dist.ReduceOp.MIN,
            "max": dist.ReduceOp.MAX,
            "avg": dist.ReduceOp.AVG,
        })
        self._reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def _call(self, function, *args, **kwargs) -> None:
        try:
            function(*args, **kwargs)
        except (RuntimeError, ValueError) as error:
            text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            if any(pattern in text.lower() for pattern in REFUSALS):
                raise NotImplementedError(f"torch.distributed ({self.dist.get_backend()}) refused: {text}") from error
            raise

    def _block_sizes(self, mine: int, device) -> list[int]:
        """Every rank's block size (each rank knows only its own); on ``device``, as nccl requires."""
        sizes = [self.torch.zeros(1, dtype=self.torch.int64, device=device) for _ in range(self.world_size)]
        self.dist.all_gather(sizes, self.torch.tensor([mine], dtype=self.torch.int64, device=device))
        return [int(s) for s in sizes]

    def all_reduce(self, tensor, op: str = "sum") -> None:
        self._call(self.dist.all_reduce, tensor, op=self.ops[op])

    def reduce_scatter(self, output, input, op: str = "sum") -> None:
        self._call(self._reduce_scatter, output, input, op=self.ops[op])

    def reduce_scatter_v(self, output, input, op: str = "sum") -> None:
        blocks = list(input.split(self._block_sizes(output.numel(), input.device)))
        self._call(self.dist.reduce_scatter, output, blocks, op=self.ops[op])

    def all_gather(self, output, input) -> None:
        self._call(self._all_gather, output, input)

    def all_gather_v(self, output, input) -> None:
        self._call(self.dist.all_gather, list(output.split(self._block_sizes(input.numel(), input.device))), input)

    def broadcast(self, tensor, root: int) -> None:
        self._call(self.dist.broadcast, tensor, src=root)

    def reduce(self, tensor, root: int, op: str = "sum") -> None:
        self._call(self.dist.reduce, tensor, dst=root, op=self.ops[op])

    def all_to_all(self, output, input) -> None:
        self._call(self.dist.all_to_all_single, output, input)


class Gloo(TorchDistributed):
    """torch.distributed with the gloo process group, tensors on the CPU."""


class Nccl(TorchDistributed):
    """torch.distributed with the nccl process group, tensors on the rank's GPU."""


class _Ops(dict):
    """torch's reduce ops by spec name; an op torch lacks (compose: torch.distributed
    has no non-commutative or user op) is a refusal."""

    def __missing__(self, op: str):
        raise NotImplementedError(f"torch.distributed has no {op} operation (no user-defined or non-commutative ops)")
