"""A plain, correct backend written the way NCCL and torch define the collectives:
equal blocks only (input = world_size x output), no ``_v`` methods, and integer
average refused. ``tests/test_conformance_protocol.py`` runs conform on it."""

import torch
import torch.distributed as dist

COMBINE = {"sum": torch.add, "avg": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}


class NcclStyle:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def _reduce(self, tensor, op):
        if op == "avg" and not tensor.is_floating_point():
            raise NotImplementedError("integer avg")
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor.contiguous())
        total = parts[0].clone()
        for part in parts[1:]:
            total = COMBINE[op](total, part)
        return total / self.world_size if op == "avg" else total

    def all_reduce(self, tensor, op="sum"):
        tensor.copy_(self._reduce(tensor, op))

    def reduce_scatter(self, output, input, op="sum"):
        blocks = input.reshape(self.world_size, output.numel())  # equal blocks, as in ncclReduceScatter
        output.copy_(self._reduce(blocks, op)[self.rank])

    def all_gather(self, output, input):
        dist.all_gather(list(output.view(self.world_size, -1).unbind(0)), input.clone())

    def broadcast(self, tensor, root):
        dist.broadcast(tensor, src=root)
