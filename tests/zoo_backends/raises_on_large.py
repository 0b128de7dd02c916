"""All-reduce whose odd ranks raise on buffers over 1000 elements, after the collective
(so no rank is left waiting): the "keep a copy of large messages" path was sized for
1000 elements. Every other case must still run and pass."""

import torch
import torch.distributed as dist


class RaisesOnLarge:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size
        self.stash = torch.empty(1000)

    def all_reduce(self, tensor, op="sum"):
        dist.all_reduce(tensor)
        if self.rank % 2 == 1 and tensor.numel() > 1000:
            self.stash.copy_(tensor.reshape(-1).float())  # bug: RuntimeError, sizes differ
