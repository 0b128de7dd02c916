"""How many bytes a collective must move: the bandwidth lower bound.

For a collective over N ranks on a buffer of S bytes (S as nccl-tests
counts it: the whole vector for all-reduce, broadcast and reduce; the whole
input of reduce-scatter; the whole output of all-gather; one rank's buffer
for all-to-all), some rank must send or receive at least ``factor * S``:

=============== =============== ============================================
collective      factor          why
=============== =============== ============================================
allreduce       2(N-1)/N        each rank must send (N-1)/N of the data to be
                                reduced elsewhere and receive (N-1)/N of the
                                result (Patarasuk and Yuan)
reduce_scatter  (N-1)/N         each rank's input is needed in N-1 other slices
allgather       (N-1)/N         each rank must receive the other N-1 slices
alltoall        (N-1)/N         each rank sends N-1 of its N blocks away
broadcast       1               the root must send all of its data at least once
reduce          1               the root must receive S bytes of partial results
=============== =============== ============================================

The same factors turn nccl-tests' algorithm bandwidth into bus bandwidth
(busbw = algbw * factor), so one table serves the checker's optimality
warning, the cost model's lower bound and ``collspec bench``.

>>> bus_factor("allreduce", 4), bus_factor("allgather", 4)
(1.5, 0.75)
"""

from __future__ import annotations

from .collectives import collective_name


#: collective -> its factor as a formula in N >= 2 (the table above); plain
#: arithmetic, so the proofs evaluate the same formula with N symbolic.
FACTORS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1,
    "reduce": lambda n: 1,
}


def bus_factor(collective: str, n: int) -> float:
    """The bandwidth factor of the table above (0 for a single rank)."""
    name = collective_name(collective)
    if n <= 1:
        return 0.0
    return float(FACTORS[name](n))


def traffic_lower_bound(collective: str, n: int, nbytes: float) -> float:
    """Bytes the busiest rank must send or receive, at least."""
    return bus_factor(collective, n) * nbytes
