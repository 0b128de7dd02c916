"""All-reduce by gather-and-add whose loop stops one rank short."""

from gather_sum import COMBINE, everyone


class DropsRank:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        parts = everyone(tensor, self.world_size)
        total = parts[0].clone()
        for part in parts[1 : self.world_size - 1]:  # bug: range ends one early
            total = COMBINE[op](total, part)
        tensor.copy_(total)
