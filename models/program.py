"""Algorithms as one transfer function: the object that is both run and proved.

Every built-in algorithm is a :class:`Program`: for N ranks it has
``steps(N)`` steps and ``width(N)`` transfer slots per (step, rank), and
``transfer(N, s, r, j)`` says what slot j of rank r does at step s: whether
it is active, where it goes, which chunk it reads and writes, and whether
the receiver copies or reduces. ``chunks(N)`` cells per rank, the declared
``link_capacity(N)`` and the ``root`` complete it. Nothing else describes
the algorithm.

The proved object is the built object, by construction:

- :meth:`Program.terms` evaluates the program's functions once on Z3
  variables (N, s, r, j and the options) and keeps the terms with the
  object; :func:`symbolic` hands a proof those kept terms as functions
  (arguments substituted in), so :mod:`collspec.proofs` proves properties
  of the very terms this object's schedules run, for every N, even if the
  Python functions behind them are changed after the first evaluation.
- :meth:`Program.schedule` (the generator) enumerates the *same* terms: it
  sets N and the options to their values, and
  :mod:`collspec.models.terms` compiles them
  into numpy code that enumerates every (step, rank, slot) (steps in order,
  ranks in order, slots in order; inactive slots dropped). The step count,
  the width, the cell count, the declared link capacity and the root come
  from the terms too. So the schedule that the interpreter, the checker,
  the cost model, the exporters and impl/'s executor run agrees with the
  Z3 terms at every point; the Python functions themselves never run on
  numpy arrays.
- Python control flow cannot split the two: while a program's function is
  evaluated, using a Z3 value as a Python truth value (``if n % 2 == 1``,
  ``a if n >= 17 else b``, ``and``/``or``/``min`` on a symbolic value) raises
  :class:`SymbolicBranchError` naming the algorithm and the source line, and
  so does any other operation the Z3 evaluation cannot follow (``//`` on a
  Z3 term, ``int()`` of one), instead of taking one branch silently.
- Programs on bit-vectors (:data:`BITVEC`, :data:`BITVEC_WIDTH` bits) are
  refused (:class:`RefinementError`, naming the options) where an active
  transfer's value depends on a result that wrapped around: the proofs'
  vectors would then stand for another algorithm than the one meant.

Functions are written with ordinary arithmetic (``+ - * %`` and comparisons)
and the helpers of :mod:`collspec.models.indexing` for conditions and bit
operations (``where``, ``both``, ``floor_log2``, ...). A program's options (a
root, a group size) are arguments of its ``factory``; the proofs pass Z3
variables for them, so "all N" can also mean "all group sizes".

>>> from collspec.models.generators import program
>>> ring = program("ring", "allreduce")
>>> t = ring.transfer(4, 0, 1, 0)   # rank 1's transfer at step 0 of 4 ranks
>>> ring.steps(4), ring.width(4), [int(v) for v in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)]
(6, 1, [1, 2, 0, 0, 1])
>>> ring.schedule(4).transfers
24
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .layout import ScheduleError
from .schedule import COPY, REDUCE, Schedule, Step

#: About how many (step, rank, slot) points :meth:`Program.enumerate` evaluates at once.
ENUMERATE_BLOCK = 1 << 18
#: Z3 sorts a program's functions can be evaluated on.
INT, BITVEC = "int", "bitvec"
#: Width of the bit-vectors for programs that use bit operations: ranks and
#: cells stay below 2**18 (N <= 2**16, a heap child 2p + 2), far from
#: overflow; a schedule whose transfers depend on a wrapped value is refused.
BITVEC_WIDTH = 20
#: the function fields of a :class:`Program` that are part of the proved object
FUNCTIONS = ("chunks", "steps", "width", "transfer", "link_capacity")


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
    """A schedule cannot be built as the enumeration of its proved terms."""


class SymbolicBranchError(RefinementError):
    """A program's code used a symbolic value where the Z3 evaluation cannot
    follow it (a Python truth value, ``//``, ``int()``): the message names the
    algorithm and the source line."""


@dataclass(frozen=True)
class Program:
    """One algorithm for one collective (see the module text).

    ``factory(**params)`` rebuilds the program with other option values
    (the proofs pass Z3 variables); ``params`` are this program's values.
    ``label(n, s)`` gives the step's (phase, name) for reports (called with
    ints). ``link_capacity(n)``, if given, is the declared link capacity, a
    function of N like ``steps``; otherwise ``capacity(n, steps)`` measures
    it on the built steps (default 1 chunk per link and step). ``sort`` is
    the Z3 sort the proofs and the schedule's evaluation use: integers, or
    bit-vectors for programs with bit operations. ``choices`` maps an
    option to the function of N the program uses for it.
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
    root: Any = None
    title: Callable[[int], str] | None = None
    meta: dict = field(default_factory=dict)
    link_capacity: Callable | None = None
    #: option values the program chooses itself, by name, each a function of N
    #: (nccl-pat's ``aggregation`` and ``post``: the very functions its steps
    #: and transfers call), so a proof can ask what they choose
    choices: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in FUNCTIONS:
            fn = getattr(self, name)
            if fn is not None and not isinstance(fn, _Guarded):
                object.__setattr__(self, name, _Guarded(fn, self, name))

    def terms(self) -> "_Terms":
        """The program's functions evaluated once on Z3 variables (cached)."""
        cached = self.__dict__.get("_terms")
        if cached is None:
            cached = _Terms(self)
            object.__setattr__(self, "_terms", cached)
        return cached

    def enumerate(self, n: int, block: int = ENUMERATE_BLOCK) -> list[Step]:
        """The transfer term on every (step, rank, slot), as steps.

        The compiled term (:mod:`collspec.models.terms`) is evaluated on a
        block of steps at once (``s`` an array over steps), about ``block``
        slots per evaluation: one step at a time the per-call overhead of a
        few dozen small numpy operations dominated the 4096-rank ring
        (docs/bench.md). The result is the same as evaluating step by step
        (tests/test_models_program.py compares the two for every program)."""
        return self.terms().at(n).enumerate(block)

    def schedule(self, n: int) -> Schedule:
        """The generator: the enumeration of the proved terms at N = n.
        More than :data:`MAX_POINTS` (step, rank, slot) points is refused
        (ScheduleError naming the rank count)."""
        at = self.terms().at(n)
        points = at.steps * n * at.width
        if points > MAX_POINTS:
            raise ScheduleError(f"{self.algorithm}: --ranks {n} is beyond what is enumerated here ({points} (step, rank, slot) points, "
                                f"at most {MAX_POINTS}); use fewer ranks or smaller options")
        steps = at.enumerate(ENUMERATE_BLOCK)
        if at.capacity is not None:
            capacity = at.capacity
        else:
            capacity = self.capacity(n, steps) if self.capacity else 1
        root = {} if at.root is None else {"root": at.root}
        return Schedule(
            self.collective,
            n,
            at.chunks,
            tuple(steps),
            name=self.describe(n),
            link_capacity=capacity,
            meta={"algorithm": self.algorithm, **self.meta},
            **root,
        )

    def describe(self, n: int) -> str:
        text = self.title(n) if self.title else f"{self.algorithm} {self.collective}, {n} ranks"
        return text.replace(" 1 ranks", " 1 rank") if n == 1 else text  # the titles are written for N >= 2

    def options(self) -> str:
        """This program's option values, as ``name=value`` (for messages)."""
        shown = {**{k: v for k, v in self.meta.items() if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}, **self.params}
        return ", ".join(f"{k}={v}" for k, v in shown.items())


# -- no Python branch on a symbolic value ---------------------------------------------------------

_GUARD = threading.local()
_HERE = os.path.abspath(__file__)
_ROOT = os.path.dirname(os.path.dirname(_HERE))
_INSTALLED = []


def _install_guard() -> None:
    """Make ``bool()`` of a Z3 expression raise while a program function runs
    (in this thread); elsewhere z3's own ``__bool__`` is kept."""
    if _INSTALLED:
        return
    import z3

    original = z3.AstRef.__bool__

    def guarded_bool(self):
        if getattr(_GUARD, "program", None) is not None and not (z3.is_true(self) or z3.is_false(self)):
            program, name = _GUARD.program
            where, source = _caller(sys._getframe(1))
            raise SymbolicBranchError(
                f"{program.algorithm} {program.collective}: {where}: a symbolic value used as a Python truth value "
                f"in {name}(){source}; the proofs would follow one branch and the schedule another: write the condition "
                "with collspec.models.indexing's where/both/either/negate")
        return original(self)

    z3.AstRef.__bool__ = guarded_bool
    z3.AstRef.__nonzero__ = guarded_bool
    _INSTALLED.append(original)


def _outside(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path != _HERE and f"{os.sep}z3{os.sep}" not in path and not path.startswith(os.path.dirname(np.__file__))


def _caller(frame) -> tuple[str, str]:
    """``(file:line, ": `source`")`` of the first frame outside z3, numpy and this module."""
    while frame is not None and not _outside(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return "(unknown line)", ""
    return _place(frame.f_code.co_filename, frame.f_lineno)


def _place(filename: str, line: int) -> tuple[str, str]:
    import linecache

    path = os.path.abspath(filename)
    shown = os.path.relpath(path, _ROOT) if path.startswith(_ROOT + os.sep) else path
    text = linecache.getline(path, line).strip()
    return f"{shown}:{line}", (f": `{text}`" if text else "")


def _is_symbolic(value) -> bool:
    return type(value).__module__.startswith("z3")


class _Guarded:
    """A program function that runs with the guard on (see :func:`_install_guard`)."""

    def __init__(self, fn: Callable, program: Program, name: str):
        self.fn, self.program, self.name = fn, program, name

    def __call__(self, *args):
        _install_guard()
        import z3

        outer = getattr(_GUARD, "program", None)
        _GUARD.program = (self.program, self.name)
        try:
            return self.fn(*args)
        except SymbolicBranchError:
            raise
        except (TypeError, z3.Z3Exception) as error:
            if not any(_is_symbolic(a) for a in args) and not any(_is_symbolic(v) for v in self.program.params.values()):
                raise
            tb = error.__traceback__
            inner = None
            while tb is not None:
                if _outside(tb.tb_frame.f_code.co_filename):
                    inner = tb
                tb = tb.tb_next
            where, source = _place(inner.tb_frame.f_code.co_filename, inner.tb_lineno) if inner else ("(unknown line)", "")
            raise SymbolicBranchError(
                f"{self.program.algorithm} {self.program.collective}: {where}: {error} in {self.name}(){source}: the Z3 evaluation "
                "cannot follow this on a symbolic value; use the helpers of collspec.models.indexing (floordiv, where, ...)") from None
        finally:
            _GUARD.program = outer


# -- the proved terms, and the schedule built from them ---------------------------------------------


def symbolic(program: Program):
    """``(program's proved terms as functions, variables)``: the variables are
    N, s, r, j and a Z3 variable for each option, of the program's sort; the
    first is a view of :meth:`Program.terms` (the program rebuilt with those
    variables, its functions evaluated once with the guard of the module text
    on), so a proof reads the very terms the program's schedules enumerate.
    Its ``transfer``, ``steps``, ``width``, ``chunks``, ``link_capacity``,
    ``root`` and ``choices`` substitute their arguments into those terms; any
    other attribute is the rebuilt program's."""
    terms = program.terms()
    return _View(terms), dict(terms.variables)


def _rebuilt(program: Program):
    """``(program over Z3 variables, variables)``: the program rebuilt with a
    Z3 variable for each option (see :func:`symbolic`)."""
    import z3

    make = (lambda name: z3.BitVec(name, BITVEC_WIDTH)) if program.sort == BITVEC else z3.Int
    names = ["N", "s", "r", "j", *program.params]
    variables = {name: make(name) for name in names}
    rebuilt = program.factory(**{k: variables[k] for k in program.params}) if program.params else program
    return rebuilt, variables


class _Terms:
    """A program's functions as Z3 terms (N, s, r, j and the options symbolic)."""

    def __init__(self, program: Program):
        import z3

        self.program = program
        sym, v = _rebuilt(program)
        n = v["N"]
        self.rebuilt, self.variables = sym, v
        t = sym.transfer(n, v["s"], v["r"], v["j"])
        self.transfer = [as_term(f, n) for f in (t.active, t.dst, t.src_chunk, t.dst_chunk, t.op)]
        self.shape = [as_term(sym.steps(n), n), as_term(sym.width(n), n), as_term(sym.chunks(n), n)]
        self.capacity = as_term(sym.link_capacity(n), n) if sym.link_capacity is not None else None
        self.root = as_term(sym.root, n) if sym.root is not None else None
        # the option values the program chooses itself, as terms of the same evaluation (so a
        # proof that replaces them finds these very subterms in the transfer)
        self.choices = {name: as_term(f(n), n) for name, f in sym.choices.items()}
        self.make = (lambda x: z3.BitVecVal(int(x), BITVEC_WIDTH)) if program.sort == BITVEC else (lambda x: z3.IntVal(int(x)))

    def at(self, n: int) -> "_Instance":
        return _Instance(self, n)


class _View:
    """A program's cached terms (:class:`_Terms`) as the functions a proof
    calls (what :func:`symbolic` returns): each call substitutes its
    arguments for N, s, r and j in the terms evaluated once, so every proof
    of a program object, and every schedule of it, reads one evaluation of
    its Python functions, however those functions change afterwards."""

    def __init__(self, terms: _Terms):
        self._terms = terms
        self.root = terms.root
        self.choices = {name: self._function(term) for name, term in terms.choices.items()}
        self.link_capacity = self._function(terms.capacity) if terms.capacity is not None else None

    def _at(self, term, **values):
        import z3

        v = self._terms.variables
        pairs = []
        for name, value in values.items():
            value = as_term(value, v[name])
            if not value.eq(v[name]):
                pairs.append((v[name], value))
        return z3.substitute(term, *pairs) if pairs else term

    def _function(self, term):
        return lambda n: self._at(term, N=n)

    def transfer(self, n, s, r, j) -> Transfer:
        return Transfer(*(self._at(t, N=n, s=s, r=r, j=j) for t in self._terms.transfer))

    def steps(self, n):
        return self._at(self._terms.shape[0], N=n)

    def width(self, n):
        return self._at(self._terms.shape[1], N=n)

    def chunks(self, n):
        return self._at(self._terms.shape[2], N=n)

    def __getattr__(self, name):
        return getattr(self._terms.rebuilt, name)


class _Instance:
    """The terms at N = n and the program's option values, compiled: for
    integer programs the values are substituted and folded per N; for
    bit-vector programs they stay variables given their 20-bit values (the
    code is the same for every N, compiled once: :func:`~collspec.models.terms.compile_terms`)."""

    def __init__(self, terms: _Terms, n: int):
        import z3

        from .terms import TooLarge, compile_terms

        program, v = terms.program, terms.variables
        self.program, self.n = program, n
        values = [(v["N"], terms.make(n))] + [(v[k], terms.make(program.params[k])) for k in program.params]
        fixed_names = ["N", *program.params]
        if program.sort == BITVEC:
            half = 1 << (BITVEC_WIDTH - 1)
            for name, raw in zip(fixed_names, [n, *(program.params[k] for k in program.params)]):
                if not -half <= int(raw) < half:  # its bit-vector would be another number (2^19 + 10 ranks: N = -524278)
                    raise self.wrapped(f"{name} = {int(raw)}")
            # N and the options stay variables, given their bit-vector values (the signed 20-bit
            # value of each constant, as substituting it would give): every operation is kept, so
            # wrap-around is seen, and one compiled code serves every N (compile_terms keeps it)
            self.fixed = {name: np.int64(value.as_signed_long()) for name, (_, value) in zip(fixed_names, values)}
            fixed = lambda term: term  # noqa: E731
            given = {name: v[name] for name in fixed_names}
        else:  # integers: the constants folded in, per N
            self.fixed = {}
            fixed = lambda term: z3.simplify(z3.substitute(term, *values))  # noqa: E731
            given = {}
        scalars = [*terms.shape] + ([terms.capacity] if terms.capacity is not None else []) + ([terms.root] if terms.root is not None else [])
        try:
            got, over = compile_terms([fixed(t) for t in scalars], given).evaluate(**self.fixed)
        except TooLarge as error:
            raise self.too_large(f"steps(N), width(N) or chunks(N) ({error})") from None
        names = ["steps", "width", "chunks"] + (["link_capacity"] if terms.capacity is not None else []) + (["root"] if terms.root is not None else [])
        for name, value, mask in zip(names, got, over):
            if mask is not None:
                raise self.wrapped(f"{name}(N)")
        numbers = dict(zip(names, (int(x) for x in got)))
        self.steps, self.width, self.chunks = numbers["steps"], numbers["width"], numbers["chunks"]
        self.capacity, self.root = numbers.get("link_capacity"), numbers.get("root")
        if self.steps < 0 or self.width < 0:
            raise RefinementError(f"{program.describe(n)}: the program has {self.steps} steps and {self.width} slots")
        if program.sort == BITVEC and max(self.steps, self.width) > 1 << (BITVEC_WIDTH - 1):
            # the steps s and slots j enumerated are inputs of the bit-vector terms: each must be a 20-bit value
            raise self.wrapped(f"the step or slot numbers ({self.steps} steps, {self.width} slots)")
        self.code = compile_terms([fixed(t) for t in terms.transfer], {**given, **{k: v[k] for k in ("s", "r", "j")}})

    def wrapped(self, what: str) -> RefinementError:
        options = self.program.options()
        return RefinementError(
            f"{self.program.algorithm} {self.program.collective}, {self.n} ranks{', options ' + options if options else ''}: "
            f"{what} depends on a value past the proofs' {BITVEC_WIDTH}-bit vectors (signed, from -2^{BITVEC_WIDTH - 1} to "
            f"2^{BITVEC_WIDTH - 1} - 1); use smaller options or fewer ranks")

    def too_large(self, what: str) -> RefinementError:
        options = self.program.options()
        return RefinementError(f"{self.program.algorithm} {self.program.collective}, {self.n} ranks{', options ' + options if options else ''}: "
                               f"{what} is past the 64-bit integers the schedule is evaluated in; use smaller options or fewer ranks")

    def evaluate(self, s, r, j) -> tuple[list, list]:
        """The transfer's fields (active, dst, src_chunk, dst_chunk, op) and
        their overflow masks at arrays of steps, ranks and slots
        (:meth:`collspec.models.terms.Compiled.evaluate`), N and the options
        being this instance's."""
        return self.code.evaluate(s=s, r=r, j=j, **self.fixed)

    def enumerate(self, block: int) -> list[Step]:
        from .terms import TooLarge

        n, width, total = self.n, self.width, self.steps
        ranks = np.arange(n, dtype=np.int64)[None, :, None]
        slots = np.arange(width, dtype=np.int64)[None, None, :]
        per_step = max(n * width, 1)
        span = max(1, block // per_step)
        steps: list[Step] = []
        for first in range(0, total, span):
            count = min(span, total - first)
            s = np.arange(first, first + count, dtype=np.int64)[:, None, None]
            try:
                values, masks = self.evaluate(s=s, r=ranks, j=slots)
            except TooLarge as error:
                raise self.too_large(f"the transfers of steps {first}..{first + count - 1} ({error})") from None
            shape = (count, n, width)
            active = np.ascontiguousarray(np.broadcast_to(np.asarray(values[0], dtype=bool), shape))
            if any(m is not None for m in masks):
                self._refuse_wrapped(active, masks, shape, first)
            sizes = active.reshape(count, -1).sum(axis=1)
            if int(sizes.sum()) == active.size:  # every slot active (rings): a copy, no mask
                columns = [np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.int64), shape)).reshape(-1) for v in (ranks, *values[1:])]
            else:
                columns = [np.broadcast_to(np.asarray(v, dtype=np.int64), shape)[active] for v in (ranks, *values[1:])]
            labels = [self.program.label(n, k) for k in range(first, first + count)]
            steps.extend(Step.split(columns, sizes, labels))
        return steps

    def _refuse_wrapped(self, active, masks, shape, first: int) -> None:
        bad = np.zeros(shape, dtype=bool)
        if masks[0] is not None:
            bad |= np.broadcast_to(masks[0], shape)
        for m in masks[1:]:
            if m is not None:
                bad |= np.broadcast_to(m, shape) & active
        if bad.any():
            s, r, j = (int(x[0]) for x in np.nonzero(bad))
            raise self.wrapped(f"the transfer at step {first + s}, rank {r}, slot {j}")


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


__all__ = ["Program", "Transfer", "RefinementError", "SymbolicBranchError", "symbolic", "as_term", "COPY", "REDUCE", "INT", "BITVEC"]
