"""What a proof row covers: its premises as data.

A row's :class:`Scope` is a tuple of premises, each of which knows both
its solver assertion and its words:

- :class:`Bound`: a scope variable against a number or another variable
  (``N >= 2``, ``root < N``, ``groups <= 65536``);
- :class:`Condition`: any other formula over scope variables, with its
  words (``N = G L``);
- :class:`Fixed`: an option the proved program fixes instead of leaving it
  to the solver (``1 channel``), with its value for each N, so that a test
  can build the generator's schedule with exactly these options;
- :class:`Declared`: a declared statement that replaces the spec's default
  in the end condition (ring-seed's "rank r owns chunk r + 1");
- :class:`Proved`: other rows whose statements this row's argument uses
  (nccl-pat's sizes rows use the count-1 rows), proved as their own rows.

The scope text that ``collspec prove`` prints, ``--list`` lists, ``--json``
writes (with the premises themselves, :meth:`Scope.to_json`) and
docs/proofs.md shows is :meth:`Scope.text`; the induction's assertions on
N, the root and the options are :meth:`Scope.assertions`. Both come from
the same objects, so they cannot disagree.

A premise written elsewhere (in an invariant, in a query) cannot narrow a
row silently either: while a row runs, :func:`collspec.proofs.solver.decide`
requires every premise of every query that mentions only scope variables
(:data:`SCOPE_VARIABLES`) to follow from the row's scope, and fails the
query ("narrows the scope") otherwise.

>>> Scope.all_n(Bound("N", "<=", 65536), Bound("root", ">=", 0), Bound("root", "<", "N")).text()
'all N in 2..65536, all roots'
>>> Scope.bounded(range(2, 7)).text(), Scope.bounded(range(1, 7)).text(), Scope.bounded(range(3, 4)).text()
('2<=N<=6', 'N<=6', 'N=3')
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Callable

#: Z3 variable names that stand for what a row is about (the rank count, the
#: root, hierarchical-ring's node count G and ranks per node L, the NCCL
#: options): a premise over these alone is a premise of the scope.
SCOPE_VARIABLES = frozenset({"N", "root", "groups", "size", "channels", "chunk", "count", "align", "aggregation"})

#: how a variable reads in a scope
NAMES = {"groups": "G", "size": "L"}

_OPS: dict[str, Callable] = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq, "!=": operator.ne}


@dataclass(frozen=True)
class Bound:
    """``variable op value``; ``value`` is an int or another scope variable's name."""

    variable: str
    op: str
    value: int | str

    def __post_init__(self):
        if self.op not in _OPS:
            raise ValueError(f"unknown comparison {self.op!r}")

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.variable,) + ((self.value,) if isinstance(self.value, str) else ())

    def assertion(self, terms: dict):
        right = terms[self.value] if isinstance(self.value, str) else self.value
        return _OPS[self.op](terms[self.variable], right)

    def words(self) -> str:
        return f"{_name(self.variable)}{self.op}{_name(self.value)}"

    def to_json(self) -> dict:
        return {"variable": self.variable, "op": self.op, "value": self.value}


@dataclass(frozen=True)
class Condition:
    """A premise that is not a bound: ``formula(*terms of variables)``, in ``words``."""

    words: str
    variables: tuple[str, ...]
    formula: Callable = field(compare=False)

    def assertion(self, terms: dict):
        return self.formula(*(terms[v] for v in self.variables))

    def to_json(self) -> dict:
        return {"condition": self.words, "variables": list(self.variables)}


@dataclass(frozen=True)
class Fixed:
    """An option the proved program fixes: ``value(N)`` (an int for each N), in ``words``."""

    option: str
    value: Callable = field(compare=False)
    words: str = ""

    variables = ()

    def to_json(self) -> dict:
        return {"option": self.option, "fixed": self.words}


@dataclass(frozen=True)
class Declared:
    """A declared statement the end condition uses instead of the spec's
    default (ring-seed's ownership); ``value`` is what the proof uses
    (for an ownership: ``owner(r, N)``, the chunk rank r must end with)."""

    words: str
    value: Callable = field(compare=False)

    variables = ()

    def to_json(self) -> dict:
        return {"declared": self.words}


@dataclass(frozen=True)
class Proved:
    """Rows whose statements a row's argument uses (``rows``, by name), in
    ``words``: they are proved as rows of their own, not by this one."""

    rows: tuple[str, ...]
    words: str

    variables = ()

    def to_json(self) -> dict:
        return {"proved_by": list(self.rows), "premise": self.words}


Premise = Bound | Condition | Fixed | Declared | Proved


@dataclass(frozen=True)
class Scope:
    """A row's premises (module text). ``symbolic``: N is a solver variable
    (the text then starts with "all"); otherwise N runs over the bounds one
    value at a time (a bounded row)."""

    premises: tuple = ()
    symbolic: bool = True

    @classmethod
    def all_n(cls, *more: Premise) -> "Scope":
        """N >= 2 a solver variable, and ``more``."""
        return cls((Bound("N", ">=", 2), *more))

    @classmethod
    def bounded(cls, ranks: range) -> "Scope":
        """Every N in ``ranks``, one at a time (N concrete in the solver)."""
        return cls((Bound("N", ">=", ranks.start), Bound("N", "<=", ranks.stop - 1)), symbolic=False)

    def __add__(self, more: "Scope | tuple") -> "Scope":
        extra = more.premises if isinstance(more, Scope) else tuple(more)
        return Scope(self.premises + tuple(p for p in extra if p not in self.premises), self.symbolic)

    def variables(self) -> set[str]:
        return {v for p in self.premises for v in p.variables}

    def assertions(self, terms: dict) -> list:
        """The solver assertions of the bounds and conditions whose variables
        are all in ``terms`` (name -> Z3 term)."""
        return [p.assertion(terms) for p in self.premises if isinstance(p, (Bound, Condition)) and all(v in terms for v in p.variables)]

    def fixed(self, n: int) -> dict:
        """The options the proved program fixes, at N = n."""
        return {p.option: p.value(n) for p in self.premises if isinstance(p, Fixed)}

    def declared(self) -> list[Declared]:
        return [p for p in self.premises if isinstance(p, Declared)]

    def text(self) -> str:
        """The scope in words: N's bounds first ("all" when N is symbolic),
        then each other variable's, then conditions, fixed options and
        declarations, in order."""
        order = []
        for p in self.premises:
            if isinstance(p, Bound) and p.variable not in order:
                order.append(p.variable)
        order.sort(key=lambda v: v != "N")
        parts = [_bounds_words(v, [p for p in self.premises if isinstance(p, Bound) and p.variable == v], self.symbolic) for v in order]
        if parts and self.symbolic:
            parts[0] = "all " + parts[0]
        parts += [p.words for p in self.premises if not isinstance(p, Bound)]
        return ", ".join(parts)

    def to_json(self) -> list[dict]:
        return [p.to_json() for p in self.premises]


def _name(value) -> str:
    return NAMES.get(value, value) if isinstance(value, str) else str(value)


def _bounds_words(variable: str, bounds: list[Bound], symbolic: bool = True) -> str:
    """One variable's bounds: ``N>=2``, ``N in 2..65536``, ``all roots``;
    for a bounded row ``N=3``, ``N<=6`` (from 1), ``2<=N<=6``."""
    low = [b for b in bounds if b.op == ">="]
    high = [b for b in bounds if b.op in ("<=", "<")]
    rest = [b for b in bounds if b not in low and b not in high]
    if len(low) == 1 and len(high) == 1 and not rest:
        lo, hi = low[0].value, high[0].value
        if high[0].op == "<":
            top = hi - 1 if isinstance(hi, int) else f"{_name(hi)}-1"
        else:
            top = hi if isinstance(hi, int) else _name(hi)
        if variable == "root" and lo == 0 and top == "N-1":
            return "all roots"
        if isinstance(lo, int) and isinstance(top, int) and lo == top:
            return f"{_name(variable)}={lo}"
        if not symbolic:
            return f"{_name(variable)}<={top}" if lo == 1 else f"{lo}<={_name(variable)}<={top}"
        return f"{_name(variable)} in {lo}..{top}"
    return ", ".join(b.words() for b in bounds)
