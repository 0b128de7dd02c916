"""Algorithm and bus bandwidth of a backend, as nccl-tests computes them.

For each size S (bytes, as nccl-tests counts them: see
:mod:`collspec.spec.bandwidth`), every rank makes ``warmup`` calls, meets
the others at a barrier, then times ``iters`` calls back to back; the time
of one call is the slowest rank's mean. Then

    algbw = S / time        busbw = algbw * spec.bus_factor(collective, N)

(GB/s = 1e9 bytes per second). Sizes run from MIN to MAX doubling, like
nccl-tests' ``-b MIN -e MAX -f 2``; counts a collective cuts into one block
per rank are rounded down to a multiple of N.

>>> byte_sizes("1K:8K")
[1024, 2048, 4096, 8192]
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import as_dtype, bus_factor
from ..spec.errors import CollspecError
from . import resolve, runner
from .cases import Case, parse_size
from .collectives import COLLECTIVES
from .data import PATTERN_FOR_OP


def byte_sizes(text: str) -> list[int]:
    """``MIN:MAX`` doubling from MIN, or one size."""
    low, _, high = text.partition(":")
    first = parse_size(low, "--sizes")
    last = parse_size(high, "--sizes") if high else first
    if first < 1 or last < first:
        raise CollspecError(f"--sizes {text}: use MIN:MAX with 1 <= MIN <= MAX (e.g. 1K:64M)")
    out = [first]
    while out[-1] * 2 <= last:
        out.append(out[-1] * 2)
    return out


@dataclass(frozen=True)
class Row:
    """One size's measurement."""

    bytes: int
    count: int
    seconds: float
    algbw: float
    busbw: float

    def to_json(self) -> dict:
        return {"bytes": self.bytes, "count": self.count, "time_us": self.seconds * 1e6,
                "algbw_GBps": self.algbw, "busbw_GBps": self.busbw}


def timing_cases(collective: str, dtype: str, op: str, world: int, sizes: list[int]) -> list[Case]:
    spec = COLLECTIVES[collective]
    itemsize = as_dtype(dtype).itemsize
    out = []
    for size in sizes:
        count = size // itemsize
        if spec.blocked:
            count -= count % world
        if count == 0:
            raise CollspecError(f"--sizes: {size} bytes hold no {dtype} element per rank; start higher")
        out.append(Case(collective, dtype, op if spec.reducing else None, count, spec.inplace_modes[0],
                        0 if spec.rooted else None, PATTERN_FOR_OP[op] if spec.reducing else "origin"))
    return out


def measure(backend: str, world: int, collective: str, dtype: str, op: str, sizes: list[int], iters: int,
            warmup: int, timeout: float, launcher: str | None = None, device: str | None = None) -> tuple[list[Row], runner.Result]:
    """Time the collective at every size; returns the rows that ran and the run's result."""
    spec = resolve.parse(backend, device)
    if collective not in COLLECTIVES:
        raise CollspecError(f"--collective {collective}: use one of {', '.join(COLLECTIVES)}")
    if world < 2 or iters < 1 or warmup < 0:
        raise CollspecError("bench needs --world-size >= 2, --iters >= 1 and --warmup >= 0")
    cases = timing_cases(collective, dtype, op, world, sizes)
    settings = runner.Settings(spec, world, cases, timeout, launcher or spec.launcher,
                               timing={"iters": iters, "warmup": warmup})
    result = runner.run(settings)
    return _rows(result.outcomes, collective, dtype, world), result


def measure_external(backend: str, collective: str, dtype: str, op: str, sizes: list[int], iters: int, warmup: int,
                     timeout: float, device: str | None, place) -> tuple[list[Row], object]:
    """:func:`measure` as one rank of a job an existing launcher started (:mod:`.external`):
    the same loop on every rank, the slowest rank's time per size. Returns the rows and the
    run's :class:`.runner.Result` (rank 0's rows are the job's)."""
    from . import external

    spec = resolve.parse(backend, device)
    if collective not in COLLECTIVES:
        raise CollspecError(f"--collective {collective}: use one of {', '.join(COLLECTIVES)}")
    if place.world < 2 or iters < 1 or warmup < 0:
        raise CollspecError("bench needs at least 2 ranks, --iters >= 1 and --warmup >= 0")
    cases = timing_cases(collective, dtype, op, place.world, sizes)
    job = external.Job(spec, cases, timeout, {"mode": "bench", "launcher": "external", "detected": place.launcher,
                                              "rendezvous": place.rendezvous}, None, None,
                       timing={"iters": iters, "warmup": warmup}, quiet=True, partials=False)
    result = external.run(job, place).result
    return _rows(result.outcomes, collective, dtype, place.world), result


def _rows(outcomes, collective: str, dtype: str, world: int) -> list[Row]:
    rows = []
    for outcome in outcomes:
        if outcome.status == "pass":
            case = outcome.case
            nbytes = case.count * as_dtype(dtype).itemsize
            algbw = nbytes / outcome.seconds / 1e9
            rows.append(Row(nbytes, case.count, outcome.seconds, algbw, algbw * bus_factor(collective, world)))
    return rows


def table(rows: list[Row], collective: str, dtype: str, op: str) -> str:
    """The nccl-tests style table."""
    lines = [f"{'size (B)':>12} {'count':>12} {'type':>9} {'redop':>6} {'time (us)':>11} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}"]
    reduces = COLLECTIVES[collective].reducing
    for r in rows:
        lines.append(f"{r.bytes:>12} {r.count:>12} {dtype:>9} {op if reduces else '-':>6} {r.seconds * 1e6:>11.1f} "
                     f"{r.algbw:>13.3f} {r.busbw:>13.3f}")
    return "\n".join(lines)


def plot(rows: list[Row], path: str, title: str) -> None:
    """busbw and algbw against size, log-scaled, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    sizes = [r.bytes for r in rows]
    axes.plot(sizes, [r.busbw for r in rows], marker="o", label="busbw")
    axes.plot(sizes, [r.algbw for r in rows], marker=".", linestyle="--", label="algbw")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("size (bytes)")
    axes.set_ylabel("GB/s")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
