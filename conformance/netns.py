"""A private network namespace whose only interface is loopback.

Open MPI's launcher (PRRTE) and torchrun's store listen on every interface
and cannot be told otherwise, so the ``mpiexec`` and ``torchrun`` launchers
run inside a fresh network namespace (``unshare --net``) where loopback is
all there is. ``python -m collspec.conformance.netns CMD...`` is what runs
inside: it brings ``lo`` up and executes CMD. Where namespaces are not
allowed (:func:`available`), the launchers run without one and the run's
report says so.
"""

from __future__ import annotations

import fcntl
import functools
import os
import socket
import struct
import subprocess
import sys

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _unshare() -> list[str]:
    return ["unshare", "--net"] + ([] if os.geteuid() == 0 else ["--map-root-user"])


@functools.cache
def available() -> bool:
    """Whether this process may create a network namespace here."""
    try:
        return subprocess.run([*_unshare(), "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def wrap(command: list[str]) -> list[str]:
    """``command``, run in a fresh loopback-only network namespace (check :func:`available` first)."""
    return [*_unshare(), sys.executable, "-m", "collspec.conformance.netns", *command]


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def main(argv: list[str]) -> None:
    loopback_up()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
