"""Open MPI, MPICH and Intel MPI, algorithm by algorithm: a representative subset of docs/mpi.md, live.

docs/mpi.md is rendered from docs/mpi_results.json, the record of the whole
sweep (docs/gen_mpi.py; too long for ``make test``). Here: the page must be
that rendering, and a few forced algorithms per library run again, whose
every case must end as recorded. The subset holds the findings the sweep
must find on its own: Open MPI's ring allreduce and chain reduce combine a
non-commutative op out of rank order (named as an ``operand-order``, with
the order), MPICH's ``noncommutative`` reduce-scatter crashes on unequal
counts and the sweep goes on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from collspec.conformance import mpi_libs
from collspec.conformance.conform import conform
from conformance_support import leftover_processes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import gen_mpi  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.mpi]
RECORD = json.loads((ROOT / "docs" / "mpi_results.json").read_text())


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    assert leftover_processes() == []


def installed(library: str):
    return pytest.mark.skipif(not mpi_libs.library(library).available(), reason=f"{library} not installed (make install)")


def test_the_page_is_the_rendering_of_the_record():
    assert gen_mpi.page(RECORD) == (ROOT / "docs" / "mpi.md").read_text(), "rerun docs/gen_mpi.py --render"


def as_recorded(library: str, result) -> list:
    """The live outcomes, each checked against the recorded status of the same case id."""
    recorded = RECORD[library]["cases"]
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
    assert chain and {v.kind for v in chain} == {"operand-order"} and {tuple(v.details["ranks"]) for v in chain} == {(3,)}


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
