"""All-reduce with a size header that rank 0 does not send for empty buffers."""

import torch
import torch.distributed as dist


class HangsOnZero:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        header = torch.tensor([tensor.numel()])
        if self.rank == 0:
            if tensor.numel() == 0:
                return  # bug: "nothing to do", but the others wait for the header
            for peer in range(1, self.world_size):
                dist.send(header, peer)
        else:
            dist.recv(header, 0)
        dist.all_reduce(tensor)
