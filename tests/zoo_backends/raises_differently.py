"""All-reduce whose ranks each raise their own error before communicating: rank 0 a
ValueError (it rejects the buffer), every other rank a ConnectionError (its link is down)."""


class RaisesDifferently:
    def __init__(self, rank, world_size):
        self.rank = rank

    def all_reduce(self, tensor, op="sum"):
        if self.rank == 0:
            raise ValueError(f"buffer of {tensor.numel()} elements is not 16-byte aligned")
        raise ConnectionError(f"rank {self.rank}: link to rank 0 is down")
