"""The invariant checker behind ``collspec check``.

It runs a schedule through the interpreter and reports, as
:class:`~collspec.spec.violations.Violation` values:

- ``wrong-column``: a reduce combined values that belong to different
  chunks (a chunk may only ever be added into its own column);
- ``link-repeat``: the same chunk crossed the same directed link twice within
  one phase;
- ``link-overload``: a directed link carried more chunks in one step than the
  schedule's link capacity;
- ``race``: two transfers wrote one cell in the same step and at least one
  was a copy, so the result depends on their order;
- ``missing-contribution`` / ``duplicate-contribution`` / ``postcondition``:
  an output cell does not hold exactly what the spec's collective puts there
  (named down to the rank, chunk and origin);
- ``ranks-disagree`` (warning): ranks that must hold equal results compute
  a chunk with differently shaped reductions, so in floating point their
  bits may differ;
- ``not-bandwidth-optimal`` (warning): the busiest rank moves more than the
  lower bound of :mod:`collspec.spec.bandwidth`.

Contributions are tracked exactly with the spec's multisets when the
schedule is small enough, otherwise with fingerprints (exact counts, 2 x 64
bit hashes); every cell that fails by fingerprint is re-run exactly, on the
slice of the schedule that feeds it, before it is reported in detail.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..spec.bandwidth import bus_factor
from ..spec.contributions import Contributions
from ..spec.violations import Violation
from .algebras import COLUMN, COUNT, GARBAGE, SHAPE, Fingerprints, contributions, is_uninitialised
from .interpreter import run
from .layout import ScheduleError, expected_outputs, owner_of
from .schedule import COPY, INDEX, OP_NAMES, REDUCE, Schedule, Step, transfer_dict

#: exact multisets when transfers x ranks is at most this (about a second)
EXACT_WORK_LIMIT = 3_000_000
#: at most this many violations of one kind are listed (all are counted)
LIST_LIMIT = 1000


@dataclass
class CheckResult:
    schedule: Schedule
    violations: list[Violation]
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(v.is_error for v in self.violations)

    def kinds(self) -> list[str]:
        return [v.kind for v in self.violations]


@dataclass
class _Flat:
    """Every transfer of a schedule in one set of arrays."""

    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    src_chunk: np.ndarray
    dst_chunk: np.ndarray
    op: np.ndarray
    phase: np.ndarray  # phase id per transfer
    phase_names: list[str]
    offsets: np.ndarray  # first flat index of each step

    @classmethod
    def of(cls, schedule: Schedule) -> "_Flat":
        steps = schedule.steps
        lengths = np.array([len(s) for s in steps], dtype=np.int64)
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        names: dict[str, int] = {}
        phase_parts = []
        for s in steps:
            if s.phase is not None:
                phase_parts.append(np.full(len(s), names.setdefault(s.phase, len(names)), dtype=np.int32))
            else:
                reduce_id = names.setdefault("reduce", len(names))
                copy_id = names.setdefault("copy", len(names))
                phase_parts.append(np.where(s.op == REDUCE, reduce_id, copy_id).astype(np.int32))

        def cat(attr, dtype=INDEX):
            return np.concatenate([getattr(s, attr) for s in steps]).astype(dtype) if steps else np.zeros(0, dtype)

        return cls(
            step=np.repeat(np.arange(len(steps), dtype=np.int64), lengths),
            src=cat("src"),
            dst=cat("dst"),
            src_chunk=cat("src_chunk"),
            dst_chunk=cat("dst_chunk"),
            op=cat("op", np.int8),
            phase=np.concatenate(phase_parts) if phase_parts else np.zeros(0, np.int32),
            phase_names=list(names),
            offsets=offsets,
        )

    def describe(self, i: int) -> dict:
        return transfer_dict(self, i)


class _Collector:
    """Violations, listed up to LIST_LIMIT per kind and counted in full."""

    def __init__(self):
        self.listed: list[Violation] = []
        self.counts: dict[str, int] = {}

    def add(self, violation: Violation) -> None:
        count = self.counts.get(violation.kind, 0)
        self.counts[violation.kind] = count + 1
        if count < LIST_LIMIT:
            self.listed.append(violation)

    def full(self, kind: str) -> bool:
        """True (and one more counted) when no more of ``kind`` are listed,
        so a caller can skip building a message nobody will see."""
        if self.counts.get(kind, 0) < LIST_LIMIT:
            return False
        self.counts[kind] += 1
        return True


def check(schedule: Schedule, *, link_capacity: int | None = None, exact: bool | None = None, synchronous: bool = True) -> CheckResult:
    """Check every invariant of ``schedule``; see the module text.

    ``link_capacity`` overrides the schedule's own; ``exact`` forces exact
    multisets (True) or fingerprints (False) instead of choosing by size.
    ``synchronous=False`` is for a concurrent program linearised into steps
    (MSCCL XML): its steps are not real rounds, so the checks that only mean
    something for rounds (``link-overload``, ``link-repeat`` and two writes
    of one cell in one step) are skipped; the caller checks races itself.
    """
    started = time.perf_counter()
    layout = schedule.layout  # raises ScheduleError for an impossible layout
    flat = _Flat.of(schedule)
    found = _Collector()
    capacity = link_capacity if link_capacity is not None else schedule.link_capacity
    _check_ranges(schedule, flat)

    if synchronous:
        _races(schedule, flat, found)
        _link_overload(schedule, flat, capacity, found)

    fingerprints = Fingerprints()
    sent_column = np.zeros(len(flat.src), dtype=np.uint64)
    wrong = []

    def observe(index, step, positions, before, incoming, after):
        at = flat.offsets[index] + positions
        sent_column[at] = incoming[:, COLUMN]
        a, b = before[:, COLUMN], incoming[:, COLUMN]
        bad = (step.op[positions] == REDUCE) & (a < GARBAGE) & (b < GARBAGE) & (a != b)
        if bad.any():
            wrong.append(at[bad])

    final = run(schedule, fingerprints, observe=observe).state
    for i in np.concatenate(wrong) if wrong else []:
        _wrong_column(schedule, flat, int(i), found)
    if synchronous:
        _link_repeat(schedule, flat, sent_column, found)

    use_exact = exact if exact is not None else flat.src.size * max(schedule.ranks, 1) <= EXACT_WORK_LIMIT
    failing = _outputs(schedule, final, fingerprints, use_exact, flat, found)
    if not failing:
        _ranks_disagree(schedule, final, found)
    _bandwidth(schedule, flat, found)

    stats = {
        "steps": len(schedule.steps),
        "transfers": int(flat.src.size),
        "ranks": schedule.ranks,
        "chunks": schedule.chunks,
        "contributions": "exact multisets" if use_exact else "fingerprints, failures re-checked exactly",
        "violations_by_kind": dict(found.counts),
        "seconds": round(time.perf_counter() - started, 4),
    }
    stats.update(traffic(schedule, flat))
    return CheckResult(schedule, found.listed, stats)


# -- static checks ----------------------------------------------------------------


def _has_repeats(key: np.ndarray) -> bool:
    """Whether any value occurs twice (a sort is much cheaper than unique)."""
    ordered = np.sort(key)
    return bool(np.any(ordered[1:] == ordered[:-1]))


def _check_ranges(schedule: Schedule, flat: _Flat) -> None:
    """Generators and loaders validate; this guards hand-built schedules."""
    n, cells = schedule.ranks, schedule.layout.cells
    for name, values, limit in (("src", flat.src, n), ("dst", flat.dst, n), ("src_chunk", flat.src_chunk, cells), ("dst_chunk", flat.dst_chunk, cells)):
        bad = np.flatnonzero((values < 0) | (values >= limit))
        if bad.size:
            i = int(bad[0])
            raise ScheduleError(f"step {int(flat.step[i])}: field {name!r} = {int(values[i])} is out of range 0..{limit - 1}")


def _races(schedule: Schedule, flat: _Flat, found: _Collector) -> None:
    cells = schedule.layout.cells
    key = (flat.step * schedule.ranks + flat.dst) * cells + flat.dst_chunk
    if not _has_repeats(key):
        return
    order = np.argsort(key, kind="stable")
    k = key[order]
    dup = np.flatnonzero(k[1:] == k[:-1])
    if dup.size == 0:
        return
    starts = np.unique(np.r_[dup])  # positions in sorted order where a repeat begins
    groups: dict[int, list[int]] = {}
    for p in starts:
        groups.setdefault(int(k[p]), [int(order[p])]).append(int(order[p + 1]))
    for members in groups.values():
        members = sorted(set(members))
        if not any(flat.op[i] == COPY for i in members):
            continue  # several reduces into one cell accumulate: fine
        first = members[0]
        writers = ", ".join(f"{OP_NAMES[int(flat.op[i])]} from rank {int(flat.src[i])}" for i in members)
        found.add(
            Violation(
                "race",
                f"rank {int(flat.dst[first])}'s {schedule.layout.cell_name(int(flat.dst_chunk[first]))} is written by "
                f"{len(members)} transfers in step {int(flat.step[first])} ({writers}); with a copy among them the "
                "result depends on their order",
                step=int(flat.step[first]),
                dst=int(flat.dst[first]),
                details={"rank": int(flat.dst[first]), "chunk": int(flat.dst_chunk[first]), "transfers": [flat.describe(i) for i in members]},
            )
        )


def _link_overload(schedule: Schedule, flat: _Flat, capacity: int, found: _Collector) -> None:
    network = flat.src != flat.dst
    idx = np.flatnonzero(network)
    n = schedule.ranks
    key = (flat.step[idx] * n + flat.src[idx]) * n + flat.dst[idx]
    if capacity >= 1 and not _has_repeats(key):
        return
    unique, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    for g in np.flatnonzero(counts > capacity):
        if found.full("link-overload"):
            continue
        members = idx[inverse == g]
        first = int(members[0])
        chunks = sorted({int(flat.src_chunk[i]) for i in members})
        found.add(
            Violation(
                "link-overload",
                f"link {int(flat.src[first])}->{int(flat.dst[first])} carries {int(counts[g])} chunks in step "
                f"{int(flat.step[first])} (chunks {', '.join(map(str, chunks))}); its capacity is {capacity} per step",
                step=int(flat.step[first]),
                src=int(flat.src[first]),
                dst=int(flat.dst[first]),
                details={"chunks": chunks, "count": int(counts[g]), "capacity": capacity},
            )
        )


def _wrong_column(schedule: Schedule, flat: _Flat, i: int, found: _Collector) -> None:
    name = schedule.layout.cell_name
    src, dst = int(flat.src[i]), int(flat.dst[i])
    found.add(
        Violation(
            "wrong-column",
            f"step {int(flat.step[i])}: rank {dst} added rank {src}'s {name(int(flat.src_chunk[i]))} into its "
            f"{name(int(flat.dst_chunk[i]))}; a chunk may only be added into the same column",
            step=int(flat.step[i]),
            src=src,
            dst=dst,
            details={"src_chunk": int(flat.src_chunk[i]), "dst_chunk": int(flat.dst_chunk[i])},
        )
    )


def _link_repeat(schedule: Schedule, flat: _Flat, sent_column: np.ndarray, found: _Collector) -> None:
    """Key: (phase, src, dst, what was sent). What was sent is the column its
    contributions started in, so a chunk relayed through scratch cells is
    still the same chunk; a mixed or uninitialised value falls back to its cell."""
    network = np.flatnonzero(flat.src != flat.dst)
    if network.size == 0:
        return
    n = np.int64(schedule.ranks)
    cells = np.int64(schedule.layout.cells)
    column = sent_column[network]
    identity = np.where(column < GARBAGE, column.astype(np.int64), cells + flat.src_chunk[network].astype(np.int64))
    key = ((flat.phase[network].astype(np.int64) * n + flat.src[network]) * n + flat.dst[network]) * (2 * cells) + identity
    if not _has_repeats(key):
        return
    order = np.argsort(key, kind="stable")
    k = key[order]
    for p in np.flatnonzero(k[1:] == k[:-1]):
        first, again = int(network[order[p]]), int(network[order[p + 1]])
        if found.full("link-repeat"):
            continue
        chunk = int(identity[order[p]]) if identity[order[p]] < cells else int(flat.src_chunk[first])
        phase = flat.phase_names[int(flat.phase[first])]
        found.add(
            Violation(
                "link-repeat",
                f"{schedule.layout.cell_name(chunk)} crosses link {int(flat.src[first])}->{int(flat.dst[first])} twice in "
                f"phase {phase!r}: in step {int(flat.step[first])} and again in step {int(flat.step[again])}",
                step=int(flat.step[again]),
                src=int(flat.src[first]),
                dst=int(flat.dst[first]),
                details={"chunk": chunk, "phase": phase, "first_step": int(flat.step[first])},
            )
        )


# -- the postcondition ----------------------------------------------------------------


def _outputs(schedule: Schedule, final: np.ndarray, fingerprints: Fingerprints, use_exact: bool, flat: _Flat, found: _Collector) -> bool:
    """Compare every output cell with the spec; report; return whether any failed."""
    layout = schedule.layout
    n = schedule.ranks
    leaves = [fingerprints.additive(rows) for rows in fingerprints.leaf_rows(schedule)]
    expected = expected_outputs(schedule, leaves)
    failing: list[tuple[int, int, int]] = []  # (rank, output element, cell)
    for r in range(n):
        cells = layout.outputs[r]
        if len(cells) == 0:
            continue
        got = fingerprints.additive(final[r, cells])
        bad = np.flatnonzero(np.any(got != expected[r], axis=1))
        failing.extend((r, int(k), int(cells[k])) for k in bad)
    if not failing:
        return False
    if schedule.collective == "reduce_scatter" and _ownership(schedule, final, fingerprints, leaves, found):
        return True
    last_write = _last_writes(schedule, flat)
    if use_exact:
        exact_final = run(schedule, contributions()).state
        exact_expected = _exact_expected(schedule)
        for r, k, cell in failing:
            _explain_cell(schedule, r, k, cell, exact_final[r, cell], exact_expected[r][k], last_write, found)
        return True
    detailed = failing[:8]
    exact = exact_cells(schedule, [(r, cell) for r, _, cell in detailed])
    exact_expected = _exact_expected(schedule)
    for r, k, cell in detailed:
        _explain_cell(schedule, r, k, cell, exact[(r, cell)], exact_expected[r][k], last_write, found)
    for r, k, cell in failing[8:]:
        have = int(final[r, cell, COUNT])
        want = int(expected[r][k][COUNT])
        kind = "missing-contribution" if have < want else "duplicate-contribution" if have > want else "postcondition"
        found.add(
            Violation(
                kind,
                f"rank {r}'s {layout.cell_name(cell)} holds {have} contributions where the spec puts {want}"
                + ("" if have != want else ", but not the right ones")
                + " (found by fingerprint; the first 8 failing cells are listed exactly)",
                step=last_write.get((r, cell)),
                dst=r,
                details={"rank": r, "chunk": cell, "count": have, "expected_count": want},
            )
        )
    return True


def _exact_expected(schedule: Schedule) -> list:
    algebra = contributions()
    layout = schedule.layout
    leaves = [algebra.leaves(r, layout.inputs[r]) for r in range(schedule.ranks)]
    return expected_outputs(schedule, leaves)


def _explain_cell(schedule, rank, k, cell, have: Contributions, want: Contributions, last_write, found) -> None:
    """Turn one wrong output cell into violations naming every origin."""
    name = schedule.layout.cell_name(cell)
    missing, extra = have.compare(want)
    where = f"rank {rank}'s {name}"
    step = last_write.get((rank, cell))
    both = len({i for _, i, _ in have.labels()} | {i for _, i, _ in want.labels()}) > 1
    holds, expected = have.format(both), want.format(both)
    base = {"rank": rank, "chunk": cell, "holds": holds, "expected": expected}
    if missing:
        found.add(
            Violation(
                "missing-contribution",
                f"{where} is missing {_origins(missing, schedule)} (holds {holds}, expected {expected})",
                step=step,
                dst=rank,
                details={**base, "origin": _origin_json(missing)},
            )
        )
    wanted = {(r, i) for r, i, _ in want.labels()}
    duplicates = [m for m in extra if (m[0], m[1]) in wanted]
    garbage = [m for m in extra if is_uninitialised(m[1])]
    strays = [m for m in extra if m not in duplicates and m not in garbage]
    if duplicates:
        found.add(
            Violation(
                "duplicate-contribution",
                f"{where} counts {_origins(duplicates, schedule, extra=True)} (holds {holds}, expected {expected})",
                step=step,
                dst=rank,
                details={**base, "origin": _origin_json(duplicates)},
            )
        )
    if garbage:
        cells = ", ".join(f"rank {r}'s {schedule.layout.cell_name(-1 - i)}" for r, i, _ in garbage)
        found.add(
            Violation(
                "postcondition",
                f"{where} holds uninitialised data from {cells} (a reduce into a cell nobody wrote? use copy)",
                step=step,
                dst=rank,
                details={**base, "uninitialised": [{"rank": r, "chunk": -1 - i} for r, i, _ in garbage]},
            )
        )
    if strays:
        found.add(
            Violation(
                "postcondition",
                f"{where} holds {_origins(strays, schedule)}, which the {schedule.collective} puts elsewhere "
                f"(holds {holds}, expected {expected})",
                step=step,
                dst=rank,
                details={**base, "origin": _origin_json(strays)},
            )
        )


def _origins(labels, schedule: Schedule, extra: bool = False) -> str:
    parts = []
    for r, i, times in labels:
        what = f"rank {r}'s input {i}" if schedule.collective in ("allgather",) else f"rank {r}'s chunk {i}"
        if extra:
            parts.append(f"{what} {times + 1} times")
        else:
            parts.append(what if times == 1 else f"{what} ({times} times)")
    return ", ".join(parts)


def _origin_json(labels) -> list[dict]:
    return [{"rank": r, "chunk": i, "times": t} for r, i, t in labels]


def _ownership(schedule, final, fingerprints, leaves, found) -> bool:
    """For reduce_scatter: if every chunk ends complete on exactly one rank,
    but not on the rank the ownership names, say so in one violation."""
    from ..spec import collectives as spec

    complete = spec.all_reduce(leaves)[0]  # what a complete chunk holds
    n, chunks = schedule.ranks, schedule.chunks
    got = fingerprints.additive(final[:, :chunks])
    holds = np.all(got == complete[None, :, :], axis=2)  # holds[r, c]
    owner = owner_of(schedule)
    actual = [tuple(int(c) for c in np.flatnonzero(holds[r])) for r in range(n)]
    per_chunk = holds.sum(axis=0)
    if not (np.all(per_chunk >= 1) and all(len(a) == len(o) for a, o in zip(actual, owner))):
        return False
    lines = "; ".join(f"rank {r} holds {_chunks(a)} where it must own {_chunks(o)}" for r, (a, o) in enumerate(zip(actual, owner)) if a != o)
    found.add(
        Violation(
            "postcondition",
            f"reduce_scatter ownership: every chunk is reduced completely, but on the wrong rank: {lines}. "
            f"The schedule is a correct reduce_scatter for \"owner\": {[list(a) for a in actual]}",
            details={"expected_owner": [list(o) for o in owner], "actual_owner": [list(a) for a in actual]},
        )
    )
    return True


def _chunks(chunks) -> str:
    return ("chunk " if len(chunks) == 1 else "chunks ") + ", ".join(map(str, chunks))


def _last_writes(schedule: Schedule, flat: _Flat) -> dict[tuple[int, int], int]:
    last: dict[tuple[int, int], int] = {}
    if flat.src.size:
        key = flat.dst.astype(np.int64) * schedule.layout.cells + flat.dst_chunk
        order = np.argsort(key, kind="stable")
        k = key[order]
        ends = np.r_[np.flatnonzero(k[1:] != k[:-1]), k.size - 1]
        for e in ends:
            i = order[e]
            last[(int(flat.dst[i]), int(flat.dst_chunk[i]))] = int(flat.step[i])
    return last


def exact_cells(schedule: Schedule, targets: list[tuple[int, int]]) -> dict[tuple[int, int], Contributions]:
    """The exact contributor multisets of some final cells.

    Runs the exact algebra on the slice of the schedule that can influence
    them (walking backwards, a transfer matters if it writes a cell that
    matters; then its source matters too, and a copy's target no longer
    does), so a failure in a huge schedule is still explained exactly.
    """
    live = np.zeros((schedule.ranks, schedule.layout.cells), dtype=bool)
    for r, c in targets:
        live[r, c] = True
    kept: list[Step] = []
    for step in reversed(schedule.steps):
        keep = live[step.dst, step.dst_chunk]
        if not keep.any():
            kept.append(Step.of([], [], [], [], [], step.phase, step.name))
            continue
        idx = np.flatnonzero(keep)
        sole_copy = (step.op[idx] == COPY) & _sole_writer(step, idx)
        live[step.dst[idx[sole_copy]], step.dst_chunk[idx[sole_copy]]] = False
        live[step.src[idx], step.src_chunk[idx]] = True
        kept.append(Step(step.src[idx], step.dst[idx], step.src_chunk[idx], step.dst_chunk[idx], step.op[idx], step.phase, step.name))
    sliced = replace(schedule, steps=tuple(reversed(kept)), layout_override=schedule.layout)
    final = run(sliced, contributions()).state
    return {(r, c): final[r, c] for r, c in targets}


def _sole_writer(step: Step, idx: np.ndarray) -> np.ndarray:
    key = step.dst.astype(np.int64) * (int(step.dst_chunk.max()) + 1) + step.dst_chunk
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    return counts[inverse][idx] == 1


# -- warnings ----------------------------------------------------------------


def _ranks_disagree(schedule: Schedule, final: np.ndarray, found: _Collector) -> None:
    """Ranks that must hold the same result: is each chunk's reduction tree
    the same on all of them (then their bits agree in any float type)?"""
    if schedule.collective != "allreduce" or schedule.ranks < 2:
        return
    layout = schedule.layout
    shapes = np.stack([final[r, layout.outputs[r], SHAPE] for r in range(schedule.ranks)])
    differ = np.flatnonzero(np.any(shapes != shapes[0], axis=0))
    for k in differ[:LIST_LIMIT]:
        column = shapes[:, k]
        other = int(np.flatnonzero(column != column[0])[0])
        found.add(
            Violation(
                "ranks-disagree",
                f"chunk {int(k)} is reduced in a different order on rank {other} than on rank 0; in exact arithmetic "
                "they agree, in floating point their bits may differ",
                severity="warning",
                details={"chunk": int(k), "ranks": [0, other]},
            )
        )


def traffic(schedule: Schedule, flat: _Flat | None = None) -> dict:
    """Per-rank chunks sent and received over links, as fractions of the vector."""
    flat = flat or _Flat.of(schedule)
    network = flat.src != flat.dst
    n = schedule.ranks
    sent = np.bincount(flat.src[network], minlength=n)[:n]
    received = np.bincount(flat.dst[network], minlength=n)[:n]
    busiest = int(np.argmax(np.maximum(sent, received))) if n else 0
    vector = schedule.chunks
    return {
        "chunks_sent_per_rank_max": int(sent.max()) if n else 0,
        "chunks_received_per_rank_max": int(received.max()) if n else 0,
        "busiest_rank": busiest,
        "busiest_rank_traffic": float(max(sent[busiest], received[busiest]) / vector) if n else 0.0,
        "lower_bound_traffic": bus_factor(schedule.collective, n),
    }


def _bandwidth(schedule: Schedule, flat: _Flat, found: _Collector) -> None:
    figures = traffic(schedule, flat)
    bound, moved = figures["lower_bound_traffic"], figures["busiest_rank_traffic"]
    if schedule.ranks > 1 and moved > bound * (1 + 1e-9):
        found.add(
            Violation(
                "not-bandwidth-optimal",
                f"rank {figures['busiest_rank']} moves {moved:.4g} of the vector; the lower bound for "
                f"{schedule.collective} on {schedule.ranks} ranks is {bound:.4g}",
                severity="warning",
                details={"rank": figures["busiest_rank"], "traffic": moved, "bound": bound},
            )
        )
