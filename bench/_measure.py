"""Shared by the bench scripts: run a command in a fresh process and measure
its wall time, CPU time (user + system) and peak resident memory.

The CPU time is printed beside the wall time because the benchmark machine
is shared: under load the wall time grows while the CPU time stays close to
what the command needs.
"""

from __future__ import annotations

import os
import platform
import time


def command_run(command: list[str], expect_exit: int | None = 0) -> dict:
    """One run of ``command`` (stdout discarded): wall and CPU seconds, peak
    RSS in MiB, exit code. Raises SystemExit when the exit code is not
    ``expect_exit`` (None accepts any).

    The command runs with Python's bytecode cache on, as after a ``pip
    install`` (which compiles every module): an environment that sets
    PYTHONDONTWRITEBYTECODE (this machine's does) would otherwise make every
    start recompile collspec's sources, about 0.1 s that no installed copy
    pays. The first run writes the cache; the medians are over several runs."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: exec so that the peak RSS is the command's alone
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        os.execve(command[0], command, env)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if expect_exit is not None and code != expect_exit:
        raise SystemExit(f"{' '.join(command)} exited {code}, expected {expect_exit}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024, "exit": code}


def machine_line() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load average {load:.1f} (shared: timings include other processes)"
