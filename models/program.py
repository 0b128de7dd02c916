"""Algorithms as one transfer function: the object that is both run and proved.

Every built-in algorithm is a :class:`Program`: for N ranks it has
``steps(N)`` steps and ``width(N)`` transfer slots per (step, rank), and
``transfer(N, s, r, j)`` says what slot j of rank r does at step s: whether
it is active, where it goes, which chunk it reads and writes, and whether
the receiver copies or reduces. Nothing else describes the algorithm.

- :meth:`Program.schedule` is the generator: it enumerates the function on
  numpy arrays (steps in order, ranks in order, slots in order; inactive
  slots dropped) into the :class:`~collspec.models.schedule.Schedule` that
  the interpreter, the checker, the cost model, the exporters and impl/'s
  executor run.
- :mod:`collspec.proofs` evaluates the *same* function on Z3 terms, N
  symbolic, and proves properties of it for every N.
- :func:`refine` is the bridge: it evaluates the function's Z3 terms at
  concrete points of a generated schedule and checks they give what numpy
  gave. It runs on every schedule :meth:`Program.schedule` builds, so a
  schedule that is not the enumeration of the proved function is never
  returned (:class:`RefinementError`).

Functions are written with ordinary arithmetic (``+ - * %`` and comparisons)
and the helpers of :mod:`collspec.models.indexing` for conditions and bit
operations (``where``, ``both``, ``floor_log2``, ...), which mean the same on
numpy and on Z3. A program's options (a root, a group size) are arguments
of its ``factory``; the proofs pass Z3 variables for them, so "all N" can
also mean "all group sizes".

>>> from collspec.models.generators import program
>>> ring = program("ring", "allreduce")
>>> t = ring.transfer(4, 0, 1, 0)   # rank 1's transfer at step 0 of 4 ranks
>>> ring.steps(4), ring.width(4), [int(v) for v in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)]
(6, 1, [1, 2, 0, 0, 1])
>>> ring.schedule(4).transfers
24
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .layout import ScheduleError
from .schedule import COPY, REDUCE, Schedule, Step

#: About how many (step, rank, slot) points :meth:`Program.enumerate` evaluates at once.
ENUMERATE_BLOCK = 1 << 18
#: Points of a schedule at which :func:`refine` compares numpy with Z3.
REFINE_SAMPLES = 48
#: Z3 sorts a program's functions can be evaluated on.
INT, BITVEC = "int", "bitvec"
#: Width of the bit-vectors for programs that use bit operations: ranks and
#: cells stay below 2**18 (N <= 2**16, a heap child 2p + 2), far from overflow.
BITVEC_WIDTH = 20


@dataclass(frozen=True)
class Transfer:
    """What one slot of one rank does at one step (scalars, arrays or Z3 terms)."""

    active: Any
    dst: Any
    src_chunk: Any
    dst_chunk: Any
    op: Any


#: the most (step, rank, slot) points :meth:`Program.schedule` enumerates (minutes of numpy)
MAX_POINTS = 1 << 31


class RefinementError(ScheduleError):
    """A generated schedule is not the enumeration of its transfer function."""


@dataclass(frozen=True)
class Program:
    """One algorithm for one collective (see the module text).

    ``factory(**params)`` rebuilds the program with other option values
    (the proofs pass Z3 variables); ``params`` are this program's values.
    ``label(n, s)`` gives the step's (phase, name) for reports; ``capacity``
    the link capacity of the schedule (default 1 chunk per link and step).
    ``sort`` is the Z3 sort the proofs and :func:`refine` use: integers, or
    bit-vectors for programs with bit operations.
    """

    algorithm: str
    collective: str
    chunks: Callable
    steps: Callable
    width: Callable
    transfer: Callable
    label: Callable
    factory: Callable[..., "Program"]
    params: dict = field(default_factory=dict)
    capacity: Callable[[int, list[Step]], int] | None = None
    sort: str = INT
    root: int | None = None
    title: Callable[[int], str] | None = None
    meta: dict = field(default_factory=dict)

    def enumerate(self, n: int, block: int = ENUMERATE_BLOCK) -> list[Step]:
        """The transfer function on every (step, rank, slot), as steps.

        The function is evaluated on a block of steps at once (``s`` an
        array over steps, as it is a Z3 variable for the proofs, so the
        same code serves both), about ``block`` slots per evaluation: one
        step at a time the per-call overhead of a few dozen small numpy
        operations dominated the 4096-rank ring (docs/bench.md). The result
        is the same as evaluating step by step (tests/test_models_program.py
        compares the two for every program)."""
        width = int(self.width(n))
        total = int(self.steps(n))
        ranks = np.arange(n, dtype=np.int64)[None, :, None]
        slots = np.arange(width, dtype=np.int64)[None, None, :]
        per_step = max(n * width, 1)
        span = max(1, block // per_step)
        steps: list[Step] = []
        for first in range(0, total, span):
            count = min(span, total - first)
            s = np.arange(first, first + count, dtype=np.int64)[:, None, None]
            t = self.transfer(n, s, ranks, slots)
            shape = (count, n, width)
            active = np.broadcast_to(np.asarray(t.active, dtype=bool), shape)
            sizes = active.reshape(count, -1).sum(axis=1)
            columns = [np.broadcast_to(np.asarray(v, dtype=np.int64), shape)[active] for v in (ranks, t.dst, t.src_chunk, t.dst_chunk, t.op)]
            labels = [self.label(n, k) for k in range(first, first + count)]
            steps.extend(Step.split(columns, sizes, labels))
        return steps

    def schedule(self, n: int) -> Schedule:
        """The generator: the enumeration, refined against the Z3 terms.
        More than :data:`MAX_POINTS` (step, rank, slot) points is refused
        (ScheduleError naming the rank count)."""
        points = int(self.steps(n)) * n * int(self.width(n))
        if points > MAX_POINTS:
            raise ScheduleError(f"{self.algorithm}: --ranks {n} is beyond what is enumerated here ({points} (step, rank, slot) points, "
                                f"at most {MAX_POINTS}); use fewer ranks or smaller options")
        steps = self.enumerate(n)
        capacity = self.capacity(n, steps) if self.capacity else 1
        root = {} if self.root is None else {"root": self.root}
        schedule = Schedule(
            self.collective,
            n,
            int(self.chunks(n)),
            tuple(steps),
            name=self.describe(n),
            link_capacity=capacity,
            meta={"algorithm": self.algorithm, **self.meta},
            **root,
        )
        refine(self, schedule)
        return schedule

    def describe(self, n: int) -> str:
        text = self.title(n) if self.title else f"{self.algorithm} {self.collective}, {n} ranks"
        return text.replace(" 1 ranks", " 1 rank") if n == 1 else text  # the titles are written for N >= 2


# -- refinement: numpy and Z3 agree on the schedule that was built ----------------------------


def symbolic(program: Program, sort: str | None = None):
    """``(program over Z3 variables, variables)``: the program rebuilt with a
    Z3 variable for each option, and the variables N, s, r, j and the
    options by name, all of ``sort`` (the program's own by default)."""
    import z3

    sort = sort or program.sort
    make = (lambda name: z3.BitVec(name, BITVEC_WIDTH)) if sort == BITVEC else z3.Int
    names = ["N", "s", "r", "j", *program.params]
    variables = {name: make(name) for name in names}
    rebuilt = program.factory(**{k: variables[k] for k in program.params}) if program.params else program
    return rebuilt, variables


def _value(term, sort: str):
    import z3

    term = z3.simplify(term)
    if z3.is_true(term) or z3.is_false(term):
        return z3.is_true(term)
    if sort == BITVEC:
        return term.as_signed_long()
    return term.as_long()


def _sample(schedule: Schedule, program: Program) -> list[tuple[int, int, int]]:
    """Deterministic (step, rank, slot) points: spread over steps, ranks and
    slots, including the first and last of each."""
    n, steps = schedule.ranks, len(schedule.steps)
    width = int(program.width(n))
    if steps == 0 or width == 0:
        return []
    count = min(REFINE_SAMPLES, steps * n * width)
    picks = np.unique(np.linspace(0, steps * n * width - 1, count).astype(np.int64))
    s, rest = np.divmod(picks, n * width)
    r, j = np.divmod(rest, width)
    return list(zip(s.tolist(), r.tolist(), j.tolist()))


def refine(program: Program, schedule: Schedule) -> None:
    """Check that ``schedule`` is the enumeration of the program's function
    as Z3 evaluates it: the step count, and at sampled points whether the
    slot is active and, if so, the transfer it makes (which must be in the
    schedule at its place). Raises :class:`RefinementError` otherwise."""
    import z3

    n = schedule.ranks
    sym, v = symbolic(program)
    cast = (lambda x: z3.BitVecVal(int(x), BITVEC_WIDTH)) if program.sort == BITVEC else z3.IntVal
    bindings = [(v["N"], cast(n))] + [(v[k], cast(program.params[k])) for k in program.params]
    expected_steps = _value(z3.substitute(as_term(sym.steps(v["N"]), v["N"]), *bindings), program.sort)
    if expected_steps != len(schedule.steps):
        raise RefinementError(f"{schedule.label()}: built {len(schedule.steps)} steps, the proved function has {expected_steps}")
    term = sym.transfer(v["N"], v["s"], v["r"], v["j"])
    fields = [as_term(f, v["N"]) for f in (term.active, term.dst, term.src_chunk, term.dst_chunk, term.op)]
    for s, r, j in _sample(schedule, program):
        point = bindings + [(v["s"], cast(s)), (v["r"], cast(r)), (v["j"], cast(j))]
        active, dst, src_chunk, dst_chunk, op = (_value(z3.substitute(f, *point), program.sort) for f in fields)
        step = schedule.steps[s]
        built = _slot_position(program, step, n, s, r, j)
        where = f"{schedule.label()}, step {s}, rank {r}, slot {j}"
        if built is None:
            if active:
                raise RefinementError(f"{where}: the proved function sends here, the schedule does not")
            continue
        if not active:
            raise RefinementError(f"{where}: the schedule sends here, the proved function does not")
        if built >= len(step):
            raise RefinementError(f"{where}: the proved function sends here, the schedule's step has no such transfer")
        got = (int(step.src[built]), int(step.dst[built]), int(step.src_chunk[built]), int(step.dst_chunk[built]), int(step.op[built]))
        if got != (r, dst, src_chunk, dst_chunk, op):
            raise RefinementError(f"{where}: the schedule has {got}, the proved function {(r, dst, src_chunk, dst_chunk, op)}")


def _slot_position(program: Program, step: Step, n: int, s: int, r: int, j: int) -> int | None:
    """Where slot (r, j) of step s sits in the enumerated step (None if
    inactive): rank r's transfers are contiguous, in slot order."""
    slots = np.arange(int(program.width(n)), dtype=np.int64)
    active = np.broadcast_to(np.asarray(program.transfer(n, s, np.int64(r), slots).active, dtype=bool), slots.shape)
    if not active[j]:
        return None
    return int(np.searchsorted(step.src, r, side="left")) + int(np.count_nonzero(active[:j]))


def as_term(value, like):
    """A Python (or numpy) int or bool as a Z3 term of ``like``'s sort; Z3
    terms pass through."""
    import z3

    if isinstance(value, (bool, np.bool_)):
        return z3.BoolVal(bool(value))
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
        return as_term(value, like)
    if isinstance(value, (int, np.integer)):
        return z3.BitVecVal(int(value), like.size()) if z3.is_bv(like) else z3.IntVal(int(value))
    return value


__all__ = ["Program", "Transfer", "RefinementError", "refine", "symbolic", "as_term", "COPY", "REDUCE", "INT", "BITVEC"]
