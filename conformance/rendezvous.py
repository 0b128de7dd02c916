"""The job's store: where rank 0 serves it and how the others reach it.

:func:`connect` makes the torch ``TCPStore`` of a job (:mod:`.external`):
rank 0 serves it on the rendezvous address only (a socket it binds itself
and hands to the store), the others connect; under torchrun every rank
connects to the store torchrun's agent already serves. With ``--rendezvous
file:PATH`` rank 0 binds a free port and writes ``ADDRESS:PORT JOB`` to
PATH (atomically), and the others read it, skipping a file another job
left. :func:`point_interfaces` points gloo and NCCL's bootstrap at the
interface that reaches the store unless ``GLOO_SOCKET_IFNAME`` /
``NCCL_SOCKET_IFNAME`` are set.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta

from ..spec.errors import CollspecError
from . import cluster_env


def connect(place: cluster_env.Placement, timeout: float):
    """The job's store: rank 0 serves it (on the rendezvous address only), the others connect."""
    import torch.distributed as dist

    wait = timedelta(seconds=timeout)
    if place.rendezvous.startswith("file:"):
        return _file_rendezvous(place, place.rendezvous[5:], wait)
    if place.rank != 0 or place.agent_store:
        return dist.TCPStore(place.address, place.port, place.world, is_master=False, timeout=wait)
    listener = _listen(place.address, place.port)  # the store owns the socket from here on
    return dist.TCPStore(place.address, place.port, place.world, is_master=True, timeout=wait,
                         wait_for_workers=False, master_listen_fd=listener.detach())


def _listen(address: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((socket.gethostbyname(address), port))
    except OSError as error:
        listener.close()
        raise CollspecError(f"rank 0 cannot serve the job's store at {address}:{port} ({error.strerror}); "
                            "give --master-addr (an address of rank 0's host) or --master-port") from None
    listener.listen(1024)
    return listener


def _file_rendezvous(place: cluster_env.Placement, path: str, wait: timedelta):
    """Rank 0 binds a free port and writes ``ADDRESS:PORT JOB`` to ``path``; the others read it."""
    import torch.distributed as dist

    if place.rank == 0:
        address = place.address or ("127.0.0.1" if place.one_node else _own_address())
        listener = _listen(address, place.port or 0)
        port = listener.getsockname()[1]
        store = dist.TCPStore(address, port, place.world, is_master=True, timeout=wait, wait_for_workers=False,
                              master_listen_fd=listener.detach())
        from ..report import write_text

        write_text(f"{address}:{port} {place.job}\n", path)
        return store
    deadline = time.monotonic() + wait.total_seconds()
    while time.monotonic() < deadline:
        try:
            with open(path) as handle:
                text = handle.read().split()
        except OSError:
            text = []
        if len(text) == 2 and text[1] == place.job:
            address, port = text[0].rsplit(":", 1)
            try:
                return dist.TCPStore(address, int(port), place.world, is_master=False, timeout=wait)
            except (RuntimeError, ValueError):
                pass  # a file of an earlier job with the same name: wait for this job's
        time.sleep(0.2)
    raise CollspecError(f"--rendezvous file:{path}: rank 0 did not write its address within {wait.total_seconds():.0f} s "
                        "(is the path shared by every rank?)")


def _own_address() -> str:
    """This host's address for the others to reach: GLOO_SOCKET_IFNAME's, else the host name's."""
    name = os.environ.get("GLOO_SOCKET_IFNAME")
    if name:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            raw = fcntl.ioctl(sock, 0x8915, struct.pack("256s", name.encode()[:15]))
            return socket.inet_ntoa(raw[20:24])
    return socket.gethostbyname(socket.gethostname())


def point_interfaces(address: str) -> None:
    """Point gloo (and NCCL's bootstrap) at the interface that reaches the store, unless told."""
    try:
        local = cluster_env.local_address_towards(address)
    except OSError:
        return
    name = cluster_env.interface_of(local) or ("lo" if local.startswith("127.") else None)
    if name:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", name)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", name)


def store_address(store) -> str:
    host = getattr(store, "host", None)
    return host if isinstance(host, str) and host else "127.0.0.1"


def client_factory(store, place: cluster_env.Placement):
    import torch.distributed as dist

    host, port = getattr(store, "host", place.address), getattr(store, "port", place.port)
    return lambda: dist.TCPStore(host, port, place.world, is_master=False, timeout=timedelta(seconds=30))
