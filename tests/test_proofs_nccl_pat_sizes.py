"""nccl-pat at every count and chunk (proofs/nccl_pat_sizes.py): planted
bugs fail the named lemma with a counterexample, each test deciding only
that query; the generator's size helpers take Z3 terms and agree with
their numbers; the count-1 rows the scope names are the full suite's."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import z3

from collspec.models import indexing as ix
from collspec.models.generators import nccl_pat
from collspec.proofs import nccl_pat_sizes as sizes
from collspec.proofs.solver import COUNTEREXAMPLE, FAILED, Row, decide, within
from collspec.proofs.suite import rlimit_of, suite

from pat_mutations import _loop_and_slot, last_loop_shifted, on_python_ints_only, second_element_into_first

RS, AG = "nccl-pat.reduce_scatter-sizes-exactly-once", "nccl-pat.allgather-sizes-exactly-once"


def _decide(name: str, query):
    with within(Row(name, sizes.scope(name), rlimit_of(name, False))):
        return decide(query)


def _lane(name: str, k: int, bug):
    collective = sizes.ROWS[name]
    made = sizes.case_queries(name, k, lambda c, chunk, count: bug(nccl_pat.pat_program(collective, chunk=chunk, count=count), chunk, count))
    (query,) = [q for q in made if q.name.startswith("lane:")]
    return query


def _in_scope(example: dict) -> bool:
    n, chunk, count = example["N"], example["chunk"], example["count"]
    return 2 <= n <= 65536 and count >= 1 and 1 <= chunk <= nccl_pat.MAX_CELLS and n * count <= nccl_pat.MAX_CELLS and chunk // count < 8


def test_the_last_loop_one_element_off_fails_the_lane_query_with_several_loops():
    outcome = _decide(RS, _lane(RS, 1, last_loop_shifted))
    example = outcome.counterexample
    assert (outcome.status, outcome.reason) == (FAILED, COUNTEREXAMPLE) and outcome.message.startswith("lane:")
    assert _in_scope(example) and nccl_pat.loop_count(example["chunk"], example["count"]) >= 2, example


def test_a_second_element_sent_into_the_first_fails_the_lane_query_within_one_loop():
    # case 2 (2 <= chunk // count < 4): chunk > count, so there is one loop and a count of 2 or more is where it shows
    outcome = _decide(AG, _lane(AG, 2, second_element_into_first))
    example = outcome.counterexample
    assert (outcome.status, outcome.reason) == (FAILED, COUNTEREXAMPLE) and outcome.message.startswith("lane:")
    assert _in_scope(example) and nccl_pat.loop_count(example["chunk"], example["count"]) == 1 and example["count"] >= 2, example


def test_a_loop_count_rounded_down_fails_the_elements_query(monkeypatch):
    monkeypatch.setattr(nccl_pat, "loop_count", lambda chunk, count: count / chunk)  # integer division on Z3 integers: rounded down
    (query,) = [q for q in sizes.arithmetic_queries(RS) if q.name.startswith("elements: element o < count")]
    outcome = _decide(RS, query)
    example = outcome.counterexample
    assert (outcome.status, outcome.reason) == (FAILED, COUNTEREXAMPLE), outcome.message
    assert example["count"] % example["chunk"] != 0 and example["o"] // example["chunk"] == example["count"] // example["chunk"], example


def test_size_helpers_on_z3_terms_are_their_numbers():
    """chunk_fits, loop_count and chunk_width evaluated on 20-bit terms (what
    the rows prove) give, at every chunk and count here, the numbers the
    schedules are built with, and these are the formulas NCCL's sizes mean."""
    chunk, count = z3.BitVecs("chunk count", 20)
    terms = {f: f(chunk, count) for f in (nccl_pat.chunk_fits, nccl_pat.loop_count, nccl_pat.chunk_width)}
    meant = {
        nccl_pat.chunk_fits: lambda c, k: min(1 << (max(1, c // max(k, 1)).bit_length() - 1), 1 << 16),
        nccl_pat.loop_count: lambda c, k: -(-k // c),
        nccl_pat.chunk_width: lambda c, k: max(1, min(c, k)),
    }
    for c, k in itertools.chain(itertools.product(range(1, 13), range(0, 13)), [(1 << 18, 1), (1 << 17, 1), (5, 1 << 17)]):
        for f, term in terms.items():
            number = f(c, k)
            assert type(number) is int and number == meant[f](c, k), (f.__name__, c, k)
            value = z3.simplify(z3.substitute(term, (chunk, z3.BitVecVal(c, 20)), (count, z3.BitVecVal(k, 20))))
            assert value.as_signed_long() == number, (f.__name__, c, k)


@pytest.mark.parametrize("name", [RS, AG])
def test_the_scope_names_the_count_1_rows_of_the_full_suite(name):
    """Each case's program O_k is the user's call of the count-1 rows the
    scope names: chunk k, count 1, NCCL's own aggregation and postFreq
    (the aggregation-8 row fixes them, and its `same` ties the call to it),
    and the rows of a case cover N 2..65536."""
    from collspec.proofs import nccl_pat as pat_proofs

    from collspec.proofs.scope import Proved

    rows = {p.name: p for p in suite(full=True)}
    (proved,) = [p for p in sizes.scope(name).premises if isinstance(p, Proved)]
    assert set(proved.rows) == {row for names in sizes.COUNT_1_ROWS[sizes.ROWS[name]].values() for row in names}
    for k, names in sizes.COUNT_1_ROWS[sizes.ROWS[name]].items():
        covered = set()
        for row in names:
            assert row in rows and row in proved.words
            collective, options, (low, high) = pat_proofs._entry(row)
            assert (collective, options["chunk"], options["count"]) == (sizes.ROWS[name], k, 1)
            covered |= set(range(low, high + 1))
        assert covered == set(range(2, 65537)), k


@pytest.mark.parametrize("collective, n, chunk, count", [("reduce_scatter", 5, 2, 5), ("allgather", 10, 3, 7), ("reduce_scatter", 12, 9, 4), ("allgather", 3, 5, 2)])
def test_built_schedules_are_the_lanes_of_the_count_1_schedule(collective, n, chunk, count):
    """On numbers, what the rows argue: step L per + t of the built schedule
    is step t of the count-1 schedule O_k, once per element L cw + x < count
    of the loop, each cell b renamed b count + L cw + x (k = 1 for chunk //
    count < 2, else 2); and the checker accepts it."""
    from collspec.models.checker import check

    k = 1 if chunk // count < 2 else 2
    made = nccl_pat.generate_pat(collective, n, chunk=chunk, count=count)
    one = nccl_pat.generate_pat(collective, n, chunk=k, count=1)
    per, cw, loops = len(one.steps), nccl_pat.chunk_width(chunk, count), nccl_pat.loop_count(chunk, count)
    assert len(made.steps) == loops * per and (loops >= 2) == (chunk < count)
    for s, step in enumerate(made.steps):
        loop, t = divmod(s, per)
        base = one.steps[t]
        lanes = [loop * cw + x for x in range(cw) if loop * cw + x < count]
        expected = sorted((int(a), int(b), int(c) * count + o, int(d) * count + o, int(p))
                          for o in lanes for a, b, c, d, p in zip(base.src, base.dst, base.src_chunk, base.dst_chunk, base.op))
        assert sorted(zip(*(map(int, f) for f in (step.src, step.dst, step.src_chunk, step.dst_chunk, step.op)))) == expected, s
    assert check(made).ok


def _shifted_where(when):
    """A generator bug: cells one further where ``when(loop, loops, x, chunk, count, n)`` holds."""

    def bug(made, chunk, count):
        def transfer(n, s, r, j):
            t = made.transfer(n, s, r, j)
            c, k = (ix.constant(v, n) for v in (chunk, count))
            loop, loops, x = _loop_and_slot(made, n, s, j, c, k)
            off = ix.where(when(loop, loops, x, c, k, n), 1, 0)
            return dataclasses.replace(t, src_chunk=t.src_chunk + off, dst_chunk=t.dst_chunk + off)

        return dataclasses.replace(made, transfer=transfer)

    return bug


def _generator_bug(monkeypatch, bug):
    """Plant ``bug`` in the generator itself, so that the call and the
    count-1 program O_k the rows compare it with are both built with it."""
    original = nccl_pat.pat_program

    def pat_program(collective, aggregation=None, chunk=None, count=None, post=None, dtype=None):
        return bug(original(collective, aggregation, chunk, count, post, dtype), chunk, count)

    monkeypatch.setattr(nccl_pat, "pat_program", pat_program)


#: (bug, case k, query that must fail, what the counterexample must show)
PLANTED = {
    "count-not-a-multiple-of-chunk": (_shifted_where(lambda L, Ls, x, c, k, n: k % c != 0), 1, "lane:", lambda ex: ex["count"] % ex["chunk"] != 0),
    "several-loops-chunk-below-count": (_shifted_where(lambda L, Ls, x, c, k, n: ix.both(L >= 1, ix.floordiv(c, k) == 0)), 1, "lane:",
                                        lambda ex: ex["chunk"] < ex["count"]),
    "quotient-3-only": (_shifted_where(lambda L, Ls, x, c, k, n: ix.floordiv(c, k) == 3), 2, "lane:", lambda ex: ex["chunk"] // ex["count"] == 3),
    "quotient-4-to-7-element-1-up": (_shifted_where(lambda L, Ls, x, c, k, n: ix.both(ix.floordiv(c, k) >= 4, x >= 1)), 4, "lane:",
                                     lambda ex: 4 <= ex["chunk"] // ex["count"] < 8 and ex["count"] >= 2),
    "above-40000-ranks-count-2-up": (_shifted_where(lambda L, Ls, x, c, k, n: ix.both(n > 40000, k >= 2)), 1, "lane:", lambda ex: ex["N"] > 40000),
    "cells-renamed-by-chunk-width": (lambda made, chunk, count: dataclasses.replace(made, transfer=lambda n, s, r, j: (lambda t, f: dataclasses.replace(
        t, src_chunk=f(t.src_chunk), dst_chunk=f(t.dst_chunk)))(made.transfer(n, s, r, j), lambda c: ix.floordiv(c, count) * nccl_pat.chunk_width(chunk, count) + c % count)),
        1, "lane:", lambda ex: ex["chunk"] < ex["count"]),
    "steps-one-short-with-several-loops": (lambda made, chunk, count: dataclasses.replace(
        made, steps=lambda n: made.steps(n) - ix.where(nccl_pat.loop_count(chunk, count) >= 2, 1, 0)), 1, "shape:",
        lambda ex: nccl_pat.loop_count(ex["chunk"], ex["count"]) >= 2),
    "width-one-short-with-several-elements": (lambda made, chunk, count: dataclasses.replace(
        made, width=lambda n: made.width(n) - ix.where(nccl_pat.chunk_width(chunk, count) >= 2, 1, 0)), 1, "shape:",
        lambda ex: nccl_pat.chunk_width(ex["chunk"], ex["count"]) >= 2),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_generator_bug_fails_its_query(monkeypatch, bug):
    """Bugs planted in the generator (the call and O_k both built with them)
    where the call differs from O_k's lanes: each fails the named query of
    its case, at a counterexample in the scope where the bug is."""
    made, k, query_name, shows = PLANTED[bug]
    _generator_bug(monkeypatch, made)
    (query,) = [q for q in sizes.case_queries(RS, k) if q.name.startswith(query_name)]
    outcome = _decide(RS, query)
    example = outcome.counterexample
    assert (outcome.status, outcome.reason) == (FAILED, COUNTEREXAMPLE), outcome.message
    assert _in_scope(example) and shows(example), example


def test_a_row_whose_premise_row_is_not_proved_fails():
    """A sizes row rests on the count-1 rows its scope names: where one of
    them runs and is not proved, the sizes row is reported failed, naming
    it (``collspec prove --full``); where none ran, the row stands as its
    scope says."""
    from collspec.proofs.scope import Proved
    from collspec.proofs.solver import PROVED
    from collspec.proofs.suite import PREMISE_UNPROVED, ProofResult, premises_held

    scope = sizes.scope(RS)
    (premise,) = [p for p in scope.premises if isinstance(p, Proved)]
    row = ProofResult(RS, scope.text(), PROVED, 1.0, premises=scope.to_json())
    other = ProofResult(AG, sizes.scope(AG).text(), PROVED, 1.0, premises=sizes.scope(AG).to_json())
    broken = ProofResult(premise.rows[-1], "", FAILED, 1.0, "lane: fails", reason=COUNTEREXAMPLE)
    held = premises_held([row, other, broken])
    assert [(r.name, r.status) for r in held] == [(RS, FAILED), (AG, PROVED), (premise.rows[-1], FAILED)]
    assert held[0].reason == PREMISE_UNPROVED and premise.rows[-1] in held[0].message and "fix the premise rows" in held[0].advice
    assert premises_held([row, other])[0].status == PROVED


def test_a_bug_only_on_the_generators_integer_path_does_not_reach_the_schedule(monkeypatch):
    """A generator that branches on the options' type (numbers vs Z3 terms,
    as ``_plain`` and ``_size`` do) and is wrong only on numbers: the
    schedule of a call with chunk and count is the enumeration of the term
    built with chunk and count Z3 terms, which the rows prove, so it is
    right (the same program on numbers is not)."""
    from collspec.models.checker import check

    _generator_bug(monkeypatch, on_python_ints_only)
    assert not check(nccl_pat.pat_program("reduce_scatter", chunk=2, count=3).schedule(4)).ok  # the bug, on numbers
    assert check(nccl_pat.generate_pat("reduce_scatter", 4, chunk=2, count=3)).ok


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_the_schedule_enumerates_the_rows_call(collective):
    """The terms a call's schedule is compiled from (chunk 3, count 5) are
    the rows' call's, term for term (the same Z3 ASTs)."""
    made = nccl_pat.sized_program(collective, 3, 5)
    terms = made.terms()
    v = terms.variables
    call = sizes.call_program(collective, v["chunk"], v["count"])
    assert made.params == {"chunk": 3, "count": 5}
    assert all(a.eq(b) for a, b in zip(terms.transfer, sizes._fields(call, v["N"], v["s"], v["r"], v["j"]))) and len(terms.transfer) == 5
    assert all(a.eq(b) for a, b in zip(terms.shape, [sizes.as_term(f(v["N"]), v["N"]) for f in (call.steps, call.width, call.chunks)]))


def test_prove_reports_a_row_failed_where_its_premise_row_fails(monkeypatch, capsys):
    """``collspec prove`` (as ``--full`` runs a premise row and the row
    resting on it): the premise row fails, so the row is not proved and the
    exit code says so."""
    from collspec.cli import main
    from collspec.proofs import suite as proofs
    from collspec.proofs.scope import Proved, Scope
    from collspec.proofs.solver import PROVED, Outcome

    rows = [proofs.Proof("x.premise", Scope.all_n(), "s", lambda: Outcome(FAILED, "x.premise: fails for N=3", {"N": 3}, reason=COUNTEREXAMPLE)),
            proofs.Proof("x.resting", Scope.all_n(Proved(("x.premise",), "the row x.premise")), "s", lambda: Outcome(PROVED, "1 queries"))]
    monkeypatch.setattr(proofs, "suite", lambda full=False: rows)
    assert main(["prove", "--only", "x."]) != 0
    out = capsys.readouterr().out
    assert "x.resting: FAILED (a premise row is not proved): premise rows not proved in this run: x.premise (FAILED (counterexample))" in out
    assert "2 proofs, 0 proved, 2 not proved" in out


def test_the_rows_run_only_with_and_after_their_premise_rows():
    """The sizes rows are in ``--full`` only, each after every count-1 row
    its scope names (those run only there)."""
    full = [p.name for p in suite(full=True)]
    assert not set(sizes.ROWS) & {p.name for p in suite()}
    for name, collective in sizes.ROWS.items():
        assert all(full.index(row) < full.index(name) for rows in sizes.COUNT_1_ROWS[collective].values() for row in rows)
