"""compose, the operand-order check, bit-reproducibility, ignored algorithms and
the MPI libraries' algorithm tables, without starting ranks.

Each checker is fed broken input and the exact violation is asserted.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from collspec import spec
from collspec.conformance import conform as conform_module
from collspec.conformance import mpi_libs
from collspec.conformance.buffers import layout_of
from collspec.conformance.cases import Case, quick, repeated
from collspec.conformance.checks import judge
from collspec.conformance.resolve import parse
from collspec.conformance.runner import Outcome
from collspec.spec.errors import CollspecError, SpecError
from test_conformance_checks import WORLD, correct, output

# -- the spec's compose ---------------------------------------------------------


def maps(dtype: str, count: int, seed: int) -> np.ndarray:
    from collspec.conformance.data import maps_row

    return maps_row(dtype, 4, seed, count, 7)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_compose_is_associative_and_not_commutative(dtype):
    f, g, h = maps(dtype, 64, 0), maps(dtype, 64, 1), maps(dtype, 64, 2)
    combine = spec.ops.combiner("compose", dtype)
    assert np.array_equal(combine(combine(f, g), h), combine(f, combine(g, h)))
    assert not np.array_equal(combine(f, g), combine(g, f))


def test_compose_is_the_rank_order_composition_of_affine_maps():
    rows = [np.array([spec.affine_map(a, b, "int64")]) for a, b in [(3, 1), (5, 4), (7, 2)]]
    a, b = spec.split_map(spec.all_reduce(rows, "compose")[0][0], "int64")
    x = 11  # rank 0's map first, rank 2's last
    assert a * x + b == 7 * (5 * (3 * x + 1) + 4) + 2


def test_compose_wraps_each_half_modulo_two_to_the_half_width():
    f = np.array([spec.affine_map(2**31 + 1, 2**32 - 1, "int64")])
    g = np.array([spec.affine_map(3, 5, "int64")])
    assert spec.split_map(spec.all_reduce([f, g], "compose")[0][0], "int64") == ((3 * (2**31 + 1)) % 2**32, (3 * (2**32 - 1) + 5) % 2**32)


def test_compose_is_refused_on_floats():
    with pytest.raises(SpecError, match="integer types only"):
        spec.all_reduce([np.zeros(2, np.float32)] * 2, "compose")


def test_the_quick_sweep_runs_compose_on_integer_types_only():
    chosen = quick(4, collectives=["allreduce"], ops=["sum", "compose"])
    assert {c.dtype for c in chosen if c.op == "compose"} == {"int8", "uint8", "int32", "int64"}
    assert {c.pattern for c in chosen if c.op == "compose"} == {"maps"}


# -- the operand-order check ----------------------------------------------------


def composed(case: Case, order: tuple[int, ...]) -> np.ndarray:
    from collspec.conformance.buffers import all_inputs

    rows = all_inputs(case, WORLD)
    combine = spec.ops.combiner("compose", case.dtype)
    value = rows[order[0]]
    for r in order[1:]:
        value = combine(value, rows[r])
    return value


def test_ranks_zero_and_one_swapped_on_every_rank_is_an_operand_order_violation():
    case = Case("allreduce", "int32", "compose", 9, True, None, "maps")
    finals = correct(case)
    for rank in range(WORLD):
        output(finals, case, rank)[:] = composed(case, (1, 0, 2, 3))
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "operand-order"
    assert violation.details["ranks"] == [0, 1, 2, 3]
    assert violation.details["orders"] == [[1, 0, 2, 3]]
    assert violation.details["inversions"] == [[0, 1]]
    assert violation.details["elements"] == 9
    assert "out of rank order" in violation.message and "0<->1" in violation.message


def test_a_wrong_order_at_the_root_of_reduce_names_only_the_root():
    case = Case("reduce", "int64", "compose", 5, True, 2, "maps")
    finals = correct(case)
    output(finals, case, 2)[:] = composed(case, (3, 2, 1, 0))
    (violation,) = judge(case, WORLD, finals)
    assert (violation.kind, violation.details["ranks"], violation.details["order"]) == ("operand-order", [2], [3, 2, 1, 0])
    assert violation.details["inversions"] == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]


def test_a_compose_result_no_order_explains_is_a_wrong_value():
    case = Case("allreduce", "int32", "compose", 3, True, None, "maps")
    finals = correct(case)
    for rank in range(WORLD):
        output(finals, case, rank)[1] += 2  # keeps a = 1 mod 4, so not the sentinel
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "wrong-value" and violation.details["element"] == 1


def test_a_missing_operand_is_not_an_order():
    case = Case("reduce_scatter", "int64", "compose", 8, False, None, "maps")
    finals = correct(case)
    from collspec.conformance.buffers import all_inputs

    rows = all_inputs(case, WORLD)
    combine = spec.ops.combiner("compose", case.dtype)
    without_rank_3 = combine(combine(rows[0], rows[1]), rows[2])
    output(finals, case, 0)[:] = without_rank_3[0:2]
    (violation,) = judge(case, WORLD, finals)
    assert violation.kind == "wrong-value" and violation.details["ranks"] == [0]


# -- bit-reproducibility --------------------------------------------------------


def test_repeat_adds_calls_of_the_same_inputs():
    base = [Case("allreduce", "float32", "sum", 5, True, None, "rounding")]
    again = repeated(base, 3, seed=10)
    assert [(c.seed, c.call) for c in again] == [(10, 0), (11, 0), (12, 0), (10, 1), (10, 2)]
    assert again[3].id.endswith("seed=10/call=1") and again[3].data_seed == again[0].data_seed


def test_different_bits_on_a_later_call_is_a_not_reproducible_warning():
    case = Case("allreduce", "float32", "sum", 5, True, None, "rounding", algorithm="ring")
    from dataclasses import replace

    outcomes = [Outcome(0, case, "pass", digest="aa"), Outcome(1, replace(case, call=1), "pass", digest="aa"),
                Outcome(2, replace(case, call=2), "pass", digest="bb")]
    checked = conform_module._reproducible(outcomes)
    assert [o.violations for o in checked[:2]] == [[], []]
    (violation,) = checked[2].violations
    assert (violation.kind, violation.severity, violation.details["first"]) == ("not-reproducible", "warning", case.id)
    assert violation.details["algorithm"] == "ring" and checked[2].status == "pass"


# -- algorithms as case data ----------------------------------------------------


def test_the_algorithm_is_in_the_id_but_not_in_the_inputs():
    plain = Case("allreduce", "int32", "sum", 5, True, None, "tally")
    from dataclasses import replace

    forced = replace(plain, algorithm="ring")
    assert forced.id == "allreduce/alg=ring/int32/sum/n=5/inplace/tally/seed=0"
    assert forced.data_seed == plain.data_seed
    assert Case.from_json(forced.to_json()) == forced


def test_an_ignored_algorithm_makes_its_passes_unsupported():
    spec_ = parse("intelmpi")
    case = Case("allreduce", "int32", "sum", 5, True, None, "tally", algorithm="99")
    auto = Case("allreduce", "int32", "sum", 5, True, None, "tally", algorithm="auto")
    said = "noise\nMPI startup(): Incorrect algorithm: ALLREDUCE=99, will be ignored\nmore"
    (out,) = conform_module._ignored(spec_, [Outcome(0, case, "pass")], said)
    assert out.status == "unsupported"
    (violation,) = out.violations
    assert violation.kind == "unsupported" and violation.severity == "warning"
    assert "Incorrect algorithm: ALLREDUCE=99, will be ignored" in violation.details["reason"]
    assert conform_module._ignored(spec_, [Outcome(0, auto, "pass")], said)[0].status == "pass"
    assert conform_module._ignored(spec_, [Outcome(0, case, "pass")], "all quiet")[0].status == "pass"


def test_a_setup_crash_of_a_forced_start_names_the_algorithm():
    from collspec.spec import Violation

    cases = [Case("reduce_scatter", "int32", "sum", 5, False, None, "tally", algorithm="reduce_scatter:noncommutative")]
    crash = Violation("crash", "rank 0 died (signal SIGABRT) during set-up", details={"phase": "setup", "ranks": [0]})
    (violation,) = conform_module._tagged(Outcome(0, None, "crash", [crash]), cases).violations
    assert violation.message.startswith("reduce_scatter/alg=reduce_scatter:noncommutative: rank 0 died")
    assert violation.details["algorithm"] == "reduce_scatter:noncommutative"


@pytest.mark.parametrize("library, collective, variables", [
    ("openmpi", "reduce", {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_reduce_algorithm": "chain"}),
    ("mpich", "allgather", {"MPIR_CVAR_ALLGATHERV_INTRA_ALGORITHM": "chain", "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}),
    ("mpich", "reduce_scatter", {"MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM": "chain", "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}),
    ("intelmpi", "alltoall", {"I_MPI_ADJUST_ALLTOALL": "chain"}),
])
def test_forcing_an_algorithm_sets_the_library_variables(library, collective, variables):
    function = {"allgather": "allgatherv:", "reduce_scatter": "reduce_scatter_block:"}.get(collective, "")
    assert mpi_libs.force(library, collective, function + "chain") == variables


def test_mpi_is_open_mpi():
    assert parse("mpi").library == parse("openmpi").library == "openmpi"
    assert [parse(b).launcher for b in ("mpich", "intelmpi")] == ["mpiexec", "mpiexec"]


def test_a_name_no_collective_has_is_bad_input_listing_the_valid_ones(monkeypatch):
    table = {"allreduce": ("auto", "ring"), "reduce": ("auto", "chain"),
             "allgather": ("auto", "allgather:ring", "allgatherv:ring", "allgatherv:brucks")}
    monkeypatch.setattr(mpi_libs, "algorithms", lambda name, c: table[c])
    with pytest.raises(CollspecError, match=r"--algorithm bogus: not an algorithm of MPICH .*allreduce: auto, ring; reduce: auto, chain"):
        mpi_libs.select("mpich", ["allreduce", "reduce"], ["bogus"])
    assert mpi_libs.select("mpich", ["allreduce", "reduce"], ["ring"]) == {"allreduce": ["ring"]}
    assert mpi_libs.select("mpich", ["allreduce", "reduce"], ["all"]) == {"allreduce": ["auto", "ring"], "reduce": ["auto", "chain"]}
    assert mpi_libs.select("mpich", ["allreduce"], None) == {"allreduce": ["auto"]}
    assert mpi_libs.select("mpich", ["allgather"], ["ring"]) == {"allgather": ["allgather:ring", "allgatherv:ring"]}
    assert mpi_libs.select("mpich", ["allgather"], ["allgatherv:ring"]) == {"allgather": ["allgatherv:ring"]}


def test_a_forced_algorithm_runs_only_the_cases_of_its_mpi_function():
    from collspec.conformance.conform import _groups

    chosen = [Case("reduce_scatter", "int32", "sum", n, False, None, "tally") for n in (4, 5)]
    groups = _groups(parse("mpich"), chosen, ["reduce_scatter:noncommutative", "reduce_scatter_block:pairwise"], 4)
    assert [(v, [c.id for c in cases]) for v, cases in groups] == [
        ({"MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM": "pairwise", "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"},
         ["reduce_scatter/alg=reduce_scatter_block:pairwise/int32/sum/n=4/outofplace/tally/seed=0"]),
        ({"MPIR_CVAR_REDUCE_SCATTER_INTRA_ALGORITHM": "noncommutative", "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"},
         ["reduce_scatter/alg=reduce_scatter:noncommutative/int32/sum/n=5/outofplace/tally/seed=0"]),
    ]


@pytest.mark.parametrize("library", list(mpi_libs.LIBRARIES))
def test_the_installed_libraries_list_their_algorithms(library):
    if not mpi_libs.library(library).available():
        pytest.skip(f"{library} is not installed (make install)")
    for collective, functions in mpi_libs.FUNCTIONS.items():
        names = mpi_libs.algorithms(library, collective)
        assert names[0] == "auto" and len(names) >= 3 and len(set(names)) == len(names)
        assert len(functions) == 1 or {n.split(":")[0] for n in names[1:]} == set(functions)
    assert mpi_libs.version(library).split()[-1][0].isdigit()


# -- the command line -----------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--backend", "mpich", "-c", "allreduce", "--algorithm", "bogus"],
     "--algorithm bogus: not an algorithm of MPICH for allreduce (valid: allreduce: auto, "),
    (["--backend", "gloo", "--algorithm", "ring"], "--algorithm: gloo has no algorithms to force"),
    (["--backend", "gloo", "--list-algorithms"], "--list-algorithms: gloo has no algorithms"),
    (["--backend", "openmpi", "--list-algorithms", "-c", "scan"], "unknown collective 'scan'"),
    (["--backend", "mpi", "--op", "mean"], "unknown op 'mean'; use one of sum, prod, min, max, avg, compose"),
])
def test_bad_algorithm_input_is_one_line_and_exit_2(argv, message, capsys):
    from collspec.cli import main

    if not mpi_libs.library("mpich").available():
        pytest.skip("mpich is not installed (make install)")
    assert main(["conform", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_list_algorithms_prints_every_collective_with_its_functions(capsys):
    from collspec.cli import main

    if not mpi_libs.library("openmpi").available():
        pytest.skip("openmpi is not installed")
    assert main(["conform", "--backend", "mpi", "--list-algorithms"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("Open MPI 5.")
    by_collective = {line.split(" ")[0]: line for line in lines[1:]}
    assert set(by_collective) == set(mpi_libs.FUNCTIONS)
    assert "(MPI_Allreduce): auto, basic_linear," in by_collective["allreduce"] and ", ring," in by_collective["allreduce"]
    assert "(MPI_Reduce_scatter_block, MPI_Reduce_scatter): auto, reduce_scatter_block:" in by_collective["reduce_scatter"]
