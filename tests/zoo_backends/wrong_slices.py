"""Reduce-scatter that hands rank r the block meant for rank r + 1."""

import torch.distributed as dist


class WrongSlices:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def reduce_scatter(self, output, input, op="sum"):
        total = input.clone()
        dist.all_reduce(total)
        block = output.numel()
        mine = (self.rank + 1) % self.world_size  # bug: off by one rank
        output.copy_(total[mine * block : (mine + 1) * block])
