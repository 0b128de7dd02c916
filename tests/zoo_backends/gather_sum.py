"""A shared piece of the zoo: every rank's buffer, gathered (no bug here)."""

import torch
import torch.distributed as dist

COMBINE = {"sum": torch.add, "avg": torch.add, "prod": torch.mul, "min": torch.minimum, "max": torch.maximum}


def everyone(tensor, world_size):
    parts = [torch.empty_like(tensor) for _ in range(world_size)]
    dist.all_gather(parts, tensor.contiguous())
    return parts
