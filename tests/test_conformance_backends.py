"""The real backends at 4 ranks, --quick: what docs/conformance.md says they do.

gloo and collspec's own implementations run the same quick sweep CI runs; the
capability matrix each produces must be the one committed in
docs/conformance.md (regenerate it with docs/gen_conformance.py), every known
finding must still reproduce, and nothing else may fail. (The MPI libraries:
tests/test_mpi_backends.py and docs/mpi.md.) The reference
backend (the spec itself) must pass every case, at a rank count that is not
a power of two.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from collspec.conformance import findings, matrix
from collspec.conformance.conform import conform
from conformance_support import leftover_processes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import gen_conformance  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    assert leftover_processes() == []


def committed_block(backend: str) -> str:
    text = (ROOT / "docs" / "conformance.md").read_text()
    start = text.index(f"<!-- matrix {backend} -->")
    end = text.index(f"<!-- end matrix {backend} -->") + len(f"<!-- end matrix {backend} -->")
    return text[start:end]


def check_against_docs(backend: str) -> None:
    result = gen_conformance.run(backend)
    report = result.report()
    assert [v for v in report.violations if v.is_error] == []
    assert report.exit_code == 0
    assert gen_conformance.matrix_block(backend, result) == committed_block(backend), (
        f"{backend}'s capability matrix changed: rerun docs/gen_conformance.py and review the difference")
    for finding in (f for f in findings.KNOWN if f.backend == backend):
        assert any(finding.matches(backend, v) for v in report.violations), f"known finding no longer seen: {finding.note}"
    statuses = {o.status for o in result.outcomes}
    assert "pass" in statuses and not statuses & {"fail", "hang", "crash", "not-run"}


def test_gloo_quick_matches_the_documented_matrix():
    check_against_docs("gloo")


@pytest.mark.parametrize("backend", ["ring", "direct", "shm"])
def test_collspec_implementations_quick_match_the_documented_matrix(backend):
    check_against_docs(backend)


def test_the_reference_backend_passes_everything_at_three_ranks():
    result = conform("reference", world_size=3, mode="quick")
    assert result.counts() == {"pass": sum(result.counts().values())}
    assert {cell for modes in result.capability.values() for dtypes in modes.values()
            for ops in dtypes.values() for cell in ops.values()} == {"pass"}


def test_the_torchrun_launcher_runs_the_same_ranks():
    result = conform("gloo", world_size=2, mode="default", launcher="torchrun",
                     collectives=["allreduce", "allgather"], dtypes=["float32"], ops=["sum"], sizes=[6])
    assert result.counts() == {"pass": 4}  # allreduce tally and rounding, allgather both modes
    assert result.result.loopback_only


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA GPU")
def test_nccl_quick_on_the_visible_gpus():
    import torch

    world = min(4, torch.cuda.device_count())
    result = conform("nccl", world_size=world, mode="quick")
    print(matrix.text(result.capability))
    assert [v for v in result.report().violations if v.is_error] == []


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available() or __import__("torch").cuda.device_count() < 2,
                    reason="needs two CUDA GPUs")
def test_a_user_backend_on_cuda_is_caught_like_on_the_cpu():
    from conformance_support import ZOO

    result = conform(f"{ZOO}/drops_rank.py:DropsRank", world_size=2, mode="default", device="cuda",
                     collectives=["allreduce"], dtypes=["float32"], ops=["sum"], sizes=[5])
    (violation,) = result.violations
    assert violation.kind == "missing-contribution" and violation.details["contributors"] == [1]
