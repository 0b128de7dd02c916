"""collspec.spec itself as a backend: the harness checking itself.

Every rank gathers every rank's buffer (over the torch.distributed process
group, as raw bytes) and computes its own result with the spec's function.
It supports every collective, dtype, op, size and in-place mode the spec
defines, so ``collspec conform --backend reference`` must pass everything:
a failure there is a bug in the harness or the spec, not in a backend.
"""

from __future__ import annotations

import numpy as np

from .. import spec
from .tensors import to_numpy, to_torch


class Reference:
    """The spec's collectives over gathered copies of every rank's buffer."""

    def __init__(self, rank: int, world_size: int):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.world_size = rank, world_size

    def _everyone(self, tensor) -> list[np.ndarray]:
        """Every rank's copy of ``tensor`` (their lengths may differ)."""
        torch, mine = self.torch, to_numpy(tensor)
        lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world_size)]
        self.dist.all_gather(lengths, torch.tensor([mine.nbytes], dtype=torch.int64))
        longest = max(int(n) for n in lengths)
        padded = torch.zeros(longest, dtype=torch.uint8)
        padded[: mine.nbytes] = torch.from_numpy(mine.view(np.uint8).copy())
        gathered = [torch.zeros(longest, dtype=torch.uint8) for _ in range(self.world_size)]
        self.dist.all_gather(gathered, padded)
        return [g[: int(n)].numpy().view(mine.dtype) for g, n in zip(gathered, lengths)]

    def _write(self, tensor, values: np.ndarray) -> None:
        tensor.copy_(to_torch(values, str(tensor.device)))

    def all_reduce(self, tensor, op: str = "sum") -> None:
        self._write(tensor, spec.all_reduce(self._everyone(tensor), op)[self.rank])

    def reduce_scatter(self, output, input, op: str = "sum") -> None:
        rows = self._everyone(input)
        counts = [len(block) for block in self._everyone(output)]
        self._write(output, spec.reduce_scatter_v(rows, counts, op)[self.rank])

    def all_gather(self, output, input) -> None:
        self._write(output, spec.all_gather_v(self._everyone(input))[self.rank])

    # the spec's _v forms take any per-rank counts, equal ones included
    reduce_scatter_v = reduce_scatter
    all_gather_v = all_gather

    def broadcast(self, tensor, root: int) -> None:
        self._write(tensor, spec.broadcast(self._everyone(tensor), root)[self.rank])

    def reduce(self, tensor, root: int, op: str = "sum") -> None:
        result = spec.reduce(self._everyone(tensor), root, op)[self.rank]
        if result is not None:
            self._write(tensor, result)

    def all_to_all(self, output, input) -> None:
        self._write(output, spec.all_to_all(self._everyone(input))[self.rank])
