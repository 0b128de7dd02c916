"""Two "nodes" on one machine, for the multi-node tests: two network
namespaces joined by a veth pair (real TCP between 10.231.N.1 and
10.231.N.2), each process in them with its own UTS host name and an
/etc/hosts that names both nodes (a private mount namespace).

``TwoNodes()`` sets them up (root only; :func:`unavailable` says why not)
and tears them down on exit. ``nodes.run(0, cmd)`` runs a command on the
first node; ``nodes.agent`` is a script that Open MPI's
``--mca plm_rsh_agent`` calls instead of ssh (``agent HOST COMMAND...``),
which enters HOST's namespaces and runs COMMAND there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid

WRAP = """#!/bin/sh
# wrap NETNS HOSTNAME HOSTS CMD...: run CMD in the node's network namespace,
# with its own UTS host name and /etc/hosts
ns=$1; name=$2; hosts=$3; shift 3
exec ip netns exec "$ns" unshare --uts --mount --propagation private sh -c \
  'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"' "$hosts" "$name" "$@"
"""

AGENT = """#!/bin/sh
# Open MPI's plm_rsh_agent: AGENT HOST COMMAND (a shell command line, as ssh would run it)
host=$1; shift
case "$host" in
{cases}
  *) echo "agent: unknown host $host" >&2; exit 255;;
esac
exec {wrap} "$ns" "$host" {hosts} sh -c "$*"
"""


def unavailable() -> str | None:
    """Why two namespaced nodes cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs)"
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 util-linux)"
    probe = f"cs-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


class TwoNodes:
    """Context manager: ``names`` are the host names, ``addresses`` their IPv4 addresses."""

    def __init__(self, names=("node-a", "node-b")):
        tag = uuid.uuid4().hex[:6]
        subnet = 200 + int(tag, 16) % 50
        self.names = list(names)
        self.namespaces = [f"cs-{tag}-{i}" for i in range(2)]
        self.links = [f"cs{tag}{i}" for i in range(2)]
        self.addresses = [f"10.231.{subnet}.{i + 1}" for i in range(2)]
        self.dir = tempfile.mkdtemp(prefix="collspec-nodes-")
        self.hosts = os.path.join(self.dir, "hosts")
        self.wrap = os.path.join(self.dir, "wrap")
        self.agent = os.path.join(self.dir, "agent")

    def __enter__(self) -> "TwoNodes":
        try:
            for ns in self.namespaces:
                self._ip("netns", "add", ns)
            self._ip("link", "add", self.links[0], "type", "veth", "peer", "name", self.links[1])
            for ns, link, address in zip(self.namespaces, self.links, self.addresses):
                self._ip("link", "set", link, "netns", ns)
                self._ip("-n", ns, "addr", "add", f"{address}/24", "dev", link)
                self._ip("-n", ns, "link", "set", link, "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        with open(self.hosts, "w") as handle:
            handle.write("127.0.0.1 localhost\n")
            handle.writelines(f"{a} {n}\n" for a, n in zip(self.addresses, self.names))
        with open(self.wrap, "w") as handle:
            handle.write(WRAP)
        cases = "\n".join(f"  {n}) ns={ns};;" for n, ns in zip(self.names, self.namespaces))
        with open(self.agent, "w") as handle:
            handle.write(AGENT.format(cases=cases, wrap=self.wrap, hosts=self.hosts))
        os.chmod(self.wrap, 0o755)
        os.chmod(self.agent, 0o755)
        return self

    def __exit__(self, *_) -> None:
        for ns in self.namespaces:  # deleting a namespace deletes its end of the veth pair, and the pair with it
            for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

    def command(self, node: int, command: list[str]) -> list[str]:
        """``command`` as run on node ``node`` (0 or 1)."""
        return [self.wrap, self.namespaces[node], self.names[node], self.hosts, *command]

    def start(self, node: int, command: list[str], **popen) -> subprocess.Popen:
        return subprocess.Popen(self.command(node, command), **popen)
