"""All-reduce whose rank 2 dies (SIGSEGV, as a bad pointer would) on buffers over 1000 elements."""

import os
import signal

import torch.distributed as dist


class CrashesRank:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        if self.rank == 2 and tensor.numel() > 1000:
            os.kill(os.getpid(), signal.SIGSEGV)  # bug: stands for an out-of-bounds write
        dist.all_reduce(tensor)
