"""All-reduce that always sums, whatever op it is given."""

import torch.distributed as dist


class IgnoresOp:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        dist.all_reduce(tensor)  # bug: op is never looked at
