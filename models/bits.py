"""Bit-exact predictions: what a model algorithm returns, in the dtype, on every rank.

The one interpreter (:mod:`.interpreter`) runs the algorithm's schedule over
:class:`~.algebras.Numbers`, one cell per element, rounding to the dtype after
every reduce. For ``nccl-ring`` this is the order NCCL's ring adds in: chunk
k is first sent by the rank after its owner and each rank adds its own value
to the partial it receives, so the owner (ring index k) ends with
``((x[k+1] + x[k+2]) + ...) + x[k]``, indices along the channel's ring, and
every other rank receives that value by copy. Which element is in which
chunk follows NCCL 2.30's host split and ring loop (:mod:`.generators.nccl_ring`,
:mod:`.generators.nccl_host`) with the options of :func:`schedule_options`:
the identity ring, one channel unless asked (conformance pins NCCL to one
with NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS=1), the Simple protocol unless
asked, and NCCL's chunk for the element size (2 MiB for the Simple ring's
all-reduce; the last loop's chunks rounded to 16 bytes,
``alignUp(divUp(rem, N), 16 / sizeof(T))`` elements).

``conform --expect bits:ALGO`` compares every rank's result with
:func:`predict`; impl's ``nccl-ring`` backend runs the same schedules, so on
CPU it must match bit for bit.

>>> import numpy as np
>>> x = [np.array([1.0, 0.5], dtype=np.float16), np.array([1e4, 0.5], dtype=np.float16), np.array([-1e4, 0.5], dtype=np.float16)]
>>> [float(v) for v in predict("nccl-ring", "allreduce", x, "sum")[0]]   # owner 0: (x1 + x2) + x0, not (x0 + x1) + x2 = 0
[1.0, 1.5]
"""

from __future__ import annotations

import numpy as np

from .algebras import Numbers
from .generators import generate
from .interpreter import run
from .layout import ScheduleError

#: algorithms with a bit-exact model, and the ops it covers (avg: NCCL
#: pre-multiplies each input by 1/N for floats, which is not modelled)
ALGORITHMS = {"nccl-ring": ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")}
OPS = ("sum", "prod", "min", "max")
#: at most this many elements per rank are predicted (one cell per element)
MAX_ELEMENTS = 1 << 16
#: a spec dtype of each element size: the schedule depends on the size only
BY_SIZE = {1: "int8", 2: "float16", 4: "float32", 8: "float64"}


def supports(algorithm: str, collective: str, op: str) -> bool:
    return collective in ALGORITHMS.get(algorithm, ()) and (op in OPS or collective in ("allgather", "broadcast"))


def require(algorithm: str) -> None:
    """A ScheduleError unless ``algorithm`` has a bit-exact model."""
    if algorithm not in ALGORITHMS:
        raise ScheduleError(f"bits:{algorithm}: no bit-exact model of {algorithm!r}; use one of {', '.join(ALGORITHMS)}")


def schedule_options(algorithm: str, collective: str, itemsize: int, count: int, channels: int = 1, protocol: str = "simple") -> dict:
    """Generator options of the bit-exact layout for ``count`` elements (per
    rank for reduce_scatter and allgather) of ``itemsize`` bytes on
    ``channels`` channels with ``protocol``: chunk, align and channel split
    are the generator's, as NCCL 2.30 derives them from these."""
    require(algorithm)
    if itemsize not in BY_SIZE:
        raise ScheduleError(f"bits:{algorithm}: no NCCL type has {itemsize}-byte elements")
    return {"channels": channels, "dtype": BY_SIZE[itemsize], "protocol": protocol, "count": count}


def predict(algorithm: str, collective: str, inputs: list[np.ndarray], op: str, root: int = 0, channels: int = 1,
            protocol: str = "simple") -> list[np.ndarray]:
    """Every rank's output (its output cells, in order) when ``algorithm``
    runs ``collective`` on ``inputs`` (rank r's input vector) in their dtype,
    on ``channels`` channels with ``protocol`` (NCCL's host split and chunk)."""
    require(algorithm)
    n = len(inputs)
    values = [np.asarray(v).reshape(-1) for v in inputs]
    count = len(values[0]) // n if collective == "reduce_scatter" else len(values[0])
    if count > MAX_ELEMENTS:
        raise ScheduleError(f"bits:{algorithm}: at most {MAX_ELEMENTS} elements per rank are predicted, got {count}")
    options = schedule_options(algorithm, collective, values[0].dtype.itemsize, count, channels, protocol)
    if collective in ("broadcast", "reduce"):
        options["root"] = root
    schedule = generate(algorithm, collective, n, **options)
    state = run(schedule, Numbers(values, op=op)).state
    return [state[r][schedule.layout.outputs[r]] for r in range(n)]
