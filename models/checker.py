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
- ``deadlock`` (only with ``slots``): bounded buffer slots per connection
  leave a cycle of sends that never completes (:mod:`.slots`);
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
from .schedule import COPY, OP_NAMES, REDUCE, Schedule, Step

#: exact multisets when (transfers + cells) x ranks is at most this (about a second)
EXACT_WORK_LIMIT = 3_000_000
#: writes of one cell in one step past the first, over all steps: each is one more
#: pass of the interpreter over its step (about 0.2 ms; docs/limits.md)
MAX_EXTRA_ROUNDS = 20_000
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


class _Transfers:
    """Flat transfer numbers (step after step, in listed order) without a
    copy of the schedule: ``offsets[k]`` is the number of step k's first
    transfer. Phases get ids in order of first appearance, as
    :meth:`Step.phase_of` names them (a step without a phase puts its
    reduces in ``reduce`` and its copies in ``copy``)."""

    def __init__(self, schedule: Schedule):
        steps = schedule.steps
        lengths = np.fromiter((len(s) for s in steps), dtype=np.int64, count=len(steps))
        self.steps = steps
        self.offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        self.total = int(self.offsets[-1])
        names: dict[str, int] = {}
        self.phase_ids: list[tuple[int, int]] = []  # per step: (id of its reduces, id of its copies)
        for step in steps:
            if step.phase is not None:
                ident = names.setdefault(step.phase, len(names))
                self.phase_ids.append((ident, ident))
            else:
                self.phase_ids.append((names.setdefault("reduce", len(names)), names.setdefault("copy", len(names))))
        self.phase_names = list(names)

    def locate(self, i: int) -> tuple[int, int]:
        """(step, position in it) of flat transfer ``i``."""
        k = int(np.searchsorted(self.offsets, i, side="right")) - 1
        return k, i - int(self.offsets[k])

    def describe(self, i: int) -> dict:
        k, j = self.locate(i)
        return self.steps[k].transfer(j)

    def field(self, name: str, i: int) -> int:
        k, j = self.locate(i)
        return int(getattr(self.steps[k], name)[j])

    def phase(self, k: int, step: Step, positions) -> np.ndarray:
        """Phase ids of some transfers of step ``k``."""
        on_reduce, on_copy = self.phase_ids[k]
        if on_reduce == on_copy:
            return np.int64(on_reduce)  # broadcasts
        return np.where(step.op[positions] == REDUCE, on_reduce, on_copy).astype(np.int64)


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


def check(schedule: Schedule, *, link_capacity: int | None = None, exact: bool | None = None, synchronous: bool = True,
          slots: int | None = None, slot_size: int = 1) -> CheckResult:
    """Check every invariant of ``schedule``; see the module text.

    ``link_capacity`` overrides the schedule's own; ``exact`` forces exact
    multisets (True) or fingerprints (False) instead of choosing by size.
    ``synchronous=False`` is for a concurrent program linearised into steps
    (MSCCL XML): its steps are not real rounds, so the checks that only mean
    something for rounds (``link-overload``, ``link-repeat`` and two writes
    of one cell in one step) are skipped; the caller checks races itself.
    ``slots`` bounds every connection to that many slots of ``slot_size``
    cells and reports the ``deadlock`` that causes (:mod:`.slots`; rounds
    only); None: unbounded.

    The schedule is streamed step by step: nothing per transfer is held
    but one 64-bit key for the link-repeat check (and, for large
    schedules, no exact multisets at all: see ``EXACT_WORK_LIMIT``).
    """
    started = time.perf_counter()
    layout = schedule.layout  # raises ScheduleError for an impossible layout
    _admit_rounds(schedule)
    flat = _Transfers(schedule)
    found = _Collector()
    capacity = link_capacity if link_capacity is not None else schedule.link_capacity
    sent, received = _scan(schedule, flat, capacity, synchronous, found)

    fingerprints = Fingerprints()
    n, cells = np.int64(schedule.ranks), np.int64(layout.cells)
    # link-repeat key of every transfer in flat order; a local transfer gets
    # a distinct negative number, so only network transfers can repeat
    repeat_key = np.empty(flat.total if synchronous else 0, dtype=np.int64)
    arrivals = _Arrivals.make(schedule, flat) if synchronous else None
    wrong: list[tuple[int, np.ndarray]] = []

    def observe(index, step, positions, before, incoming, after):
        whole = len(positions) == len(step)  # then positions are 0, 1, ...: no indexing
        pick = (lambda a: a) if whole else (lambda a: a[positions])  # noqa: E731
        a, b = before[:, COLUMN], incoming[:, COLUMN]
        known = b < GARBAGE
        if step.op_kinds[0]:
            bad = (pick(step.op) == REDUCE) & (a < GARBAGE) & known & (a != b)
            if bad.any():
                wrong.append((index, positions[bad]))
        if synchronous:
            src, dst = pick(step.src).astype(np.int64), pick(step.dst)
            identity = np.where(known, b.astype(np.int64), cells + pick(step.src_chunk))
            key = ((flat.phase(index, step, positions) * n + src) * n + dst) * (2 * cells) + identity
            start = int(flat.offsets[index])
            at = slice(start, start + len(step)) if whole else start + positions
            local = src == dst
            if local.any():
                key[local] = -1 - (start + positions[local])
            repeat_key[at] = key
            if arrivals is not None:
                arrivals.observe(flat.phase(index, step, positions), pick(step.dst), b, ~local, start + positions)

    final = run(schedule, fingerprints, observe=observe).state
    for index, positions in wrong:
        for j in positions:
            _wrong_column(schedule, index, int(j), found)
    if synchronous and (arrivals is None or arrivals.may_repeat(repeat_key)):
        _link_repeat(schedule, flat, repeat_key, found)
    del repeat_key, arrivals

    if slots is not None and synchronous:
        from .slots import slot_deadlocks

        for violation in slot_deadlocks(schedule, slots, slot_size):
            found.add(violation)
    # exact work: every transfer and every cell's expected multiset, each up to ranks labels
    exact_work = (flat.total + schedule.ranks * int(layout.cells)) * max(schedule.ranks, 1)
    use_exact = exact if exact is not None else exact_work <= EXACT_WORK_LIMIT
    failing = _outputs(schedule, final, fingerprints, use_exact, flat, found)
    if not failing:
        _ranks_disagree(schedule, final, found)
    figures = _traffic_figures(schedule, sent, received)
    _bandwidth(schedule, figures, found)

    stats = {
        "steps": len(schedule.steps),
        "transfers": flat.total,
        "ranks": schedule.ranks,
        "chunks": schedule.chunks,
        "contributions": "exact multisets" if use_exact else "fingerprints, failures re-checked exactly",
        "violations_by_kind": dict(found.counts),
        "seconds": round(time.perf_counter() - started, 4),
    }
    stats.update(figures)
    return CheckResult(schedule, found.listed, stats)


def _admit_rounds(schedule: Schedule) -> None:
    """Refuse (ScheduleError, exit 2) a schedule whose steps write one cell
    more than once too often: the interpreter applies such writes one
    round at a time."""
    extra, worst = 0, (0, 0)
    for index, step in enumerate(schedule.steps):
        if len(step) > 1 and not step.writes_once:
            dst = step.dst.astype(np.int64) * (int(step.dst_chunk.max()) + 1) + step.dst_chunk
            most = int(np.unique(dst, return_counts=True)[1].max())
            extra += most - 1
            worst = max(worst, (most, index))
            if extra > MAX_EXTRA_ROUNDS:
                raise ScheduleError(
                    f"{schedule.label()}: steps write one cell more than once {extra}+ times in all (step {worst[1]} writes one cell "
                    f"{worst[0]} times); collspec applies such writes one round at a time and takes at most {MAX_EXTRA_ROUNDS} extra rounds"
                )


# -- static checks, one step at a time --------------------------------------------


def _has_repeats(key: np.ndarray) -> bool:
    """Whether any value occurs twice (a sort is much cheaper than unique)."""
    ordered = np.sort(key)
    return bool(np.any(ordered[1:] == ordered[:-1]))


def _most_repeats(key: np.ndarray) -> int:
    """How often the most frequent value occurs (0 for no values)."""
    if key.size < 2:
        return int(key.size)
    ordered = np.sort(key)
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])
    return int(np.diff(starts).max())


class _Arrivals:
    """Which transfers could take part in a link repeat, found without
    sorting every transfer's key (which cost the 4096-rank ring more than
    any other check; docs/bench.md).

    A link repeat is two transfers with one key (phase, src, dst, what was
    sent), so they arrive in one *slot* (phase, dst, what was sent). A
    table of slots holds the last transfer that arrived in each; every
    transfer whose slot sees a second arrival (in a later step or the same
    one) becomes a *suspect*, and so does the one it displaced. Every
    transfer of a repeated key is then a suspect (the arrival after it in
    its slot names it), so the schedule has a link repeat exactly when the
    suspects' keys do: :meth:`may_repeat` sorts those only, and the caller
    runs the full check (same violations, same order) when they repeat.
    Transfers whose value has no single column (mixed or uninitialised)
    have no slot and are suspects outright. In a ring no slot is hit twice,
    so nothing is sorted at all."""

    #: at most this many slots (4 bytes each); larger schedules sort every key
    LIMIT = 1 << 26

    def __init__(self, ranks: int, cells: int, phases: int):
        self.cells, self.ranks = np.int64(cells), np.int64(ranks)
        self.last = np.zeros(phases * ranks * cells, dtype=np.int32)  # transfer number + 1 of the last arrival
        self.suspects: list[np.ndarray] = []

    @classmethod
    def make(cls, schedule: Schedule, flat: _Transfers) -> "_Arrivals | None":
        slots = len(flat.phase_names) * schedule.ranks * schedule.layout.cells
        if slots > cls.LIMIT or flat.total >= np.iinfo(np.int32).max:
            return None
        return cls(schedule.ranks, schedule.layout.cells, len(flat.phase_names))

    def observe(self, phase, dst: np.ndarray, column: np.ndarray, network: np.ndarray, numbers: np.ndarray) -> None:
        """Transfers ``numbers`` (flat) of one group arrive at ``dst`` with
        values of ``column`` (a COLUMN lane); ``network`` marks those that
        use a link (local transfers never repeat)."""
        single = column < GARBAGE
        keep = network & single
        if not keep.all():
            loose = network & ~single  # mixed or uninitialised: no slot
            if loose.any():
                self.suspects.append(numbers[loose])
            dst, column, numbers = dst[keep], column[keep], numbers[keep]
            phase = phase if np.ndim(phase) == 0 else phase[keep]
        if numbers.size == 0:
            return
        slot = (phase * self.ranks + dst) * self.cells + column.astype(np.int64)
        stamp = (numbers + 1).astype(np.int32)
        before = np.take(self.last, slot)
        hit = before != 0
        if hit.any():
            self.suspects += [before[hit].astype(np.int64) - 1, numbers[hit]]
        np.put(self.last, slot, stamp)
        after = np.take(self.last, slot)
        clash = after != stamp  # two arrivals in one slot within this group
        if clash.any():
            self.suspects += [after[clash].astype(np.int64) - 1, numbers[clash]]

    def may_repeat(self, key: np.ndarray) -> bool:
        """Whether the suspects' keys (and so the schedule's) repeat."""
        if not self.suspects:
            return False
        return _has_repeats(key[np.unique(np.concatenate(self.suspects))])


def _scan(schedule: Schedule, flat: _Transfers, capacity: int, synchronous: bool, found: _Collector) -> tuple[np.ndarray, np.ndarray]:
    """Ranges (raising ScheduleError), then races and link overloads, step by
    step; returns the chunks each rank sends and receives over links."""
    _check_ranges(schedule, flat)
    n = schedule.ranks
    sent = np.zeros(n, dtype=np.int64)
    received = np.zeros(n, dtype=np.int64)
    races: list[Violation] = []
    overloads = _Collector()
    for index, step in enumerate(schedule.steps):
        if len(step) == 0:
            continue
        network = step.src != step.dst
        every = bool(network.all())
        src = step.src if every else step.src[network]
        dst = step.dst if every else step.dst[network]
        out, into = np.bincount(src, minlength=n)[:n], np.bincount(dst, minlength=n)[:n]
        sent += out
        received += into
        if not synchronous:
            continue
        if not step.writes_once:
            _races(schedule, flat, index, step, races)
        # a link carries at most as many chunks as its sender sends (or its
        # receiver receives) in the step: within capacity, no link can be over
        busiest = min(int(out.max()), int(into.max())) if src.size else 0
        if not 1 <= capacity or busiest > capacity:
            _link_overload(schedule, flat, index, step, network, capacity, overloads)
    for v in races:
        found.add(v)
    for v in overloads.listed:
        found.add(v)
    for kind, count in overloads.counts.items():  # those counted past the limit
        found.counts[kind] = found.counts.get(kind, 0) + count - sum(1 for v in overloads.listed if v.kind == kind)
    return sent, received


def _check_ranges(schedule: Schedule, flat: _Transfers) -> None:
    """Generators and loaders validate; this guards hand-built schedules."""
    n, cells = schedule.ranks, schedule.layout.cells
    for name, limit in (("src", n), ("dst", n), ("src_chunk", cells), ("dst_chunk", cells)):
        for index, step in enumerate(schedule.steps):
            values = getattr(step, name)
            if values.size and (int(values.min()) < 0 or int(values.max()) >= limit):
                i = int(np.flatnonzero((values < 0) | (values >= limit))[0])
                raise ScheduleError(f"step {index}: field {name!r} = {int(values[i])} is out of range 0..{limit - 1}")


def _races(schedule: Schedule, flat: _Transfers, index: int, step: Step, out: list[Violation]) -> None:
    """Cells of one step written by several transfers, one of them a copy."""
    cells = schedule.layout.cells
    key = step.dst.astype(np.int64) * cells + step.dst_chunk
    order = np.argsort(key, kind="stable")
    k = key[order]
    dup = np.flatnonzero(k[1:] == k[:-1])
    groups: dict[int, list[int]] = {}
    for p in dup:
        groups.setdefault(int(k[p]), [int(order[p])]).append(int(order[p + 1]))
    for members in groups.values():
        members = sorted(set(members))
        if not any(step.op[j] == COPY for j in members):
            continue  # several reduces into one cell accumulate: fine
        first = members[0]
        writers = ", ".join(f"{OP_NAMES[int(step.op[j])]} from rank {int(step.src[j])}" for j in members)
        out.append(
            Violation(
                "race",
                f"rank {int(step.dst[first])}'s {schedule.layout.cell_name(int(step.dst_chunk[first]))} is written by "
                f"{len(members)} transfers in step {index} ({writers}); with a copy among them the "
                "result depends on their order",
                step=index,
                dst=int(step.dst[first]),
                details={"rank": int(step.dst[first]), "chunk": int(step.dst_chunk[first]), "transfers": [step.transfer(j) for j in members]},
            )
        )


def _link_overload(schedule: Schedule, flat: _Transfers, index: int, step: Step, network: np.ndarray, capacity: int, found: _Collector) -> None:
    idx = np.flatnonzero(network)
    n = schedule.ranks
    key = step.src[idx].astype(np.int64) * n + step.dst[idx]
    if capacity >= 1 and _most_repeats(key) <= capacity:
        return
    unique, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    for g in np.flatnonzero(counts > capacity):
        if found.full("link-overload"):
            continue
        members = idx[inverse == g]
        first = int(members[0])
        chunks = sorted({int(step.src_chunk[j]) for j in members})
        found.add(
            Violation(
                "link-overload",
                f"link {int(step.src[first])}->{int(step.dst[first])} carries {int(counts[g])} chunks in step "
                f"{index} (chunks {', '.join(map(str, chunks))}); its capacity is {capacity} per step",
                step=index,
                src=int(step.src[first]),
                dst=int(step.dst[first]),
                details={"chunks": chunks, "count": int(counts[g]), "capacity": capacity},
            )
        )


def _wrong_column(schedule: Schedule, index: int, j: int, found: _Collector) -> None:
    name = schedule.layout.cell_name
    step = schedule.steps[index]
    src, dst = int(step.src[j]), int(step.dst[j])
    found.add(
        Violation(
            "wrong-column",
            f"step {index}: rank {dst} added rank {src}'s {name(int(step.src_chunk[j]))} into its "
            f"{name(int(step.dst_chunk[j]))}; a chunk may only be added into the same column",
            step=index,
            src=src,
            dst=dst,
            details={"src_chunk": int(step.src_chunk[j]), "dst_chunk": int(step.dst_chunk[j])},
        )
    )


def _link_repeat(schedule: Schedule, flat: _Transfers, key: np.ndarray, found: _Collector) -> None:
    """Key: (phase, src, dst, what was sent). What was sent is the column its
    contributions started in, so a chunk relayed through scratch cells is
    still the same chunk; a mixed or uninitialised value falls back to its
    cell. ``key`` holds one per transfer in flat order (negative and
    distinct for local transfers)."""
    if not _has_repeats(key):
        return
    cells = schedule.layout.cells
    order = np.argsort(key, kind="stable")
    k = key[order]
    for p in np.flatnonzero(k[1:] == k[:-1]):
        first, again = int(order[p]), int(order[p + 1])
        if found.full("link-repeat"):
            continue
        identity = int(k[p]) % (2 * cells)
        step_first, j = flat.locate(first)
        step = schedule.steps[step_first]
        chunk = identity if identity < cells else int(step.src_chunk[j])
        phase = flat.phase_names[int(np.ravel(flat.phase(step_first, step, [j]))[0])]
        found.add(
            Violation(
                "link-repeat",
                f"{schedule.layout.cell_name(chunk)} crosses link {int(step.src[j])}->{int(step.dst[j])} twice in "
                f"phase {phase!r}: in step {step_first} and again in step {flat.locate(again)[0]}",
                step=flat.locate(again)[0],
                src=int(step.src[j]),
                dst=int(step.dst[j]),
                details={"chunk": chunk, "phase": phase, "first_step": step_first},
            )
        )


# -- the postcondition ----------------------------------------------------------------


def _outputs(schedule: Schedule, final: np.ndarray, fingerprints: Fingerprints, use_exact: bool, flat: _Transfers, found: _Collector) -> bool:
    """Compare every output cell with the spec; report; return whether any failed."""
    layout = schedule.layout
    n = schedule.ranks
    leaves = fingerprints.leaf_rows(schedule, lanes=COUNT + 1)  # the additive lanes
    expected = expected_outputs(schedule, leaves)
    failing: list[tuple[int, np.ndarray]] = []  # (rank, failing output elements)
    for r in range(n):
        cells = layout.outputs[r]
        if len(cells) == 0:
            continue
        got = fingerprints.additive(final[r, cells])
        bad = np.flatnonzero(np.any(got != expected[r], axis=1))
        if bad.size:
            failing.append((r, bad))
    if not failing:
        return False
    if schedule.collective == "reduce_scatter" and _ownership(schedule, final, fingerprints, leaves, found):
        return True
    last_write = _last_writes(schedule, flat)
    if use_exact:
        exact_final = run(schedule, contributions()).state
        exact_expected = _exact_expected(schedule)
        for r, bad in failing:
            for k in bad.tolist():
                cell = int(layout.outputs[r][k])
                _explain_cell(schedule, r, k, cell, exact_final[r, cell], exact_expected[r][k], last_write, found)
        return True
    detailed = [(r, k, int(layout.outputs[r][k])) for r, bad in failing for k in bad[:8].tolist()][:8]
    exact = exact_cells(schedule, [(r, cell) for r, _, cell in detailed])
    exact_expected = _exact_expected_of(schedule, [(r, k) for r, k, _ in detailed])
    for r, k, cell in detailed:
        _explain_cell(schedule, r, k, cell, exact[(r, cell)], exact_expected[(r, k)], last_write, found)
    skip = len(detailed)
    for r, bad in failing:
        rest, skip = bad[skip:], max(0, skip - bad.size)
        if rest.size:
            _fingerprint_failures(schedule, r, rest, final, expected[r], last_write, found)
    return True


def _fingerprint_failures(schedule: Schedule, r: int, bad: np.ndarray, final: np.ndarray, expected: np.ndarray, last_write, found: _Collector) -> None:
    """Rank r's failing output elements ``bad`` past the first 8, reported
    by their fingerprint counts (listed up to LIST_LIMIT a kind, all counted)."""
    layout = schedule.layout
    cells = layout.outputs[r][bad]
    have = final[r, cells, COUNT].astype(np.int64)
    want = expected[bad, COUNT].astype(np.int64)
    for kind, mask in (("missing-contribution", have < want), ("duplicate-contribution", have > want), ("postcondition", have == want)):
        picked = np.flatnonzero(mask)
        room = max(0, LIST_LIMIT - found.counts.get(kind, 0))
        for j in picked[:room].tolist():
            cell, h, w = int(cells[j]), int(have[j]), int(want[j])
            found.add(
                Violation(
                    kind,
                    f"rank {r}'s {layout.cell_name(cell)} holds {h} contributions where the spec puts {w}"
                    + ("" if h != w else ", but not the right ones")
                    + " (found by fingerprint; the first 8 failing cells are listed exactly)",
                    step=last_write.get((r, cell)),
                    dst=r,
                    details={"rank": r, "chunk": cell, "count": h, "expected_count": w},
                )
            )
        if picked.size > room:
            found.counts[kind] = found.counts.get(kind, 0) + int(picked.size - room)


def _exact_expected(schedule: Schedule) -> list:
    algebra = contributions()
    layout = schedule.layout
    leaves = [algebra.leaves(r, layout.inputs[r]) for r in range(schedule.ranks)]
    return expected_outputs(schedule, leaves)


#: collectives whose output element k is made of the input elements k alone
_COLUMN_LOCAL = ("allreduce", "reduce", "broadcast")


def _exact_expected_of(schedule: Schedule, targets: list[tuple[int, int]]) -> dict:
    """The exact expected multisets of some output elements ``(rank, k)``:
    for a column-local collective from those columns of the inputs only
    (ranks x columns work, not ranks x ranks x cells), else from all."""
    layout = schedule.layout
    columns = sorted({k for _, k in targets})
    if schedule.collective in _COLUMN_LOCAL and all(len(i) > columns[-1] for i in layout.inputs):
        leaves = []
        for r in range(schedule.ranks):  # input element k of rank r is the label (r, k): algebras.contributions
            row = np.empty(len(columns), dtype=object)
            for j, k in enumerate(columns):
                row[j] = Contributions.leaf(r, k)
            leaves.append(row)
        out = expected_outputs(schedule, leaves)
        return {(r, k): out[r][columns.index(k)] for r, k in targets}
    full = _exact_expected(schedule)
    return {(r, k): full[r][k] for r, k in targets}


def _explain_cell(schedule, rank, k, cell, have: Contributions, want: Contributions, last_write, found) -> None:
    """Turn one wrong output cell into violations naming every origin."""
    name = schedule.layout.cell_name(cell)
    missing, extra = have.compare(want)
    where = f"rank {rank}'s {name}"
    step = last_write.get((rank, cell))
    both = len({i for _, i, _ in have.labels()} | {i for _, i, _ in want.labels()}) > 1
    holds, expected = _shortened(have.format(both)), _shortened(want.format(both))
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


#: origins a message names (the rest are counted: a message stays one line)
ORIGINS_LISTED = 16


def _origins(labels, schedule: Schedule, extra: bool = False) -> str:
    parts = []
    labels = list(labels)
    more = len(labels) - ORIGINS_LISTED
    for r, i, times in labels[:ORIGINS_LISTED]:
        what = f"rank {r}'s input {i}" if schedule.collective in ("allgather",) else f"rank {r}'s chunk {i}"
        if extra:
            parts.append(f"{what} {times + 1} times")
        else:
            parts.append(what if times == 1 else f"{what} ({times} times)")
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


#: origins a violation's JSON details list
ORIGINS_IN_JSON = 256


def _origin_json(labels) -> list[dict]:
    return [{"rank": r, "chunk": i, "times": t} for r, i, t in list(labels)[:ORIGINS_IN_JSON]]


def _shortened(text: str, limit: int = 120) -> str:
    """A contributor set's text cut to ``limit`` characters (one line per message)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({text.count('·') + 1} contributions)"


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


class _LastWrites:
    """The last step that writes each cell (``get((rank, cell))``, None if none)."""

    def __init__(self, schedule: Schedule):
        self.cells = schedule.layout.cells
        self.step = np.full(schedule.ranks * self.cells, -1, dtype=np.int64)
        for index, step in enumerate(schedule.steps):
            if len(step):
                self.step[step.dst.astype(np.int64) * self.cells + step.dst_chunk] = index

    def get(self, key: tuple[int, int]) -> int | None:
        rank, cell = key
        found = int(self.step[rank * self.cells + cell])
        return None if found < 0 else found


def _last_writes(schedule: Schedule, flat: _Transfers) -> _LastWrites:
    return _LastWrites(schedule)


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
    final = run(sliced, contributions(), state=_initial_cells(schedule, live)).state
    return {(r, c): final[r, c] for r, c in targets}


def _initial_cells(schedule: Schedule, live: np.ndarray) -> np.ndarray:
    """The exact initial state of the ``live`` cells (as
    :func:`~.interpreter.initial_state` with :func:`~.algebras.contributions`
    builds it: rank r's input element k is the label (r, k), any other cell
    c the uninitialised label (r, -1 - c)); the other cells hold None, as
    the sliced schedule never reads them."""
    state = np.empty(live.shape, dtype=object)
    inputs = schedule.layout.inputs
    for r in np.flatnonzero(live.any(axis=1)).tolist():
        element = np.full(live.shape[1], -1, dtype=np.int64)
        element[inputs[r]] = np.arange(len(inputs[r]))
        for c in np.flatnonzero(live[r]).tolist():
            k = int(element[c])
            state[r, c] = Contributions.leaf(r, k if k >= 0 else -1 - c)
    return state


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
    outputs = layout.outputs
    if all(o is outputs[0] for o in outputs):  # the default layouts share one array
        shapes = final[:, outputs[0], SHAPE]
    else:
        shapes = np.stack([final[r, outputs[r], SHAPE] for r in range(schedule.ranks)])
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


def traffic(schedule: Schedule) -> dict:
    """Per-rank chunks sent and received over links, as fractions of the vector."""
    n = schedule.ranks
    sent = np.zeros(n, dtype=np.int64)
    received = np.zeros(n, dtype=np.int64)
    for step in schedule.steps:
        network = step.src != step.dst
        sent += np.bincount(step.src[network], minlength=n)[:n]
        received += np.bincount(step.dst[network], minlength=n)[:n]
    return _traffic_figures(schedule, sent, received)


def _traffic_figures(schedule: Schedule, sent: np.ndarray, received: np.ndarray) -> dict:
    n = schedule.ranks
    busiest = int(np.argmax(np.maximum(sent, received))) if n else 0
    vector = schedule.chunks
    return {
        "chunks_sent_per_rank_max": int(sent.max()) if n else 0,
        "chunks_received_per_rank_max": int(received.max()) if n else 0,
        "busiest_rank": busiest,
        "busiest_rank_traffic": float(max(sent[busiest], received[busiest]) / vector) if n else 0.0,
        "lower_bound_traffic": bus_factor(schedule.collective, n),
    }


def _bandwidth(schedule: Schedule, figures: dict, found: _Collector) -> None:
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
