"""The cost model: what a schedule moves and how long it takes.

Everything is read off the schedule itself, never from a formula per
algorithm: with P the vector's size in bytes and C the schedule's chunks,
every transfer between two ranks moves P / C bytes.

- ``sent`` / ``received``: bytes per rank (the busiest rank is reported);
- ``busiest_rank_in_out``: sent plus received at the busiest rank (the hub's
  load in the hub algorithm);
- alpha-beta time, with every rank able to send and receive ``bandwidth``
  bytes per second at once (one port per rank, full duplex): each step
  costs ``alpha`` plus ``beta = 1 / bandwidth`` times the most bytes any
  rank sends or receives in that step. So direct exchange pays for its
  (N-1) P per rank, and a ring step for one chunk;
- the lower bound: traffic ``bus_factor * P`` (:mod:`collspec.spec.bandwidth`)
  and time ``alpha + beta * bus_factor * P``: at least one step, and the
  busiest rank's bytes through its port. (A model that allowed one message
  per rank per step would add log2 N steps of latency; this one lets a rank
  message all peers at once, as direct exchange does.)

>>> from collspec.models.generators import generate
>>> c = cost(generate("ring", "allreduce", 4), nbytes=1)
>>> c.steps, c.sent, c.lower_bound_bytes
(6, 1.5, 1.5)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..spec.bandwidth import bus_factor
from .schedule import Schedule

DEFAULT_ALPHA = 5e-6  # seconds per step (a typical inter-node message latency)
DEFAULT_BANDWIDTH = 25e9  # bytes per second per directed link


@dataclass(frozen=True)
class Cost:
    algorithm: str
    collective: str
    ranks: int
    nbytes: float
    chunks: int
    steps: int
    sent: float  # bytes the busiest sender sends
    received: float  # bytes the busiest receiver receives
    busiest_rank: int
    busiest_rank_in_out: float
    busiest_link: float  # bytes over the busiest directed link, whole schedule
    seconds: float
    lower_bound_bytes: float
    lower_bound_seconds: float

    def to_json(self) -> dict:
        return asdict(self)


def cost(schedule: Schedule, nbytes: float, *, alpha: float = DEFAULT_ALPHA, bandwidth: float = DEFAULT_BANDWIDTH, algorithm: str = "") -> Cost:
    """Traffic and alpha-beta time of ``schedule`` on a vector of ``nbytes``."""
    n = schedule.ranks
    chunk = nbytes / schedule.chunks
    beta = 1.0 / bandwidth
    sent_chunks = np.zeros(n, dtype=np.int64)
    received_chunks = np.zeros(n, dtype=np.int64)
    link_keys = []
    seconds = 0.0
    for step in schedule.steps:
        network = step.src != step.dst
        src, dst = step.src[network], step.dst[network]
        out_now, in_now = np.bincount(src, minlength=n), np.bincount(dst, minlength=n)
        sent_chunks += out_now
        received_chunks += in_now
        if src.size:
            link_keys.append(src.astype(np.int64) * n + dst)
            seconds += alpha + beta * int(max(out_now.max(), in_now.max())) * chunk
        elif len(step):
            seconds += alpha  # local work only: still a synchronisation step
    sent, received = sent_chunks * chunk, received_chunks * chunk
    per_link = np.unique(np.concatenate(link_keys), return_counts=True)[1] * chunk if link_keys else np.zeros(0)
    in_out = sent + received
    busiest = int(np.argmax(in_out)) if n else 0
    factor = bus_factor(schedule.collective, n)
    return Cost(
        algorithm=algorithm or schedule.name,
        collective=schedule.collective,
        ranks=n,
        nbytes=nbytes,
        chunks=schedule.chunks,
        steps=len(schedule.steps),
        sent=float(sent.max()) if n else 0.0,
        received=float(received.max()) if n else 0.0,
        busiest_rank=busiest,
        busiest_rank_in_out=float(in_out[busiest]) if n else 0.0,
        busiest_link=float(per_link.max()) if per_link.size else 0.0,
        seconds=seconds,
        lower_bound_bytes=factor * nbytes,
        lower_bound_seconds=(alpha if n > 1 else 0.0) + beta * factor * nbytes,
    )
