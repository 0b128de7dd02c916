"""A one-node Slurm cluster for the tests: Debian's slurm-wlm and munge,
configured in a temporary directory, started and stopped by the test.

Everything runs in a private network namespace with loopback and a veth
pair of its own only (slurmctld and slurmd listen on every interface of the
namespace they are in, so that is the way to keep them off the network),
entered with nsenter so that /sys (cgroups, which slurmd reads) stays, with the
node's own host name (``cs-slurm``, 127.0.0.1 in its /etc/hosts). munged
runs with a key generated for the test and a socket in the directory.

``SlurmCluster()`` is a context manager; ``cluster.run(["srun", ...])``
runs a client command on the node; :func:`unavailable` says why the
cluster cannot be made here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid

NODE = "cs-slurm"
TOOLS = ("slurmctld", "slurmd", "srun", "sbatch", "scontrol", "munged", "mungekey", "ip", "unshare", "nsenter")

CONF = """ClusterName=collspec
SlurmctldHost={node}(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
NodeName={node} NodeAddr=127.0.0.1 CPUs=8 RealMemory=4000 State=UNKNOWN
PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
"""


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (slurmd, munged, a network namespace)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge iproute2)"
    return None


class SlurmCluster:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="collspec-slurm-")
        self.namespace = f"cs-slurm-{uuid.uuid4().hex[:6]}"
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.daemons: list[subprocess.Popen] = []

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` on the node: its network namespace, host name and /etc/hosts."""
        script = 'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"'
        return ["nsenter", f"--net=/run/netns/{self.namespace}", "unshare", "--uts", "--mount", "--propagation", "private",
                "sh", "-c", script, os.path.join(self.dir, "hosts"), NODE, *command]

    def env(self, **extra) -> dict:
        return {**os.environ, "SLURM_CONF": self.conf, **extra}

    def __enter__(self) -> "SlurmCluster":
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(self.dir, sub))
        with open(os.path.join(self.dir, "hosts"), "w") as handle:
            handle.write(f"127.0.0.1 localhost {NODE}\n")
        with open(self.conf, "w") as handle:
            handle.write(CONF.format(node=NODE, dir=self.dir))
        subprocess.run(["ip", "netns", "add", self.namespace], check=True, capture_output=True)
        for command in (["link", "set", "lo", "up"], ["link", "add", "csv0", "type", "veth", "peer", "name", "csv1"],
                        ["addr", "add", "10.233.0.1/30", "dev", "csv0"], ["link", "set", "csv0", "up"],
                        ["link", "set", "csv1", "up"]):
            # getaddrinfo(AI_ADDRCONFIG), which the daemons call to listen, wants an address besides loopback's:
            # a veth pair with both ends inside the namespace, reachable from nowhere else
            subprocess.run(["ip", "-n", self.namespace, *command], check=True, capture_output=True)
        key = os.path.join(self.dir, "munge.key")
        subprocess.run(["mungekey", "--create", "--keyfile", key], check=True, capture_output=True)
        os.chmod(key, 0o600)
        self.daemons.append(subprocess.Popen(
            ["munged", "--foreground", "--force", "--key-file", key, "--socket", os.path.join(self.dir, "munge.sock"),
             "--pid-file", os.path.join(self.dir, "munged.pid"), "--log-file", os.path.join(self.dir, "munged.log"),
             "--seed-file", os.path.join(self.dir, "munge.seed")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        self._wait(lambda: os.path.exists(os.path.join(self.dir, "munge.sock")), "munged")
        for daemon in (["slurmctld", "-D", "-i", "-f", self.conf], ["slurmd", "-D", "-f", self.conf, "-N", NODE]):
            log = open(os.path.join(self.dir, daemon[0] + ".out"), "wb")
            self.daemons.append(subprocess.Popen(self.wrap(daemon), env=self.env(), stdout=log, stderr=log,
                                                 start_new_session=True))
        self._wait(self._idle, "the node to be idle")

    def _idle(self) -> bool:
        shown = self.run(["scontrol", "show", "node", NODE], timeout=30)
        return shown.returncode == 0 and ("State=IDLE" in shown.stdout or "State=MIXED" in shown.stdout)

    def _wait(self, ready, what: str, limit: float = 90.0) -> None:
        deadline = time.monotonic() + limit
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurm test cluster: gave up waiting for {what}; logs in {self.dir}: {self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munged.log"):
            try:
                with open(os.path.join(self.dir, name), errors="replace") as handle:
                    out.append(f"--- {name}\n" + "".join(handle.readlines()[-15:]))
            except OSError:
                pass
        return "\n".join(out)

    def run(self, command: list[str], timeout: float = 600, **extra) -> subprocess.CompletedProcess:
        """A client command (srun, sbatch, scontrol) on the node; output as text."""
        return subprocess.run(self.wrap(command), env=self.env(**extra.pop("env", {})), capture_output=True, text=True,
                              timeout=timeout, **extra)

    def wait_job(self, job: str, limit: float = 600) -> str:
        """Wait for batch job ``job`` to end; returns its final state."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            shown = self.run(["scontrol", "show", "job", job], timeout=30).stdout
            state = next((w.split("=", 1)[1] for w in shown.split() if w.startswith("JobState=")), "")
            if state and state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return state
            time.sleep(1)
        raise RuntimeError(f"slurm job {job} did not end within {limit:.0f} s")

    def __exit__(self, *_) -> None:
        for daemon in reversed(self.daemons):
            try:
                os.killpg(daemon.pid, 15)
            except ProcessLookupError:
                continue
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, 9)
                daemon.wait()
        for pid in subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "delete", self.namespace], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
