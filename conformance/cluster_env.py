"""Where this process is in a job an existing launcher started.

``collspec conform --launcher external`` runs as one rank of a job that
``srun``, ``mpirun``/``mpiexec`` (Open MPI, MPICH's or Intel MPI's Hydra)
or ``torchrun`` started. :func:`placement` reads the rank, the world size,
the local rank and the rendezvous address from the launcher's variables, in
this order (the first that gives a rank wins; explicit flags beat them all):

==========  =====================================================================
launcher    variables
==========  =====================================================================
torchrun    ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
            ``MASTER_ADDR``, ``MASTER_PORT`` (``TORCHELASTIC_RUN_ID`` names it)
openmpi     ``OMPI_COMM_WORLD_RANK``, ``_SIZE``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``
hydra       ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``
            (MPICH and Intel MPI)
pmix        ``PMIX_RANK`` (the size from ``--world-size``)
slurm       ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``,
            ``SLURM_STEP_NUM_NODES``, ``SLURM_STEP_NODELIST``, ``SLURM_JOB_ID``,
            ``SLURM_STEP_ID``
==========  =====================================================================

The rendezvous (where rank 0 serves the job's store), first that applies:

1. ``--rendezvous file:PATH``: rank 0 writes ``ADDRESS:PORT JOB`` to PATH
   (a path every rank reaches); the others wait for it;
2. ``--master-addr`` or ``MASTER_ADDR`` (port: ``--master-port``,
   ``MASTER_PORT``, else derived from the job id);
3. every rank on one node: ``127.0.0.1`` and a port derived from the job id;
4. Slurm: the first host of the step's node list (rank 0 runs there under
   the block and cyclic distributions), a port derived from the job id.

Otherwise (``mpirun`` across nodes with neither) it is bad input, with
what to add. The derived port is ``20000 + crc32(job) % 20000``, the same on
every rank of a job and different between jobs and steps.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import struct
import zlib
from dataclasses import asdict, dataclass

from ..spec.errors import CollspecError

#: (launcher, rank, size, local rank, local size) variables, in the order they are tried.
SOURCES = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("pmix", "PMIX_RANK", None, None, None),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
)
#: Variables that name the job (the first set one), for a port every rank derives alike.
JOB_VARIABLES = ("TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "PMI_KVSNAME")


@dataclass(frozen=True)
class Placement:
    """This rank's place in the job and where the job's store is.

    ``launcher`` is who started it (a :data:`SOURCES` name, or ``flags``);
    ``rendezvous`` says how the address was found; ``address`` is None for a
    file rendezvous until rank 0 has written it.
    """

    rank: int
    world: int
    local_rank: int
    host: str
    launcher: str
    address: str | None
    port: int | None
    rendezvous: str
    job: str
    one_node: bool
    agent_store: bool = False  # torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT

    def to_json(self) -> dict:
        return asdict(self)


def detect(env=None) -> str | None:
    """The launcher whose variables are set, or None."""
    env = os.environ if env is None else env
    for name, rank, *_ in SOURCES:
        if name == "slurm" and not (env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")):
            continue  # a batch script itself (one process) is no rank of a step: srun starts the ranks
        if env.get(rank, "").strip():
            return name
    return None


def _int(env, name: str | None, what: str) -> int | None:
    if name is None or not env.get(name, "").strip():
        return None
    try:
        return int(env[name])
    except ValueError:
        raise CollspecError(f"{name}={env[name]!r} is not a {what}") from None


def placement(rank=None, world=None, local_rank=None, master_addr=None, master_port=None, rendezvous=None,
              env=None) -> Placement:
    """This process's :class:`Placement`, from the flags given (None: not given) and the launcher's variables."""
    env = os.environ if env is None else env
    launcher = detect(env)
    source = next((s for s in SOURCES if s[0] == launcher), (None, None, None, None, None))
    _, rank_var, size_var, local_var, local_size_var = source
    rank = rank if rank is not None else _int(env, rank_var, "rank")
    world = world if world is not None else _int(env, size_var, "world size")
    local_rank = local_rank if local_rank is not None else _int(env, local_var, "local rank")
    if rank is None or world is None:
        raise CollspecError("--launcher external: no launcher variables found (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                            "RANK...); start it with srun, mpirun or torchrun, or give --rank and --world-size")
    if not 0 <= rank < world:
        raise CollspecError(f"rank {rank} is not within a world of {world} ranks")
    local_size = _int(env, local_size_var, "local size")
    nodes = _int(env, "SLURM_STEP_NUM_NODES", "node count") if launcher == "slurm" else None
    one_node = (local_size is not None and local_size == world) or nodes == 1
    job = _job(env, launcher)
    host = socket.gethostname()
    port = master_port if master_port is not None else _int(env, "MASTER_PORT", "port")
    agent = launcher == "torchrun" and env.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and master_addr is None
    common = dict(rank=rank, world=world, local_rank=local_rank if local_rank is not None else 0, host=host,
                  launcher="flags" if launcher is None else launcher, job=job, one_node=one_node)
    if rendezvous is not None:
        kind, _, path = rendezvous.partition(":")
        if kind != "file" or not path:
            raise CollspecError(f"--rendezvous {rendezvous}: write file:PATH (a path every rank reaches)")
        return Placement(**common, address=master_addr, port=port, rendezvous=f"file:{os.path.abspath(path)}")
    address = master_addr or env.get("MASTER_ADDR") or None
    if address:
        how = "--master-addr" if master_addr else "MASTER_ADDR"
        return Placement(**common, address=address, port=port or derived_port(job), rendezvous=how, agent_store=agent)
    if one_node or world == 1:
        return Placement(**common, address="127.0.0.1", port=port or derived_port(job), rendezvous="one node: 127.0.0.1")
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    if launcher == "slurm" and nodelist:
        first = expand_hostlist(nodelist)[0]
        return Placement(**common, address=first, port=port or derived_port(job), rendezvous=f"slurm node list: {first}")
    raise CollspecError(f"--launcher external ({common['launcher']}): the ranks span nodes and rank 0's address is unknown; "
                        "give --master-addr HOST (rank 0's) or --rendezvous file:PATH (a path every rank reaches)")


def _job(env, launcher: str | None) -> str:
    if launcher == "slurm" or (launcher is None and env.get("SLURM_JOB_ID")):
        return f"slurm:{env.get('SLURM_JOB_ID', '')}.{env.get('SLURM_STEP_ID', '')}"
    for name in JOB_VARIABLES:
        if env.get(name):
            return f"{name}:{env[name]}"
    # the launcher's daemon on this node (prted, hydra's proxy, srun's stepd) is every local rank's parent
    return f"parent:{os.getppid()}"


def derived_port(job: str) -> int:
    """The store's port for a job: the same on every rank, different between jobs.

    >>> derived_port("slurm:42.0") == derived_port("slurm:42.0") != derived_port("slurm:42.1")
    True
    """
    return 20000 + zlib.crc32(job.encode()) % 20000


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list, expanded in order.

    >>> expand_hostlist("gpu[01-03,07],login,b[8-9]x")
    ['gpu01', 'gpu02', 'gpu03', 'gpu07', 'login', 'b8x', 'b9x']
    """
    hosts = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if match is None:
            hosts.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            for number in range(int(low), int(high or low) + 1):
                rest = expand_hostlist(suffix) if "[" in suffix else [suffix]
                hosts.extend(f"{prefix}{number:0{len(low)}d}{tail}" for tail in rest)
    return hosts


def local_address_towards(address: str) -> str:
    """The address of this host that packets to ``address`` leave from (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((socket.gethostbyname(address), 9))
        return probe.getsockname()[0]


def interface_of(address: str) -> str | None:
    """The name of the interface that holds IPv4 ``address``, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(sock, 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == address:
                return name
    return None


def is_local(address: str) -> bool:
    """Whether ``address`` (a name or IPv4 address) is one of this host's."""
    try:
        resolved = socket.gethostbyname(address)
    except OSError:
        return False
    return resolved.startswith("127.") or interface_of(resolved) is not None
