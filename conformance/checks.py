"""Judging one case: every rank's buffers after the call, against the spec.

:func:`judge` takes each rank's final images (see :mod:`.buffers`) and
returns :class:`~collspec.spec.Violation` values, each naming the case
(collective, dtype, op, count, inplace, root, seed), the rank(s) and the
element. In order:

1. Outside its output, nothing a rank owns may change: the guards around
   every buffer keep the sentinel, an out-of-place input keeps its values,
   and so does the rest of an in-place reduce-scatter's input
   (``postcondition``, with the ``region``).
2. The output, against the spec's expectation
   (:mod:`.collectives`): an element still holding the sentinel was never
   written (``postcondition``); a block that is another rank's block is a
   misplaced slice (``postcondition``); a wrong sum of tally inputs decodes
   into the ranks missing or counted twice (``missing-contribution``,
   ``duplicate-contribution``); a wrong non-commutative result (``compose``)
   that is the composition of the ranks' operands in another order is an
   ``operand-order`` naming that order and the pairs of ranks out of order;
   anything else is a ``wrong-value`` with the
   worst element, the expected value, what came back and the error bound.
3. Collectives whose every rank must hold the same result (all-reduce) must
   hold the same bits (``ranks-disagree``, with the first differing element).
   Ranks with identical bits are judged once, as a group.
"""

from __future__ import annotations

import math

import numpy as np

import itertools

from ..spec import NONCOMMUTATIVE, Violation, check_reduction
from ..spec.ops import combiner
from .buffers import all_inputs, initial_images, inside, layout_of
from .cases import Case
from .collectives import COLLECTIVES, Exact, Reduced, Untouched
from .data import guard, sentinel, tally_multiplicity


def judge(case: Case, world: int, finals: list[dict[str, np.ndarray]]) -> list[Violation]:
    """Every violation of one case, given each rank's images after the call."""
    inputs = all_inputs(case, world)
    collective = COLLECTIVES[case.collective]
    expectations = collective.expect(case, world, inputs)
    found: list[Violation] = []
    for rank in range(world):
        found += _outside_output(case, world, rank, finals[rank], inputs[rank])
    outputs = [_output(case, world, rank, finals[rank]) for rank in range(world)]
    groups = [[r] for r in range(world)]
    if collective.same_on_every_rank:
        groups = _groups(outputs)
        if len(groups) > 1:
            found.append(_disagree(case, groups, outputs))
    for ranks in groups:
        found += _judge_output(case, world, ranks, outputs[ranks[0]], expectations[ranks[0]], inputs)
    return found


def judge_bits(case: Case, world: int, finals: list[dict[str, np.ndarray]], algorithm: str) -> list[Violation]:
    """``--expect bits:ALGO``: every rank's output against the bit-exact model
    of ``algorithm`` (:func:`collspec.models.bits.predict`), element by
    element. Cases the model does not cover (another collective, avg,
    unequal blocks, more elements than it predicts) are not compared."""
    from ..models import bits

    equal_blocks = not COLLECTIVES[case.collective].blocked or case.count % world == 0
    if not (bits.supports(algorithm, case.collective, case.op) and equal_blocks) or case.count > bits.MAX_ELEMENTS * world:
        return []
    predicted = bits.predict(algorithm, case.collective, all_inputs(case, world), case.op or "sum", case.root or 0)
    found = []
    for rank in range(world):
        want = predicted[rank]
        if not len(want):
            continue  # no output on this rank (reduce: a rank other than the root)
        got = _output(case, world, rank, finals[rank])
        differ = np.flatnonzero(_bits(got) != _bits(want.astype(got.dtype)))
        if differ.size:
            e = int(differ[0])
            found.append(Violation(
                "wrong-value",
                f"{case.id}: rank {rank} differs from the {algorithm} model's bits in {differ.size} element(s); "
                f"element {e}: got {_num(got[e])}, the model gives {_num(want[e])}",
                details=_details(case, [rank], expect=f"bits:{algorithm}", element=e, got=got[e], expected=want[e], differing=int(differ.size)),
            ))
    return found


# -- helpers -------------------------------------------------------------------


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def _num(value):
    """A JSON-friendly number (non-finite floats as text)."""
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _details(case: Case, ranks: list[int], **extra) -> dict:
    out = {
        "case": case.id,
        "collective": case.collective,
        "dtype": case.dtype,
        "op": case.op,
        "size": case.count,
        "inplace": case.inplace,
        "root": case.root,
        "seed": case.seed,
        "ranks": list(ranks),
    }
    out.update({k: _num(v) for k, v in extra.items()})
    return out


def _who(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def _output(case: Case, world: int, rank: int, final: dict[str, np.ndarray]) -> np.ndarray:
    view = layout_of(case, world, rank).output
    return final[view.storage][inside(view, case.dtype)]


def _groups(outputs: list[np.ndarray]) -> list[list[int]]:
    by_bits: dict[bytes, list[int]] = {}
    for rank, out in enumerate(outputs):
        by_bits.setdefault(_bits(out).tobytes(), []).append(rank)
    return sorted(by_bits.values())


# -- 1. outside the output -----------------------------------------------------


def _outside_output(case: Case, world: int, rank: int, final: dict[str, np.ndarray], given: np.ndarray) -> list[Violation]:
    layout = layout_of(case, world, rank)
    found = []
    for name, before in initial_images(case, world, rank, given).items():
        after = final[name]
        changed = _bits(after) != _bits(before)
        if name == layout.output.storage:
            changed[inside(layout.output, case.dtype)] = False
        length, g = layout.storages[name], guard(case.dtype)
        regions = {"guard-before": (0, g), "input": (g, g + length), "guard-after": (g + length, 2 * g + length)}
        for region, (a, b) in regions.items():
            hit = np.flatnonzero(changed[a:b])
            if hit.size == 0:
                continue
            i = a + int(hit[0])
            if region == "input":  # every layout's other storages are wholly output
                what = f"changed its input at element {i - g}, which the collective must not modify"
            elif region == "guard-before":
                what = f"wrote {hit.size} element(s) before the start of its {name} buffer"
            else:
                what = f"wrote past the end of its {name} buffer ({hit.size} element(s), first at end + {i - a})"
            found.append(
                Violation(
                    "postcondition",
                    f"{case.id}: rank {rank} {what} (was {_num(before[i])}, now {_num(after[i])})",
                    details=_details(case, [rank], region=region, buffer=name, element=i - g,
                                     expected=before[i], got=after[i], elements=hit.size),
                )
            )
    return found


# -- 2. the output -------------------------------------------------------------


def _judge_output(case, world, ranks, got, expectation, inputs) -> list[Violation]:
    if isinstance(expectation, Untouched):
        before = inputs[ranks[0]]
        changed = np.flatnonzero(_bits(got) != _bits(before))
        if changed.size == 0:
            return []
        i = int(changed[0])
        return [
            Violation(
                "postcondition",
                f"{case.id}: {_who(ranks)}: {changed.size} element(s) of {expectation.why} changed, which must be "
                f"left untouched (element {i}: was {_num(before[i])}, now {_num(got[i])})",
                details=_details(case, ranks, region="non-root", element=i, expected=before[i], got=got[i], elements=changed.size),
            )
        ]
    unwritten = np.flatnonzero(_bits(got) == _bits(sentinel(case.dtype)))
    if unwritten.size:
        i = int(unwritten[0])
        return [
            Violation(
                "postcondition",
                f"{case.id}: {_who(ranks)}: {unwritten.size} of {got.size} output element(s) never written "
                f"(element {i} still holds the sentinel)",
                details=_details(case, ranks, region="output", element=i, elements=unwritten.size),
            )
        ]
    if isinstance(expectation, Exact):
        return _judge_exact(case, ranks, got, expectation)
    return _judge_reduced(case, world, ranks, got, expectation, inputs)


def _judge_exact(case: Case, ranks: list[int], got: np.ndarray, expectation: Exact) -> list[Violation]:
    want = expectation.values
    wrong = _bits(got) != _bits(want)
    if not wrong.any():
        return []
    found, unexplained = [], []
    for k, (a, b) in enumerate(expectation.blocks):
        if not wrong[a:b].any():
            continue
        source = next(
            (j for j, (c, d) in enumerate(expectation.blocks)
             if j != k and d - c == b - a and np.array_equal(_bits(got[a:b]), _bits(want[c:d]))),
            None,
        )
        if source is None:
            unexplained.append(a + int(np.flatnonzero(wrong[a:b])[0]))
            continue
        found.append(
            Violation(
                "postcondition",
                f"{case.id}: {_who(ranks)}: block {k} of the output (elements {a}..{b - 1}) holds "
                f"block {source}'s data: a misplaced slice",
                details=_details(case, ranks, region="output", block=k, holds_block=source, element=a),
            )
        )
    if unexplained:
        i = unexplained[0]
        found.append(
            Violation(
                "wrong-value",
                f"{case.id}: {_who(ranks)}: element {i}: expected {_num(want[i])}, got {_num(got[i])} "
                f"({int(wrong.sum())} element(s) wrong)",
                details=_details(case, ranks, element=i, expected=want[i], got=got[i], bound=0.0, elements=int(wrong.sum())),
            )
        )
    return found


def _judge_reduced(case, world, ranks, got, expectation: Reduced, inputs) -> list[Violation]:
    if np.array_equal(_bits(got), _bits(expectation.canonical)):
        return []
    a, b = expectation.rows
    rows = [x[a:b] for x in inputs]
    accuracy = check_reduction(got, rows, case.op)
    if accuracy.ok:
        return []
    for j, (c, d) in expectation.others:
        if check_reduction(got, [x[c:d] for x in inputs], case.op).ok:
            return [
                Violation(
                    "postcondition",
                    f"{case.id}: {_who(ranks)}: the output holds rank {j}'s block (rows {c}..{d - 1}) "
                    f"instead of its own (rows {a}..{b - 1}): a misplaced slice",
                    details=_details(case, ranks, region="output", holds_block=j, element=0),
                )
            ]
    if case.pattern == "tally" and case.op == "sum":
        decoded = _decode(case, world, ranks, got, expectation.canonical, a)
        if decoded:
            return decoded
    if case.op in NONCOMMUTATIVE:
        reordered = _reordered(case, ranks, got, expectation.canonical, rows)
        if reordered:
            return reordered
    i = accuracy.index[0] if accuracy.index else 0
    return [
        Violation(
            "wrong-value",
            f"{case.id}: {_who(ranks)}: element {i}: expected {_num(accuracy.expected)}, got {_num(accuracy.got)}, "
            f"error {_num(accuracy.error)} exceeds the bound {_num(accuracy.bound)}",
            details=_details(case, ranks, element=i, expected=accuracy.expected, got=accuracy.got,
                             error=accuracy.error, bound=accuracy.bound),
        )
    ]


#: Up to this many ranks every order of the operands is tried (7! = 5040).
MAX_ORDER_RANKS = 7


def _reordered(case, ranks, got, exact, rows) -> list[Violation]:
    """An ``operand-order`` violation if every wrong element is the ranks'
    operands combined in some other order, else [] (then it is a wrong value)."""
    world = len(rows)
    wrong = np.flatnonzero(_bits(got) != _bits(exact))
    if wrong.size == 0 or not 2 <= world <= MAX_ORDER_RANKS:
        return []
    combine = combiner(case.op, got.dtype)
    operands = [row[wrong] for row in rows]
    unexplained = np.ones(wrong.size, dtype=bool)
    orders: dict[tuple[int, ...], int] = {}
    for order in itertools.permutations(range(world)):
        if order == tuple(range(world)):
            continue
        value = operands[order[0]]
        for r in order[1:]:
            value = combine(value, operands[r])
        hit = unexplained & (_bits(value) == _bits(got[wrong]))
        if hit.any():
            orders[order] = int(hit.sum())
            unexplained &= ~hit
        if not unexplained.any():
            break
    if unexplained.any():
        return []
    i = int(wrong[0])
    first = next(iter(orders))
    inversions = sorted({(min(x, y), max(x, y)) for order in orders
                         for k, x in enumerate(order) for y in order[k + 1:] if x > y})
    pairs = ", ".join(f"{x}<->{y}" for x, y in inversions)
    return [
        Violation(
            "operand-order",
            f"{case.id}: {_who(ranks)}: a non-commutative {case.op} combined the ranks' operands out of rank order at "
            f"{wrong.size} of {got.size} element(s): element {i} is rank order {', '.join(map(str, first))} instead of "
            f"{', '.join(map(str, range(world)))} ({len(orders)} distinct order(s); ranks out of order: {pairs})",
            details=_details(case, ranks, element=i, expected=exact[i], got=got[i], elements=int(wrong.size),
                             order=list(first), orders=[list(o) for o in orders], inversions=[list(p) for p in inversions]),
        )
    ]


def _decode(case, world, ranks, got, exact, first) -> list[Violation]:
    """Missing and duplicated contributors of a wrong tally sum, or [] if it does not decode.

    Tally sums are exact, so ``exact`` is the spec's own result.
    """
    wrong = np.flatnonzero(_bits(got) != _bits(exact))
    times = tally_multiplicity(got, first, case.dtype, world, case.data_seed, case.count)[wrong]
    if wrong.size == 0 or (times == -2).any():
        return []
    found = []
    for kind, mask, what in (
        ("missing-contribution", times == 0, "is missing the contribution of"),
        ("duplicate-contribution", times >= 2, "counts twice the contribution of"),
    ):
        elements = np.flatnonzero(mask.any(axis=1))
        if elements.size == 0:
            continue
        culprits = sorted({int(r) for r in np.flatnonzero(mask.any(axis=0))})
        e = int(elements[0])
        i = int(wrong[e])
        found.append(
            Violation(
                kind,
                f"{case.id}: {_who(ranks)}: the result {what} rank(s) {', '.join(map(str, culprits))} at "
                f"{elements.size} of {got.size} element(s) (first: element {i}, "
                f"rank(s) {', '.join(str(r) for r in np.flatnonzero(mask[e]))}; expected {_num(exact[i])}, got {_num(got[i])})",
                details=_details(case, ranks, element=i, expected=exact[i], got=got[i], bound=0.0,
                                 elements=int(elements.size), contributors=culprits),
            )
        )
    return found


# -- 3. every rank the same bits ----------------------------------------------


def _disagree(case: Case, groups: list[list[int]], outputs: list[np.ndarray]) -> Violation:
    first, second = outputs[groups[0][0]], outputs[groups[1][0]]
    i = int(np.flatnonzero(_bits(first) != _bits(second))[0]) if first.size == second.size else 0
    sets = " | ".join(", ".join(map(str, g)) for g in groups)
    return Violation(
        "ranks-disagree",
        f"{case.id}: ranks hold {len(groups)} different results (ranks {sets}); first difference at element {i}: "
        f"rank {groups[0][0]} has {_num(first[i])}, rank {groups[1][0]} has {_num(second[i])}",
        details=_details(case, sorted(r for g in groups for r in g), element=i, groups=groups,
                         values=[_num(outputs[g[0]][i]) for g in groups]),
    )
