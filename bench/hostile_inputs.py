"""Time collspec on the hostile inputs of tests/hostile.py: each case runs
as its own ``collspec`` process; the table gives its exit status, wall and
CPU seconds and peak memory, and the last line of its stderr.

    .venv/bin/python bench/hostile_inputs.py [--timeout 60] [NAME-SUBSTRING ...]

A case is killed after ``--timeout`` seconds (status "killed"). Every
status must be one the case allows (tests/hostile.py), and none may be 3
or a traceback; the script exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from hostile import CASES  # noqa: E402

COLLSPEC = os.path.join(os.path.dirname(sys.executable), "collspec")


def run_case(case, folder: str, timeout: float) -> dict:
    path = os.path.join(folder, case.name + case.suffix)
    with open(path, "wb") as handle:
        handle.write(case.make())
    size = os.path.getsize(path)
    argv = [COLLSPEC, *case.command, path]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors)
        status = None
        while status is None:
            pid, code, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(code)
            elif time.perf_counter() - started > timeout:
                process.kill()
                _, _, usage = os.wait4(process.pid, 0)
                status = "killed"
            else:
                time.sleep(0.02)
        process.returncode = 0  # reaped above
        wall = time.perf_counter() - started
        errors.seek(0)
        err = errors.read()
    os.remove(path)
    last = (err.decode(errors="replace").strip().splitlines() or [""])[-1]
    return {"case": case, "bytes": size, "status": status, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "peak_mb": usage.ru_maxrss / 1024, "message": last, "traceback": b"Traceback" in err}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    chosen = [c for c in CASES if not args.names or any(n in c.name for n in args.names)]
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'case':<36} {'command':<17} {'MB':>7} {'exit':>6} {'wall s':>7} {'CPU s':>7} {'peak MB':>8}  message")
    bad = 0
    with tempfile.TemporaryDirectory() as folder:
        for case in chosen:
            row = run_case(case, folder, args.timeout)
            cpu, peak = row["cpu"], row["peak_mb"]
            ok = row["status"] in case.statuses and not row["traceback"]
            bad += not ok
            print(
                f"{case.name:<36} {' '.join(case.command):<17} {row['bytes'] / 1e6:7.1f} {row['status']!s:>6} {row['wall']:7.2f} {cpu:7.2f} {peak:8.0f}  "
                f"{'' if ok else 'WRONG: '}{row['message'][:110]}",
                flush=True,
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
