"""Plans of a collective collspec has no postcondition for (``sendrecv``,
the DSL's ``test``): out of place, their synchronisation is checked (race,
deadlock, unmatched) and a ``no-postcondition`` warning says the result is
not; in place they are refused, since how input and output alias is the
collective's. The plans are written here: two GPUs swap i[0] into each
other's o[0], signal, wait, then copy o[0] to o[1]."""

from __future__ import annotations

import copy
import json

import pytest

from collspec.cli import main
from collspec.models.mscclpp import PlanFormatError, loads, verify
from sendrecv_plan import PLAN

RACE = "at least one of them writing, and nothing orders them"


def without(rank: int, op: int) -> str:
    plan = copy.deepcopy(PLAN)
    del plan["gpus"][rank]["threadblocks"][0]["ops"][op]
    return json.dumps(plan)


@pytest.mark.parametrize("collective", ["sendrecv", "test"])
def test_the_synchronisation_of_a_plan_without_postcondition_is_checked(collective):
    verdict = verify(loads(json.dumps(dict(PLAN, collective=collective)), "swap.json"))
    assert verdict.ok
    assert [str(v) for v in verdict.violations] == [
        f"warning lint: collective: '{collective}' has no postcondition in collspec (it checks the result of allreduce, allgather, "
        "reducescatter, alltoall): only the synchronisation is checked (race, deadlock, unmatched), not what the plan computes"
    ]
    assert verdict.stats["result"] == f"not checked: '{collective}' has no postcondition in collspec"


def test_a_missing_wait_races_with_the_peers_put():
    verdict = verify(loads(without(1, 3), "nowait.json"))
    assert verdict.kinds() == {"race", "unmatched"}
    assert [v.message for v in verdict.violations if v.is_error] == [
        "GPU 0 tb 0 op 2 (signal) is signal number 1 on its memory channel 0 to GPU 1, but GPU 1 waits on the paired channel only 0 time(s); the leftover signal lets a wait of the next launch return early",
        f"GPU 0 tb 0 op 0 (put) and GPU 1 tb 0 op 4 (copy) both touch GPU 1's o[0], {RACE} (ops of one thread block need a nop between them; across thread blocks a signal/wait, packet, barrier or semaphore)",
    ]


def test_a_missing_signal_leaves_the_peer_waiting():
    verdict = verify(loads(without(0, 2), "nosignal.json"))
    assert verdict.kinds() == {"deadlock"}
    assert [v.message for v in verdict.violations if v.is_error] == [
        "GPU 1 tb 0 op 3 (wait) is wait number 1 on its memory channel 0 (to GPU 0), but channel 0 of GPU 0 is signalled only 0 time(s); the wait never returns",
    ]


def test_a_different_size_per_gpu_is_bounded_by_each_gpus_own_declaration():
    plan = copy.deepcopy(PLAN)
    plan["gpus"][1]["output_chunks"] = 1  # GPU 0 still puts into GPU 1's o[0], GPU 1's copy writes o[1]
    with pytest.raises(PlanFormatError, match=r"gpus\[1\]\.threadblocks\[0\]\.ops\[5\]\.dst_buff\[0\]\.index: chunks 1\.\.1 of o on GPU 1, which has 1 chunk\(s\) \(0\.\.0\)"):
        loads(json.dumps(plan), "sizes.json")


def test_in_place_is_refused(tmp_path, capsys):
    path = tmp_path / "inplace.json"
    path.write_text(json.dumps(dict(PLAN, inplace=True)))
    assert main(["check", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"collspec check: error: {path}: collective: 'sendrecv' has no postcondition in collspec, and in place its input and "
        "output alias in a way only the collective defines; in-place plans for allreduce, allgather, reducescatter, alltoall are checked"
    )


def test_cli_exit_status_follows_the_synchronisation(tmp_path, capsys):
    good, bad = tmp_path / "swap.json", tmp_path / "nowait.json"
    good.write_text(json.dumps(PLAN))
    bad.write_text(without(1, 3))
    assert main(["check", str(good), "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] and report["stats"]["collective"] == "sendrecv" and report["stats"]["result"].startswith("not checked")
    assert main(["check", str(bad)]) == 1
    capsys.readouterr()
