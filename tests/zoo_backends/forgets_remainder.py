"""Chunked all-reduce: N equal chunks of count // N; the count % N tail is forgotten."""

import torch.distributed as dist


class ForgetsRemainder:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def all_reduce(self, tensor, op="sum"):
        if op != "sum":
            raise NotImplementedError(op)
        chunk = tensor.numel() // self.world_size
        for k in range(self.world_size):  # bug: elements past N * chunk are never reduced
            piece = tensor[k * chunk : (k + 1) * chunk].clone()
            dist.all_reduce(piece)
            tensor[k * chunk : (k + 1) * chunk] = piece
