"""Export of the built-in algorithms as MSCCL XML: the ring matches what
MSCCLang writes, and every export round-trips through the verifier with the
checker's own verdict."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from collspec.models.checker import check
from collspec.models.generators import ALGORITHMS, generate
from collspec.models.layout import ScheduleError
from collspec.models.msccl import ExportError, load, loads, to_xml, verify
from collspec.models.msccl.corpus import DATA
from collspec.models.msccl.program import TYPE_NAMES

MSCCLANG_RING = DATA / "allreduce-ring-4gpu-mscclang.xml"


def structure(p):
    """Thread blocks (gpu, id, send, recv, chan) and steps (gpu, tb, s, type,
    buffers, offsets, cnt, depid, deps, hasdep)."""
    tbs = list(zip(p.tb_gpu.tolist(), p.tb_id.tolist(), p.tb_send.tolist(), p.tb_recv.tolist(), p.tb_chan.tolist()))
    steps = [
        (int(p.gpu[i]), int(p.tb_id[p.tb[i]]), int(p.pos[i]), TYPE_NAMES[p.type[i]], int(p.src_buf[i]), int(p.src_off[i]), int(p.dst_buf[i]), int(p.dst_off[i]), int(p.cnt[i]), int(p.depid[i]), int(p.deps[i]), int(p.hasdep[i]))
        for i in range(p.steps)
    ]
    return tbs, steps


def test_the_exported_ring_is_the_program_mscclang_writes():
    """ring-seed (the first hop sends each rank's own chunk) is MSCCLang's
    ring: same thread blocks, channels, step types, offsets and dependencies."""
    ours = loads(to_xml(generate("ring-seed", "allreduce", 4), name="allreduce_ring_1channelsperring"))
    theirs = load(str(MSCCLANG_RING))
    assert structure(ours) == structure(theirs)
    assert (ours.name, ours.proto, ours.nchannels, ours.chunks, ours.collective, ours.inplace) == (theirs.name, theirs.proto, theirs.nchannels, theirs.chunks, theirs.collective, theirs.inplace)


def test_the_ring_is_the_same_program_with_chunks_rotated():
    ours = loads(to_xml(generate("ring", "allreduce", 4)))
    theirs = load(str(MSCCLANG_RING))
    assert [TYPE_NAMES[t] for t in ours.type] == [TYPE_NAMES[t] for t in theirs.type] == ["s", "rrs", "rrs", "rrcs", "rcs", "rcs", "r"] * 4
    assert ours.tb_send.tolist() == theirs.tb_send.tolist() and ours.tb_recv.tolist() == theirs.tb_recv.tolist()
    assert ((ours.src_off + 1) % 4).tolist() == theirs.src_off.tolist()


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_ring_allreduce_structure_at_any_size(n):
    p = loads(to_xml(generate("ring", "allreduce", n)))
    assert p.threadblocks == n and p.steps == n * (2 * n - 1)
    expected = ["s"] + ["rrs"] * (n - 2) + ["rrcs"] + ["rcs"] * (n - 2) + ["r"]
    assert [TYPE_NAMES[t] for t in p.type[: 2 * n - 1]] == expected


ROUND_TRIP = [(a, c) for a, table in ALGORITHMS.items() for c in table]


@pytest.mark.parametrize("algorithm, collective", ROUND_TRIP, ids=[f"{a}-{c}" for a, c in ROUND_TRIP])
def test_export_round_trips_through_the_verifier(algorithm, collective):
    for n in (1, 2, 3, 5, 8):
        schedule = generate(algorithm, collective, n)
        verdict = verify(loads(to_xml(schedule), f"{algorithm}-{collective}-{n}.xml"))
        assert verdict.ok == check(schedule).ok, (n, [str(v) for v in verdict.violations if v.is_error])
        assert not {v.kind for v in verdict.violations} & {"race", "deadlock", "unmatched"}
        lint = {v.details["rule"] for v in verdict.violations if v.kind == "lint"}
        assert lint <= {"root"}, lint


def test_ring_seed_reduce_scatter_fails_for_the_same_reason_after_export():
    verdict = verify(loads(to_xml(generate("ring-seed", "reduce_scatter", 4))))
    assert verdict.kinds() == {"postcondition"}
    (v,) = verdict.violations
    assert "[in-place] reduce_scatter ownership: every chunk is reduced completely, but on the wrong rank: rank 0 holds chunk 1 where it must own chunk 0" in v.message


def test_exported_dependencies_order_thread_blocks():
    """direct allreduce: every GPU reduces what N-1 peers send into its one
    chunk, each receive in its own thread block: they must be ordered
    (dependencies, with nops for the extra ones) or they race."""
    p = loads(to_xml(generate("direct", "allreduce", 5)))
    assert np.count_nonzero(p.depid >= 0) > 0 and np.count_nonzero(p.type == list(TYPE_NAMES).index("nop")) > 0
    assert verify(p).ok


def test_export_refuses_a_custom_layout():
    schedule = generate("ring", "allreduce", 3)
    custom = replace(schedule, layout_override=schedule.layout)
    with pytest.raises(ExportError, match="default layout only"):
        to_xml(custom)


def test_export_refuses_a_reduce_scatter_owner_msccl_cannot_express():
    # MSCCL's reducescatter leaves block r of the input on rank r; ring-seed's declared owner r + 1 is not that
    seed = generate("ring-seed", "reduce_scatter", 3)
    owned = replace(seed, owner=((1,), (2,), (0,)))
    with pytest.raises(ExportError) as caught:
        to_xml(owned)
    assert str(caught.value) == ("ring-seed reduce_scatter, 3 ranks: field 'owner' = [[1], [2], [0]]: MSCCL's reducescatter "
                                 "gives rank r block r of the input ([[0], [1], [2]]); export writes only that ownership")
    with pytest.raises(ScheduleError, match=r"field 'owner' must give every chunk to exactly one rank: chunk 0 goes to ranks 0, 1, 2; chunks 1, 2 to no rank$"):
        to_xml(replace(seed, owner=((0,), (0,), (0,))))
    assert 'coll="reducescatter"' in to_xml(replace(seed, owner=((0,), (1,), (2,))))


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "collspec", *args], capture_output=True, text=True, timeout=120)


def test_cli_export_then_check(tmp_path):
    out = tmp_path / "ring8.xml"
    result = run_cli("export", "--algorithm", "ring", "--collective", "allreduce", "--ranks", "8", "--format", "msccl-xml", "-o", str(out))
    assert result.returncode == 0, result.stderr
    checked = run_cli("check", str(out))
    assert checked.returncode == 0 and "ok (0 errors, 0 warnings)" in checked.stdout
    to_stdout = run_cli("export", "-a", "halving-doubling", "-c", "reduce_scatter", "-n", "4")
    assert to_stdout.returncode == 0 and to_stdout.stdout.startswith("<algo ") and 'coll="reducescatter"' in to_stdout.stdout


def test_cli_export_bad_input_is_exit_2(tmp_path):
    missing = run_cli("export", "-a", "ring", "-n", "4", "-o", str(tmp_path / "no" / "such" / "x.xml"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    unknown = run_cli("export", "-a", "spiral", "-n", "4")
    assert unknown.returncode == 2 and "unknown algorithm 'spiral'" in unknown.stderr
