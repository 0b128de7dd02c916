"""All-reduce whose average divides by N - 1."""

import torch.distributed as dist


class AvgWrongN:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        if op not in ("sum", "avg"):
            raise NotImplementedError(op)
        dist.all_reduce(tensor)
        if op == "avg":
            tensor.div_(self.world_size - 1)  # bug: N - 1
