"""A gloo all-reduce that goes wrong on purpose, for the cluster tests.

``COLLSPEC_FAULT=KIND:RANK:CALL`` makes rank RANK, at its CALL-th
all_reduce (from 1): ``kill`` itself (SIGKILL), ``hang`` (sleep), or
``drop`` (contribute zeros from then on), or ``corrupt`` (every rank from
RANK on adds 1 to its result of that call: a bad node when those ranks
share a host). With ``COLLSPEC_FAULT_ONCE=PATH`` the fault happens in one
job only: the rank creates PATH when it strikes, and a job that finds PATH
behaves. Hosts are named by ``--host``-free means: the test reads them from
the report.
"""

from __future__ import annotations

import os
import signal
import time

from collspec.conformance.torch_backend import Gloo


class Faulty(Gloo):
    def __init__(self, rank: int, world_size: int):
        super().__init__(rank, world_size)
        self.calls = 0
        kind, fault_rank, call = (os.environ.get("COLLSPEC_FAULT") or "none:-1:0").split(":")
        once = os.environ.get("COLLSPEC_FAULT_ONCE")
        if once and os.path.exists(once):
            kind = "none"
        self.kind, self.fault_rank, self.at, self.once = kind, int(fault_rank), int(call), once

    def all_reduce(self, tensor, op: str = "sum") -> None:
        self.calls += 1
        mine = self.rank == self.fault_rank and self.kind != "none"
        if mine and self.calls == self.at and self.once:
            open(self.once, "w").close()
        if mine and self.calls == self.at and self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mine and self.calls == self.at and self.kind == "hang":
            time.sleep(3600)
        if mine and self.calls >= self.at and self.kind == "drop":
            tensor.zero_()
        super().all_reduce(tensor, op)
        if self.kind == "corrupt" and self.rank >= self.fault_rank and self.calls == self.at:
            tensor.add_(1)
