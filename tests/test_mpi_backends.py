"""Open MPI, MPICH and Intel MPI, algorithm by algorithm: a representative subset of docs/mpi.md, live.

docs/mpi.md is rendered from docs/mpi_results.json, the record of the whole
sweep (docs/gen_mpi.py; too long for ``make test``). Here: the page must be
that rendering, and a few forced algorithms per library run again, whose
every case must end as recorded. The subset holds the findings the sweep
must find on its own: Open MPI's ring allreduce and chain reduce combine a
non-commutative op out of rank order (named as an ``operand-order``, with
the order), Open MPI's sparbit all-gather sends nothing in place and its
two_proc all-gather-v refuses 4 ranks, MPICH's ``noncommutative``
reduce-scatter crashes on unequal counts and the sweep goes on, MPICH's
``smp`` all-reduce aborts its own ``MPI_Init``.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

from collspec.conformance import mpi_libs
from collspec.conformance.conform import conform
from conformance_support import left_behind, leftover_processes, shared_entries

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import gen_mpi  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.mpi]


@functools.lru_cache(maxsize=None)
def record() -> dict:
    """docs/mpi_results.json, the record of the whole sweep (read when a test needs it)."""
    return json.loads((ROOT / "docs" / "mpi_results.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def nothing_left_in_shared_memory():
    """The module's MPI runs, crashing algorithms and aborted MPI_Inits included, leave
    nothing in /dev/shm and no MPI library file in the temporary folder."""
    before = shared_entries()
    yield
    assert left_behind(before) == []


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    assert leftover_processes() == []


def installed(library: str):
    return pytest.mark.skipif(not mpi_libs.library(library).available(), reason=f"{library} not installed (make install)")


def test_the_page_is_the_rendering_of_the_record():
    assert gen_mpi.page(record()) == (ROOT / "docs" / "mpi.md").read_text(), "rerun docs/gen_mpi.py --render"


def as_recorded(library: str, result) -> list:
    """The live outcomes, each checked against the recorded status of the same case id."""
    recorded = record()[library]["cases"]
    compared = [o for o in result.outcomes if o.case is not None and o.case.id in recorded]
    assert compared, "no case of the subset is in the record"
    assert [(o.case.id, o.status) for o in compared] == [(o.case.id, recorded[o.case.id]) for o in compared]
    return compared


@installed("openmpi")
def test_open_mpi_ring_allreduce_and_chain_reduce_reorder_a_noncommutative_op():
    result = gen_mpi.sweep("openmpi", collectives=["allreduce", "reduce"], algorithms=["basic_linear", "ring", "chain"],
                           dtypes=["int32"], ops=["compose"], sizes=[5])
    as_recorded("openmpi", result)
    status = {(o.case.collective, o.case.algorithm, o.case.root): o.status for o in result.outcomes if o.case}
    assert status[("allreduce", "basic_linear", None)] == "pass"
    assert status[("allreduce", "ring", None)] == "fail"
    assert status[("reduce", "chain", 3)] == "fail"
    ring = [v for v in result.violations if v.details.get("algorithm") == "ring"]
    assert [(v.kind, v.details["ranks"]) for v in ring] == [("operand-order", [0, 1, 2, 3])]
    assert ring[0].details["order"] != [0, 1, 2, 3]
    chain = [v for v in result.violations if v.details.get("algorithm") == "chain"]
    assert chain and {v.kind for v in chain} == {"operand-order"}
    assert all(v.details["ranks"] == [v.details["root"]] for v in chain)  # only the root is wrong, whichever it is


@installed("openmpi")
def test_open_mpi_sparbit_allgather_in_place_sends_nothing_and_two_proc_allgatherv_is_refused_at_4_ranks():
    result = gen_mpi.sweep("openmpi", collectives=["allgather"], algorithms=["allgather:sparbit", "allgatherv:two_proc"],
                           dtypes=["int32"], sizes=[5, 256])
    as_recorded("openmpi", result)
    status = {(o.case.algorithm, o.case.inplace): o.status for o in result.outcomes if o.case}
    assert status == {("allgather:sparbit", False): "pass", ("allgather:sparbit", True): "fail",
                      ("allgatherv:two_proc", False): "unsupported", ("allgatherv:two_proc", True): "unsupported"}
    sparbit = [v for v in result.violations if v.kind != "unsupported"]
    assert {v.details["algorithm"] for v in sparbit} == {"allgather:sparbit"}  # a check's violation names the algorithm too
    assert sorted(v.details["ranks"][0] for v in sparbit) == [0, 1, 2, 3] and {v.kind for v in sparbit} == {"postcondition"}
    assert all("192 of 256 output element(s) never written" in v.message for v in sparbit)
    refused = [v for v in result.violations if v.details.get("algorithm") == "allgatherv:two_proc"]
    assert {v.details["reason"] for v in refused} == {
        "NotImplementedError: MPI refused: MPI_ERR_UNSUPPORTED_OPERATION: operation not supported"}


@installed("mpich")
def test_mpich_noncommutative_reduce_scatter_crashes_on_unequal_counts_and_the_sweep_goes_on():
    result = gen_mpi.sweep("mpich", collectives=["reduce_scatter"], dtypes=["int32"], ops=["sum"], sizes=[5, 256],
                           algorithms=["reduce_scatter:noncommutative", "reduce_scatter_block:noncommutative"])
    as_recorded("mpich", result)
    status = {(o.case.algorithm, o.case.count, o.case.inplace): o.status for o in result.outcomes if o.case}
    assert status[("reduce_scatter_block:noncommutative", 256, False)] == "pass"  # equal blocks, 4 ranks
    assert status[("reduce_scatter:noncommutative", 5, False)] == "crash"  # unequal counts: the assertion
    assert status[("reduce_scatter:noncommutative", 5, True)] == "unsupported"  # the ranks were restarted and went on
    (crash,) = [v for v in result.violations if v.kind == "crash"]
    assert crash.details["algorithm"] == "reduce_scatter:noncommutative"
    assert "alg=reduce_scatter:noncommutative" in crash.message
    # MPICH's own words, before the backtrace: the assertion that fails for unequal counts
    assert crash.details["said"].startswith("Assertion failed in file ")
    assert "reduce_scatter_intra_noncommutative.c" in crash.details["said"] and crash.message.endswith(crash.details["said"])


@installed("intelmpi")
def test_intel_mpi_presets_and_its_own_choice():
    result = gen_mpi.sweep("intelmpi", collectives=["allreduce"], algorithms=["auto", "1"],
                           dtypes=["int32"], ops=["sum", "compose"], sizes=[5])
    compared = as_recorded("intelmpi", result)
    assert {o.case.algorithm for o in compared} == {"auto", "1"}
    assert {o.status for o in compared} == {"pass"}


def test_gloo_refuses_compose():
    result = conform("gloo", world_size=2, mode="default", collectives=["allreduce"], dtypes=["int32"],
                     ops=["compose"], sizes=[3])
    assert result.counts() == {"unsupported": 1}
    assert "no compose operation" in result.outcomes[0].violations[0].details["reason"]


def a_rejected_value_for(monkeypatch, forced: str) -> None:
    """Force ``forced`` as the value ``bogus`` (what a library does with a value it does not know)."""
    real = mpi_libs.force

    def force(name, collective, algorithm):
        variables = real(name, collective, algorithm)
        if algorithm != forced:
            return variables
        return {k: "bogus" if k.endswith("_ALGORITHM") or k.endswith("_algorithm") or k.startswith("I_MPI_ADJUST_") else v
                for k, v in variables.items()}

    monkeypatch.setattr(mpi_libs, "force", force)


@installed("mpich")
def test_an_mpi_init_that_aborts_on_a_forced_value_is_a_crash_of_each_case_of_that_algorithm_and_the_sweep_goes_on(monkeypatch):
    a_rejected_value_for(monkeypatch, "ring")
    result = conform("mpich", world_size=4, mode="quick", collectives=["allreduce"], dtypes=["int32"], ops=["sum", "max"],
                     sizes=[5], algorithms=["ring", "tree"])
    status = {(o.case.algorithm, o.case.op): o.status for o in result.outcomes if o.case}
    assert status == {("ring", "sum"): "crash", ("ring", "max"): "crash", ("tree", "sum"): "pass", ("tree", "max"): "pass"}
    crashes = [v for v in result.violations if v.kind == "crash"]
    assert [v.details["case"] for v in crashes] == [o.case.id for o in result.outcomes if o.case.algorithm == "ring"]
    for crash in crashes:
        assert crash.message.startswith("allreduce/alg=ring/int32/") and crash.details["algorithm"] == "ring"
        # MPICH's own words: MPI_Init failed (it names no reason for a value it does not know)
        assert crash.details["reason"].startswith("MPI_Init aborted with the algorithm forced: Abort(")
        assert "Fatal error in internal_Init_thread" in crash.details["reason"] and "during set-up" in crash.details["reason"]


@installed("mpich")
def test_an_algorithm_mpich_refuses_in_its_own_mpi_init_is_unsupported_with_its_message_on_every_case():
    result = gen_mpi.sweep("mpich", collectives=["allreduce"], algorithms=["smp"], dtypes=["int32"], ops=["sum", "compose"],
                           sizes=[5])
    assert [o.status for o in as_recorded("mpich", result)] == ["unsupported", "unsupported"]
    for outcome in result.outcomes:
        (refused,) = outcome.violations
        assert refused.kind == "unsupported" and refused.details["algorithm"] == "smp"
        reason = refused.details["reason"]
        assert reason.startswith("MPI_Init aborted with the algorithm forced: User set collective algorithm is not usable")
        assert "in internal_Init_thread > " in reason and "> MPIR_Allreduce_intra_smp >" in reason  # MPICH's error stack
        assert outcome.note == reason


@pytest.mark.parametrize("library, algorithms, said", [
    ("openmpi", ["ring", "basic_linear"], "An invalid value was supplied for an enum variable. Variable : coll_tuned_allreduce_algorithm Value : bogus"),
    ("intelmpi", ["1", "2"], "MPI startup(): Incorrect adjust value: ALLREDUCE=bogus, will be ignored"),
], ids=["openmpi", "intelmpi"])
def test_a_forced_value_the_library_only_warns_about_is_unsupported_not_a_pass_of_its_default(monkeypatch, library, algorithms, said):
    if not mpi_libs.library(library).available():
        pytest.skip(f"{library} not installed (make install)")
    a_rejected_value_for(monkeypatch, algorithms[0])
    result = conform(library, world_size=4, mode="quick", collectives=["allreduce"], dtypes=["int32"], ops=["sum"],
                     sizes=[5], algorithms=algorithms)
    status = {o.case.algorithm: o.status for o in result.outcomes if o.case}
    assert status == {algorithms[0]: "unsupported", algorithms[1]: "pass"}
    (refused,) = [v for v in result.violations if v.kind == "unsupported"]
    assert refused.details["algorithm"] == algorithms[0]
    assert refused.details["reason"].startswith(said) and "[W" not in refused.details["reason"]
