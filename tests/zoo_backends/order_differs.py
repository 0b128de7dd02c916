"""All-reduce where each rank adds the buffers starting from its own.

Every rank's sum is accurate, but floating-point addition is not
associative, so the ranks end with different bits.
"""

from gather_sum import COMBINE, everyone


class OrderDiffers:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        parts = everyone(tensor, self.world_size)
        total = parts[self.rank].clone()
        for k in range(1, self.world_size):  # bug: the order depends on the rank
            total = COMBINE[op](total, parts[(self.rank + k) % self.world_size])
        tensor.copy_(total)
