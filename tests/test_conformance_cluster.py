"""``collspec conform`` as the ranks of a job an existing launcher started.

Fast tests: where a rank is (every launcher's variables), how ranks are
named with their hosts, merging partial reports and resuming. Slow tests
(marked ``slow``, root only, skipped with the reason otherwise): two nodes
made of network namespaces joined by a veth pair, two ranks on each,
through multi-node torchrun and through mpirun with a host file (started on
the other node by an agent that enters its namespaces instead of ssh); and
a one-node Slurm cluster (slurm-wlm, munge) for srun, sbatch of the job
script in docs/cluster.md, a killed rank and --resume.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from collspec.conformance import cluster_env, report_merge, where
from collspec.conformance.conform import select
from collspec.spec import Violation
from collspec.spec.errors import CollspecError

sys.path.insert(0, str(Path(__file__).parent))
from cluster import nodes as two_nodes  # noqa: E402
from cluster import slurm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FAULTY = str(ROOT / "tests" / "cluster" / "faulty.py") + ":Faulty"
#: What every job of the slow tests runs: 13 cases.
FILTER = ["--quick", "-c", "allreduce", "--dtype", "float32"]


# -- where a rank is -----------------------------------------------------------------------------

@pytest.mark.parametrize("env, expected", [
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "42",
      "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NODELIST": "gpu[07-08]"},
     ("slurm", 5, 8, 1, "gpu07", "slurm node list: gpu07")),
    ({"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "3", "SLURM_JOB_ID": "42",
      "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NODELIST": "n1"},
     ("slurm", 1, 4, 1, "127.0.0.1", "one node: 127.0.0.1")),
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "PMIX_NAMESPACE": "prterun-x-1@1"},
     ("openmpi", 3, 4, 1, "127.0.0.1", "one node: 127.0.0.1")),
    ({"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2", "MASTER_ADDR": "node-a"},
     ("hydra", 2, 4, 0, "node-a", "MASTER_ADDR")),
    ({"RANK": "6", "WORLD_SIZE": "8", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1",
      "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_USE_AGENT_STORE": "True",
      # torchrun inside a Slurm step: torchrun's variables win
      "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"},
     ("torchrun", 6, 8, 2, "10.0.0.1", "MASTER_ADDR")),
])
def test_placement_from_each_launcher(env, expected):
    place = cluster_env.placement(env=env)
    assert (place.launcher, place.rank, place.world, place.local_rank, place.address, place.rendezvous) == expected
    assert 20000 <= place.port < 40000 or place.port == 29500
    assert place.agent_store == (place.launcher == "torchrun")


def test_the_same_job_gets_the_same_port_and_the_next_step_another():
    step = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "7", "SLURM_STEP_NUM_NODES": "1"}
    ports = {cluster_env.placement(env={**step, "SLURM_PROCID": str(r)}).port for r in range(2)}
    assert len(ports) == 1
    assert cluster_env.placement(env={**step, "SLURM_STEP_ID": "1"}).port not in ports


def test_a_batch_script_is_not_a_rank():
    batch = {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "7"}  # no step: sbatch's script itself
    assert cluster_env.detect(batch) is None
    with pytest.raises(CollspecError, match="no launcher variables found"):
        cluster_env.placement(env=batch)


def test_mpirun_across_nodes_needs_rank_0s_address():
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    with pytest.raises(CollspecError, match="--master-addr HOST .* or --rendezvous file:PATH"):
        cluster_env.placement(env=env)
    assert cluster_env.placement(env=env, rendezvous="file:/shared/r").rendezvous == "file:/shared/r"
    with pytest.raises(CollspecError, match="write file:PATH"):
        cluster_env.placement(env=env, rendezvous="tcp:x")


def test_flags_beat_the_variables():
    place = cluster_env.placement(rank=1, world=2, local_rank=0, master_addr="h", master_port=1234, env={"RANK": "0", "WORLD_SIZE": "8"})
    assert (place.rank, place.world, place.address, place.port, place.rendezvous) == (1, 2, "h", 1234, "--master-addr")
    with pytest.raises(CollspecError, match="rank 2 is not within a world of 2"):
        cluster_env.placement(rank=2, world=2, env={})


# -- naming ranks with their hosts -----------------------------------------------------------------

TABLE = {r: {"rank": r, "host": f"node-{'ab'[r // 2]}", "local_rank": r % 2} for r in range(4)}


def test_violations_name_hosts_and_local_ranks_and_group_by_host():
    wrong = Violation("wrong-value", "allreduce/x: ranks 2, 3 hold a wrong sum", details={"case": "x", "ranks": [2, 3]})
    named = where.annotate(wrong, TABLE)
    assert named.message == "allreduce/x: ranks 2, 3 hold a wrong sum [ranks 2-3 on node-b (local 0-1)]"
    assert named.details["where"] == [TABLE[2], TABLE[3]]
    assert where.annotate(named, TABLE) == named  # once
    hang = where.annotate(Violation("hang", "y: rank(s) 0 did not finish", details={"case": "y", "ranks": [0]}), TABLE)
    other = where.annotate(Violation("wrong-value", "z", details={"case": "z", "ranks": [3]}), TABLE)
    assert where.by_host([named, hang, other], TABLE) == [
        "rank 0 on node-a (local 0): hang (1 case)",
        "ranks 2-3 on node-b (local 0-1): wrong-value (2 cases)",
    ]


# -- partial reports, merge, resume ----------------------------------------------------------------

def _partial(rank, plan, outcomes, state, ended=""):
    return {"command": report_merge.FORMAT, "rank": rank, "world_size": 4, "subject": "gloo",
            "backend": "collspec.conformance.torch_backend:Gloo", "device": "cpu",
            "placement": {"rank": rank, "loopback_only": False}, "settings": {"mode": "quick", "launcher": "external"},
            "table": list(TABLE.values()), "plan": [c.to_json() for c in plan], "outcomes": outcomes,
            "state": state, "ended": ended, "current": 0, "seconds": 1.0}


def _passed(plan, upto):
    from collspec.conformance.runner import Outcome

    return [report_merge.outcome_to_json(Outcome(i, plan[i], "pass")) for i in range(upto)]


def test_merge_names_the_rank_that_died_without_a_record(tmp_path):
    plan = select(4, "quick", collectives=["allreduce"], dtypes=["float32"])
    partials = [_partial(0, plan, _passed(plan, 2), "running")]  # rank 0 died in case 2
    from collspec.conformance.runner import Outcome

    signalled = Outcome(2, plan[2], "crash", [Violation("crash", "ended by SIGTERM", details={"ranks": [1], "how": "SIGTERM", "by": "signal"})])
    partials.append(_partial(1, plan, _passed(plan, 2) + [report_merge.outcome_to_json(signalled)], "aborted", "rank 1 received SIGTERM"))
    merged = report_merge.merge(partials)
    statuses = [o.status for o in merged.outcomes]
    assert statuses[:3] == ["pass", "pass", "crash"] and set(statuses[3:]) == {"not-run"}
    crash = merged.outcomes[2].violations[0]
    assert crash.message == (f"{plan[2].id}: rank(s) 0 ended during this case without a record (killed or lost); "
                             "then rank(s) 1 were ended by SIGTERM [rank 0 on node-a (local 0)]")
    assert merged.outcomes[3].note == "not run: rank 1 received SIGTERM; start the cases left with --resume REPORT"
    report = merged.report().to_json()
    assert report["ok"] is False and report["by_host"] == ["rank 0 on node-a (local 0): crash (1 case)"]
    assert report["cases"][0]["ranks"] == list(TABLE.values())
    path = tmp_path / "merged.json"
    path.write_text(json.dumps(report))
    start, earlier, table = report_merge.resume_point(str(path), plan)
    assert start == 3 and [o.status for o in earlier] == ["pass", "pass", "crash"] and table == TABLE
    assert earlier[2].violations[0].message == crash.message
    with pytest.raises(CollspecError, match="are not the 7 cases of these options"):
        report_merge.resume_point(str(path), plan[:7])


def test_merge_refuses_the_partial_of_another_job():
    plan = select(4, "quick", collectives=["allreduce"], dtypes=["float32"])
    other = select(4, "quick", collectives=["broadcast"], dtypes=["float32"])
    with pytest.raises(CollspecError, match="is of another job"):
        report_merge.merge([_partial(0, plan, [], "finished"), _partial(1, other, [], "finished")])
    with pytest.raises(CollspecError, match="not a partial report"):
        report_merge.merge([{"command": "conform"}])


def _collspec(*args, env=None, **kwargs):
    return subprocess.run([str(BIN / "collspec"), *args], capture_output=True, text=True, timeout=120,
                          env=env if env is not None else _clean_env(), **kwargs)


def _clean_env(**extra):
    names = ("SLURM_", "OMPI_", "PMI_", "PMIX_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "TORCHELASTIC")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(names)}, **extra}


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    out = _collspec("conform", "--backend", "gloo", "--launcher", "external")
    assert out.returncode == 2 and "no launcher variables found" in out.stderr and "Traceback" not in out.stderr
    out = _collspec("conform", "--backend", "mpich", "--launcher", "external", "--rank", "0", "--world-size", "2", "--master-addr", "127.0.0.1")
    assert out.returncode == 2 and "starts its ranks under its own mpiexec" in out.stderr
    out = _collspec("report", "merge", str(tmp_path / "none.json"))
    assert out.returncode == 2 and "cannot read a report" in out.stderr


# -- the real thing: two namespaced nodes ----------------------------------------------------------

def _need_nodes():
    reason = two_nodes.unavailable()
    if reason:
        pytest.skip(f"two namespaced nodes: {reason}")


def _torchrun(nodes, out, extra, env):
    procs = []
    for i in range(2):
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(i),
                   "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{nodes.addresses[0]}:29400", "--rdzv-id", out.name,
                   "--rdzv-conf", f"is_host={'true' if i == 0 else 'false'}", "--max-restarts", "0",
                   "-m", "collspec", "conform", "--launcher", "external", *FILTER, "--timeout", "60",
                   "--json", str(out / "report.json"), "--junit", str(out / "report.xml"), *extra]
        with open(out / f"node{i}.log", "a") as log:
            procs.append(nodes.start(i, command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT))
    return [p.wait(timeout=600) for p in procs]


def _log(out):
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(out.glob("*.log")))


@pytest.mark.slow
def test_torchrun_on_two_nodes_survives_the_death_of_rank_0_and_resumes(tmp_path):
    _need_nodes()
    once = tmp_path / "struck"
    env = _clean_env(COLLSPEC_FAULT="kill:0:3", COLLSPEC_FAULT_ONCE=str(once))
    with two_nodes.TwoNodes() as nodes:
        first = tmp_path / "first"
        first.mkdir()
        codes = _torchrun(nodes, first, ["--backend", FAULTY], env)
        assert once.exists() and codes != [0, 0], _log(first)
        partials = sorted(str(p) for p in first.glob("report.json.rank*.json"))
        assert len(partials) == 4, _log(first)
        merged = _collspec("report", "merge", *partials, "--json", str(first / "merged.json"), "--junit", str(first / "merged.xml"))
        assert merged.returncode == 1, merged.stdout + merged.stderr
        report = json.loads((first / "merged.json").read_text())
        statuses = [c["status"] for c in report["cases"]]
        assert statuses[:2] == ["pass", "pass"] and statuses[2] == "crash" and set(statuses[3:]) == {"not-run"}, statuses
        crash = next(v for v in report["violations"] if v["kind"] == "crash")
        assert {w["host"] for w in crash["where"]} == {"node-a"} and 0 in crash["ranks"], crash
        assert [(r["host"], r["local_rank"]) for r in report["ranks"]] == [("node-a", 0), ("node-a", 1), ("node-b", 0), ("node-b", 1)]

        second = tmp_path / "second"
        second.mkdir()
        codes = _torchrun(nodes, second, ["--backend", FAULTY, "--resume", str(first / "merged.json")], env)
        report = json.loads((second / "report.json").read_text())
    assert codes == [1, 1], _log(second)  # the crash of the first job stays in the report
    statuses = [c["status"] for c in report["cases"]]
    assert statuses[2] == "crash" and statuses.count("pass") == len(statuses) - 1, statuses
    assert report["stats"]["resumed_from"]["case"] == 3 and report["stats"]["detected"] == "torchrun"
    assert report["stats"]["loopback_only"] is False


@pytest.mark.slow
def test_mpirun_with_a_host_file_names_the_bad_node(tmp_path):
    _need_nodes()
    with two_nodes.TwoNodes() as nodes:
        hostfile = tmp_path / "hosts"
        hostfile.write_text("".join(f"{name} slots=2\n" for name in nodes.names))
        env = _clean_env(PATH=f"{BIN}:{os.environ['PATH']}", COLLSPEC_FAULT="corrupt:2:2")
        command = [str(BIN / "mpirun"), "--allow-run-as-root", "--hostfile", str(hostfile), "-n", "4",
                   "--mca", "plm_rsh_agent", nodes.agent,
                   str(BIN / "collspec"), "conform", "--launcher", "external", "--backend", FAULTY, *FILTER,
                   "--rendezvous", f"file:{tmp_path / 'rendezvous'}", "--timeout", "60",
                   "--json", str(tmp_path / "report.json"), "--junit", str(tmp_path / "report.xml")]
        with open(tmp_path / "mpirun.log", "w") as log:
            code = nodes.start(0, command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT).wait(timeout=600)
    text = (tmp_path / "mpirun.log").read_text(errors="replace")
    assert code == 1, text[-4000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stats"]["detected"] == "openmpi" and report["stats"]["rendezvous"].startswith("file:")
    statuses = [c["status"] for c in report["cases"]]
    assert statuses[1] == "fail" and statuses.count("pass") == len(statuses) - 1, statuses
    # the wrong sums are node-b's; ranks-disagree names both groups of ranks
    assert "ranks 2-3 on node-b (local 0-1): wrong-value (1 case)" in report["by_host"], report["by_host"]
    assert not any("node-a" in line and "wrong-value" in line for line in report["by_host"]), report["by_host"]
    assert "failures by host: ranks 2-3 on node-b (local 0-1): wrong-value (1 case)" in text
    suite = ElementTree.parse(tmp_path / "report.xml").getroot()
    failure = suite.find(".//failure")
    assert failure is not None and "on node-b (local 0-1)" in failure.get("message")
    assert len(list(tmp_path.glob("report.json.rank*.json"))) == 4


# -- Slurm ----------------------------------------------------------------------------------------

def _job_script() -> str:
    """The first Slurm job script of docs/cluster.md."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    return next(block for block in re.findall(r"```bash\n(.*?)```", text, re.S) if "#SBATCH" in block)


@pytest.mark.slow
def test_slurm_srun_sbatch_a_killed_rank_and_resume(tmp_path):
    reason = slurm.unavailable()
    if reason:
        pytest.skip(f"Slurm: {reason}")
    env = {"PATH": f"{BIN}:{os.environ['PATH']}"}
    with slurm.SlurmCluster() as cluster:
        ran = cluster.run(["srun", "-n", "4", str(BIN / "collspec"), "conform", "--backend", "gloo", "--world-size", "4",
                           *FILTER, "--json", str(tmp_path / "srun.json")], env=env, cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:] + cluster.logs()
        report = json.loads((tmp_path / "srun.json").read_text())
        assert report["ok"] and report["stats"]["detected"] == "slurm" and report["stats"]["pass"] == 13
        assert {r["host"] for r in report["ranks"]} == {slurm.NODE} and sorted(r["local_rank"] for r in report["ranks"]) == [0, 1, 2, 3]
        assert "conform gloo: ok" in ran.stdout

        (tmp_path / "conform.sbatch").write_text(_job_script())
        submitted = cluster.run(["sbatch", "--parsable", "--nodes=1", "--ntasks-per-node=4", f"--chdir={tmp_path}",
                                 str(tmp_path / "conform.sbatch"), *FILTER[1:]], env=env)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        assert cluster.wait_job(job) == "COMPLETED", (tmp_path / f"conform-{job}.out").read_text()[-3000:]
        report = json.loads((tmp_path / f"conform-{job}.json").read_text())
        assert report["ok"] and report["stats"]["pass"] == 13 and (tmp_path / f"conform-{job}.xml").exists()

        once = tmp_path / "struck"
        faulty = ["srun", "-n", "4", str(BIN / "collspec"), "conform", "--backend", FAULTY, *FILTER, "--timeout", "30",
                  "--json", str(tmp_path / "killed.json")]
        killed = cluster.run(faulty, env={**env, "COLLSPEC_FAULT": "kill:2:3", "COLLSPEC_FAULT_ONCE": str(once)}, cwd=tmp_path)
        assert killed.returncode != 0 and once.exists(), killed.stdout[-3000:] + killed.stderr[-3000:]
        report = json.loads((tmp_path / "killed.json").read_text())
        statuses = [c["status"] for c in report["cases"]]
        assert statuses[2] == "crash" and set(statuses[3:]) == {"not-run"}, statuses
        crash = next(v for v in report["violations"] if v["kind"] == "crash")
        assert crash["ranks"] == [2] and crash["where"] == [{"rank": 2, "host": slurm.NODE, "local_rank": 2}], crash
        assert f"[rank 2 on {slurm.NODE} (local 2)]" in crash["message"]

        resumed = cluster.run([*faulty[:-1], str(tmp_path / "resumed.json"), "--resume", str(tmp_path / "killed.json")],
                              env={**env, "COLLSPEC_FAULT": "kill:2:3", "COLLSPEC_FAULT_ONCE": str(once)}, cwd=tmp_path)
    assert resumed.returncode == 1, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    report = json.loads((tmp_path / "resumed.json").read_text())
    statuses = [c["status"] for c in report["cases"]]
    assert statuses[2] == "crash" and statuses.count("pass") == len(statuses) - 1, statuses
    assert report["stats"]["resumed_from"]["case"] == 3
