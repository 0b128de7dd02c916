"""Run a command with a /dev/shm and a /tmp of its own, then say what is left in them.

``python tests/private_shm.py KEEP CMD...`` runs CMD in a mount namespace of its
own where /dev/shm and /tmp are fresh, empty tmpfs mounts (the folder KEEP,
under /tmp, stays visible at its own path, for the test's files, and so does
this checkout with its environment when it lies under /tmp). It forwards
SIGTERM, SIGHUP and SIGINT to CMD, waits for it, and prints one last line on
stderr: ``PRIVATE_SHM {"code": ..., "pid": ..., "left": [...]}`` with CMD's exit status, its process id and
every entry left in /dev/shm and /tmp (``tmp/NAME``) but KEEP's. So a test
sees exactly what CMD created, however many other programs share the machine.

:func:`available` says whether namespaces may be made here.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys

MARK = "PRIVATE_SHM "
#: the checkout (and its .venv): kept visible when it lies under /tmp
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _unshare() -> list[str]:
    return ["unshare", "--mount", "--propagation", "private"] + ([] if os.geteuid() == 0 else ["--map-root-user"])


def available() -> bool:
    try:
        return subprocess.run([*_unshare(), "mount", "-t", "tmpfs", "tmpfs", "/dev/shm"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def command(keep: str, argv: list[str]) -> list[str]:
    """The command line that runs ``argv`` this way."""
    return ["env", "COLLSPEC_PRIVATE_SHM=1", *_unshare(), sys.executable, os.path.abspath(__file__), keep, *argv]


def _mount(source: str, target: str, kind: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), target.encode(), kind.encode() if kind else None, flags, data.encode() if data else None):
        raise OSError(ctypes.get_errno(), f"mount {source} on {target}")


def _under_tmp(path: str) -> bool:
    return os.path.realpath(path).startswith("/tmp" + os.sep)


def _same_namespace_as_parent() -> bool:
    try:
        return os.readlink("/proc/self/ns/mnt") == os.readlink(f"/proc/{os.getppid()}/ns/mnt")
    except OSError:
        return True  # cannot tell: refuse


def _inside(keep: str, argv: list[str]) -> int:
    # never on the machine's own /dev/shm and /tmp: only in a mount namespace of its own
    if os.environ.get("COLLSPEC_PRIVATE_SHM") != "1" or _same_namespace_as_parent():
        raise SystemExit("private_shm: run me through command(), in a mount namespace of my own")
    kept = [keep] + [path for path in (CHECKOUT, sys.prefix) if _under_tmp(path)]
    held = [(path, os.open(path, os.O_RDONLY | os.O_DIRECTORY)) for path in kept]
    for target in ("/dev/shm", "/tmp"):
        _mount("tmpfs", target, "tmpfs", 0, "mode=1777")
    for path, handle in held:
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{handle}", path, None, 4096, None)  # MS_BIND: the folder, as it was
        os.close(handle)
    child = subprocess.Popen(argv, start_new_session=True)
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(number, lambda received, _frame: child.send_signal(received))
    code = child.wait()
    tops = {os.path.relpath(path, "/tmp").split(os.sep)[0] for path in kept}
    left = sorted(os.listdir("/dev/shm")) + [f"tmp/{name}" for name in sorted(os.listdir("/tmp")) if name not in tops]
    print(MARK + json.dumps({"code": code, "pid": child.pid, "left": left}), file=sys.stderr, flush=True)
    return 0


def result(stderr: str) -> dict:
    """The last line :func:`_inside` printed."""
    lines = [line for line in stderr.splitlines() if line.startswith(MARK)]
    assert lines, f"no {MARK.strip()} line in:\n{stderr[-2000:]}"
    return json.loads(lines[-1][len(MARK):])


if __name__ == "__main__":
    sys.exit(_inside(sys.argv[1], sys.argv[2:]))
