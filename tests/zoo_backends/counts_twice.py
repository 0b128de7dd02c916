"""All-reduce that starts from its own copy of rank 0's buffer, then adds every rank."""

from gather_sum import COMBINE, everyone


class CountsTwice:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        parts = everyone(tensor, self.world_size)
        total = parts[0].clone()
        for part in parts:  # bug: parts[0] is already in total
            total = COMBINE[op](total, part)
        tensor.copy_(total)
