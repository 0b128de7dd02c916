"""All-reduce whose rank 1 ends its process with exit status 0 in the middle of the call
(a library calling ``exit(0)`` on an error path), while rank 0 waits for its message."""

import os

import torch.distributed as dist


class ExitsQuietly:
    def __init__(self, rank, world_size):
        self.rank = rank

    def all_reduce(self, tensor, op="sum"):
        if self.rank == 1:
            os._exit(0)  # bug: "clean" exit from inside the collective
        store = dist.distributed_c10d._get_default_store()
        store.wait(["rank1-sent"])  # never set: rank 0 waits as in a receive that never completes
