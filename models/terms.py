"""Z3 terms evaluated on numpy arrays: the evaluator the schedules are built with.

A program's transfer function is evaluated once on Z3 variables (see
:mod:`collspec.models.program`); this module turns the resulting terms into
a vectorised numpy evaluator, so that the schedule is the enumeration of the
very term the proofs reason about. :func:`compile_terms` walks the terms'
DAG once (shared subterms are computed once) into a list of numpy
operations; :meth:`Compiled.evaluate` runs them on arrays of the free
variables (usually s, r, j, broadcast against each other).

Semantics are Z3's, operator by operator (tests/test_models_terms.py
compares each with Z3's own evaluation, wrap-around and division by zero
included):

- integers: ``+ - *``, unary minus, ``div``/``mod`` Euclidean (the
  remainder is never negative, for either sign of the divisor), ``rem``,
  ``abs``, comparisons. Z3 leaves ``x div 0`` and ``x mod 0`` unspecified (a
  proof holds for every value they could take); here they are 0 and ``x``.
- bit-vectors of width w: values are kept as signed integers in
  [-2^(w-1), 2^(w-1)), every result wrapped modulo 2^w; ``bvadd bvsub bvmul
  bvneg``, unsigned and signed division and remainders (SMT-LIB's values for
  a zero divisor: ``bvudiv`` all ones, ``bvurem`` the dividend, ``bvsdiv``
  -1 or 1), ``bvand bvor bvxor bvnot`` (and the n-forms), shifts (a shift by
  w or more gives 0, or the sign for ``bvashr``), ``extract concat
  zero_extend sign_extend``, signed and unsigned comparisons.
- Booleans: ``and or not xor => ite = distinct``.

Integers are evaluated in int64; a product whose operands could reach 2^62
raises :class:`TooLarge` rather than wrap (sums of the built-in programs'
values stay far below: N <= 2^16, cells <= 2^22).

Bit-vector terms also carry an *overflow* mask: where a ``bvadd``,
``bvsub``, ``bvmul``, ``bvneg``, ``bvshl`` or ``bvsdiv`` result wrapped (the
integer it stands for is outside the signed range), and every value computed
from it, except where the value does not depend on it (an ``and`` with a
false operand that did not overflow, an ``ite`` whose branch not taken did).
The caller refuses a schedule whose active transfers depend on a wrapped
value: the bit-vector term would still be what is proved, but not what the
algorithm means.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import z3


class UnsupportedTerm(Exception):
    """A Z3 operator the evaluator does not implement (an internal error)."""


class TooLarge(Exception):
    """An integer product that int64 cannot hold exactly."""


def _int_mul(w, *xs):
    bound = 1
    for x in xs:
        a = np.asarray(x)
        bound *= max(abs(int(a.min())), abs(int(a.max()))) if a.size else 0
    if bound >= 1 << 62:
        raise TooLarge(f"a product reaches {bound.bit_length()} bits")
    return _nary(np.multiply)(w, *xs)


def _signed(v, w):
    """``v`` (int64, any integer) wrapped to the signed range of width w."""
    half = np.int64(1) << np.int64(w - 1)
    return ((np.asarray(v, dtype=np.int64) + half) & ((half << 1) - 1)) - half


def _fits(v, w) -> bool:
    """Whether every value of ``v`` is already in the signed range of width w."""
    half = 1 << (w - 1)
    if np.ndim(v) == 0:
        return -half <= int(v) < half
    return v.size == 0 or (-half <= int(v.min()) and int(v.max()) < half)


def _unsigned(v, w):
    return np.asarray(v, dtype=np.int64) & ((np.int64(1) << np.int64(w)) - 1)


def _or_masks(*masks):
    out = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else (out | m)
    return out


def _euclid(a, b):
    """Z3's integer div and mod: b * q + m = a, 0 <= m < |b| (b = 0: q = 0, m = a)."""
    b = np.asarray(b, dtype=np.int64)
    zero = b == 0
    safe = np.where(zero, 1, b)
    m = np.mod(a, np.abs(safe))
    q = (a - m) // safe
    if zero.any():
        q = np.where(zero, 0, q)
        m = np.where(zero, a, m)
    return q, m


def _int_div(a, b):
    if np.ndim(b) == 0 and int(b) > 0:
        return np.floor_divide(a, b)
    return _euclid(a, b)[0]


def _int_mod(a, b):
    if np.ndim(b) == 0 and int(b) > 0:
        return np.mod(a, b)
    return _euclid(a, b)[1]


def _int_rem(a, b):
    # Z3: rem(a, b) = mod(a, b) for b > 0, -mod(a, b) for b < 0
    m = _int_mod(a, b)
    return np.where(np.asarray(b) < 0, -m, m)


def _trunc_div(a, b):
    """Division rounding toward zero, for b != 0 (b = 0 entries are ignored by the caller)."""
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe)
    return np.where((a < 0) != (safe < 0), -q, q)


# -- bit-vector operators: f(width, *operands) -> exact (unwrapped) or wrapped result -------------


def _bv_udiv(w, a, b):
    if np.ndim(b) == 0 and int(b) > 0:
        return _unsigned(a, w) // b
    ua, ub = _unsigned(a, w), _unsigned(b, w)
    return np.where(ub == 0, -1, ua // np.where(ub == 0, 1, ub))


def _bv_urem(w, a, b):
    ua, ub = _unsigned(a, w), _unsigned(b, w)
    return np.where(ub == 0, ua, ua % np.where(ub == 0, 1, ub))


def _bv_sdiv(w, a, b):
    return np.where(b == 0, np.where(a < 0, 1, -1), _trunc_div(a, b))


def _bv_srem(w, a, b):
    return np.where(b == 0, a, a - _trunc_div(a, b) * b)


def _bv_smod(w, a, b):
    if np.ndim(b) == 0 and int(b) > 0:  # the usual ``% n``: floor modulo
        return np.mod(a, b)
    safe = np.where(b == 0, 1, b)
    r = a - _trunc_div(a, safe) * safe
    m = np.where((r != 0) & ((r < 0) != (safe < 0)), r + safe, r)
    return np.where(b == 0, a, m)


def _bv_shl(w, a, b):
    ub = _unsigned(b, w)
    return np.where(ub >= w, 0, np.left_shift(np.asarray(a, dtype=np.int64), np.minimum(ub, w)))


def _bv_lshr(w, a, b):
    ub = _unsigned(b, w)
    return np.where(ub >= w, 0, np.right_shift(_unsigned(a, w), np.minimum(ub, w)))


def _bv_ashr(w, a, b):
    ub = _unsigned(b, w)
    return np.right_shift(np.asarray(a, dtype=np.int64), np.minimum(ub, w - 1))


def _nary(f):
    def apply(w, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = f(out, x)
        return out

    return apply


#: kind -> (function, overflow?): the function's result is wrapped to the width after; where
#: ``overflow`` is set, a result outside the signed range is an overflow (the others
#: compute bit patterns, whose reading as signed numbers is not one)
BV_OPS: dict[int, tuple[Callable, bool]] = {
    z3.Z3_OP_BADD: (_nary(np.add), True),
    z3.Z3_OP_BSUB: (_nary(np.subtract), True),
    z3.Z3_OP_BMUL: (_nary(np.multiply), True),
    z3.Z3_OP_BNEG: (lambda w, a: -np.asarray(a, dtype=np.int64), True),
    z3.Z3_OP_BSHL: (_bv_shl, True),
    z3.Z3_OP_BSDIV: (_bv_sdiv, True),
    z3.Z3_OP_BSDIV_I: (_bv_sdiv, True),
    z3.Z3_OP_BUDIV: (_bv_udiv, False),
    z3.Z3_OP_BUDIV_I: (_bv_udiv, False),
    z3.Z3_OP_BUREM: (_bv_urem, False),
    z3.Z3_OP_BUREM_I: (_bv_urem, False),
    z3.Z3_OP_BSREM: (_bv_srem, False),
    z3.Z3_OP_BSREM_I: (_bv_srem, False),
    z3.Z3_OP_BSMOD: (_bv_smod, False),
    z3.Z3_OP_BSMOD_I: (_bv_smod, False),
    z3.Z3_OP_BLSHR: (_bv_lshr, False),
    z3.Z3_OP_BASHR: (_bv_ashr, False),
    z3.Z3_OP_BAND: (_nary(np.bitwise_and), False),
    z3.Z3_OP_BOR: (_nary(np.bitwise_or), False),
    z3.Z3_OP_BXOR: (_nary(np.bitwise_xor), False),
    z3.Z3_OP_BNOT: (lambda w, a: ~np.asarray(a, dtype=np.int64), False),
    z3.Z3_OP_BNAND: (lambda w, *xs: ~_nary(np.bitwise_and)(w, *xs), False),
    z3.Z3_OP_BNOR: (lambda w, *xs: ~_nary(np.bitwise_or)(w, *xs), False),
    z3.Z3_OP_BXNOR: (lambda w, *xs: ~_nary(np.bitwise_xor)(w, *xs), False),
}

#: comparisons of bit-vectors: kind -> (signed?, numpy comparison)
BV_COMPARE = {
    z3.Z3_OP_SLT: (True, np.less), z3.Z3_OP_SLEQ: (True, np.less_equal), z3.Z3_OP_SGT: (True, np.greater), z3.Z3_OP_SGEQ: (True, np.greater_equal),
    z3.Z3_OP_ULT: (False, np.less), z3.Z3_OP_ULEQ: (False, np.less_equal), z3.Z3_OP_UGT: (False, np.greater), z3.Z3_OP_UGEQ: (False, np.greater_equal),
}

INT_OPS: dict[int, Callable] = {
    z3.Z3_OP_ADD: _nary(np.add),
    z3.Z3_OP_SUB: _nary(np.subtract),
    z3.Z3_OP_MUL: _int_mul,
    z3.Z3_OP_UMINUS: lambda w, a: np.negative(a),
    z3.Z3_OP_IDIV: lambda w, a, b: _int_div(a, b),
    z3.Z3_OP_MOD: lambda w, a, b: _int_mod(a, b),
    z3.Z3_OP_REM: lambda w, a, b: _int_rem(a, b),
    z3.Z3_OP_ABS: lambda w, a: np.abs(a),
    z3.Z3_OP_LT: lambda w, a, b: np.less(a, b),
    z3.Z3_OP_LE: lambda w, a, b: np.less_equal(a, b),
    z3.Z3_OP_GT: lambda w, a, b: np.greater(a, b),
    z3.Z3_OP_GE: lambda w, a, b: np.greater_equal(a, b),
}


def _xor_all(w, *xs):
    out = np.asarray(xs[0], dtype=bool)
    for x in xs[1:]:
        out = out ^ np.asarray(x, dtype=bool)
    return out


def _distinct(w, *xs):
    out = np.asarray(True)
    for i in range(len(xs)):
        for k in range(i + 1, len(xs)):
            out = out & (np.asarray(xs[i]) != np.asarray(xs[k]))
    return out


BOOL_OPS: dict[int, Callable] = {
    z3.Z3_OP_AND: _nary(np.logical_and),
    z3.Z3_OP_OR: _nary(np.logical_or),
    z3.Z3_OP_NOT: lambda w, a: np.logical_not(a),
    z3.Z3_OP_XOR: _xor_all,
    z3.Z3_OP_IMPLIES: lambda w, a, b: np.logical_or(np.logical_not(a), b),
    z3.Z3_OP_EQ: lambda w, a, b: np.equal(a, b),
    z3.Z3_OP_IFF: lambda w, a, b: np.equal(a, b),
    z3.Z3_OP_DISTINCT: _distinct,
    z3.Z3_OP_ITE: lambda w, c, a, b: np.where(c, a, b),
}


@dataclass(frozen=True)
class _Instruction:
    fn: Callable
    args: tuple[int, ...]
    width: int  # bit-vector width of the result or of the operands (0: not a bit-vector)
    wraps: bool  # the result is wrapped to ``width`` (and may overflow)
    kind: int


@dataclass
class Compiled:
    """Straight-line numpy code for some Z3 terms (see the module text)."""

    variables: tuple[str, ...]
    constants: dict[int, Any]
    code: list[tuple[int, _Instruction]]
    outputs: tuple[int, ...]
    bitvector: bool

    def evaluate(self, **values) -> tuple[list, list]:
        """``(values, overflow masks)`` of the outputs, given an array (or
        number) for every variable; a mask is None where nothing overflowed."""
        regs: dict[int, Any] = dict(self.constants)
        taint: dict[int, Any] = {}
        for name, slot in zip(self.variables, range(-len(self.variables), 0)):
            regs[slot] = values[name]
        for target, ins in self.code:
            operands = [regs[a] for a in ins.args]
            value = ins.fn(ins.width, *operands)
            if self.bitvector:
                masks = [taint.get(a) for a in ins.args]
                mask = self._propagate(ins, operands, masks)
                if ins.wraps and not _fits(value, ins.width):
                    wrapped = _signed(value, ins.width)
                    over = np.asarray(wrapped != value)
                    mask = over if mask is None else (mask | over)
                    value = wrapped
                if mask is not None and mask.any():
                    taint[target] = mask
            regs[target] = value
        return [regs[o] for o in self.outputs], [taint.get(o) for o in self.outputs]

    @staticmethod
    def _propagate(ins: _Instruction, operands, masks):
        if all(m is None for m in masks):
            return None
        if ins.kind == z3.Z3_OP_ITE:
            c, a, b = operands
            mc, ma, mb = masks
            chosen = np.where(c, ma if ma is not None else False, mb if mb is not None else False)
            return _or_masks(mc, np.asarray(chosen))
        if ins.kind in (z3.Z3_OP_AND, z3.Z3_OP_OR):
            decisive = False if ins.kind == z3.Z3_OP_AND else True
            settled = np.asarray(False)
            for x, m in zip(operands, masks):
                hit = np.asarray(x) == decisive
                settled = settled | (hit if m is None else (hit & ~m))
            return _or_masks(*masks) & ~settled
        return _or_masks(*masks)


#: compiled code by the terms' identity (see :func:`compile_terms`), least recently used first
_COMPILED: OrderedDict = OrderedDict()
COMPILED_KEPT = 256


def compile_terms(terms: list, variables: dict[str, Any]) -> Compiled:
    """Compile ``terms`` (Z3 expressions whose only free constants are
    ``variables``, name -> Z3 constant) into a :class:`Compiled`.

    The result is a function of the terms' DAG alone, and Z3 builds one AST
    per distinct term of a context (hash-consing): the same terms built
    again, by another program object with the same options, have the same
    ids. So the last :data:`COMPILED_KEPT` results are kept by (context,
    term ids, variable names and ids), with the terms themselves, which
    keeps them alive (an id is reused only once its AST is freed)."""
    key = tuple((id(t.ctx), t.get_id()) for t in terms), tuple((name, v.get_id()) for name, v in variables.items())
    kept = _COMPILED.get(key)
    if kept is not None:
        _COMPILED.move_to_end(key)
        return kept[1]
    compiled = _compile(terms, variables)
    _COMPILED[key] = ((list(terms), dict(variables)), compiled)
    while len(_COMPILED) > COMPILED_KEPT:
        _COMPILED.popitem(last=False)
    return compiled


def _compile(terms: list, variables: dict[str, Any]) -> Compiled:
    slots = {v.get_id(): -1 - i for i, v in enumerate(reversed(list(variables.values())))}
    names = tuple(variables)
    constants: dict[int, Any] = {}
    code: list[tuple[int, _Instruction]] = []
    done: dict[int, int] = dict(slots)
    bitvector = False
    counter = [0]

    def register() -> int:
        counter[0] += 1
        return counter[0]

    def visit(root) -> int:
        stack = [(root, False)]
        while stack:
            t, expanded = stack.pop()
            key = t.get_id()
            if key in done:
                continue
            if z3.is_true(t) or z3.is_false(t):
                done[key] = register()
                constants[done[key]] = np.asarray(z3.is_true(t))
                continue
            if z3.is_int_value(t):
                done[key] = register()
                constants[done[key]] = np.int64(t.as_long())
                continue
            if z3.is_bv_value(t):
                done[key] = register()
                constants[done[key]] = np.int64(t.as_signed_long())
                continue
            if z3.is_const(t):
                raise UnsupportedTerm(f"free constant {t} is not one of the variables {', '.join(names)}")
            children = t.children()
            if not expanded:
                stack.append((t, True))
                stack.extend((c, False) for c in children if c.get_id() not in done)
                continue
            code.append((register(), _instruction(t, children)))
            done[key] = code[-1][0]
            code[-1] = (done[key], code[-1][1]._replace_args(tuple(done[c.get_id()] for c in children)))
        return done[root.get_id()]

    outputs = tuple(visit(t) for t in terms)
    for t in terms:
        bitvector = bitvector or _has_bitvectors(t)
    return Compiled(names, constants, code, outputs, bitvector)


def _has_bitvectors(term) -> bool:
    seen, stack = set(), [term]
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_bv(t):
            return True
        stack.extend(t.children())
    return False


def _instruction(t, children) -> "_Pending":
    kind = t.decl().kind()
    bv = bool(children) and z3.is_bv(children[0])
    if kind in BV_OPS:
        fn, overflow = BV_OPS[kind]
        return _Pending(fn, t.size(), True, kind, exact=overflow)
    if kind in BV_COMPARE:
        signed, compare = BV_COMPARE[kind]
        w = children[0].size()
        return _Pending((lambda w, a, b: compare(a, b)) if signed else (lambda w, a, b: compare(_unsigned(a, w), _unsigned(b, w))), w, False, kind)
    if kind == z3.Z3_OP_EXTRACT:
        hi, lo = t.params()
        inner = children[0].size()
        return _Pending(lambda w, a: np.right_shift(_unsigned(a, inner), lo), hi - lo + 1, True, kind, exact=False)
    if kind == z3.Z3_OP_CONCAT:
        sizes = [c.size() for c in children]

        def concat(w, *xs):
            out = np.int64(0)
            for x, size in zip(xs, sizes):
                out = np.left_shift(out, size) | _unsigned(x, size)
            return out

        return _Pending(concat, t.size(), True, kind, exact=False)
    if kind == z3.Z3_OP_ZERO_EXT:
        inner = children[0].size()
        return _Pending(lambda w, a: _unsigned(a, inner), t.size(), True, kind, exact=False)
    if kind == z3.Z3_OP_SIGN_EXT:
        return _Pending(lambda w, a: np.asarray(a, dtype=np.int64), t.size(), False, kind)
    if kind in INT_OPS and not bv:
        return _Pending(INT_OPS[kind], 0, False, kind)
    if kind in BOOL_OPS:
        return _Pending(BOOL_OPS[kind], children[0].size() if bv else 0, False, kind)
    raise UnsupportedTerm(f"the term evaluator has no numpy form of Z3's {t.decl().name()} (in {str(t)[:200]})")


@dataclass(frozen=True)
class _Pending:
    fn: Callable
    width: int
    wraps: bool
    kind: int
    exact: bool = True  # False: wrapping only reinterprets bits (never an overflow)

    def _replace_args(self, args: tuple[int, ...]) -> _Instruction:
        if self.wraps and not self.exact:
            fn, width = self.fn, self.width
            return _Instruction(lambda w, *xs: _signed(fn(w, *xs), width), args, width, False, self.kind)
        return _Instruction(self.fn, args, self.width, self.wraps, self.kind)


__all__ = ["Compiled", "TooLarge", "UnsupportedTerm", "compile_terms"]
