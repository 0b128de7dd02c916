"""Run every benchmark script in bench/ (``make bench``), one after another.

Each ``bench/*.py`` other than this one is a standalone script that prints
its figures and writes ``bench/results/<name>.json``; its exit status says
whether it met its target. This runner reports each script's status and
exits 1 if any failed.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    scripts = sorted(p for p in glob.glob(os.path.join(HERE, "*.py")) if os.path.basename(p) != "run_all.py")
    failed = []
    for script in scripts:
        name = os.path.basename(script)
        print(f"== {name}", flush=True)
        began = time.monotonic()
        code = subprocess.run([sys.executable, script]).returncode
        print(f"== {name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {time.monotonic() - began:.0f} s", flush=True)
        if code:
            failed.append(name)
    print(f"bench: {len(scripts) - len(failed)} of {len(scripts)} scripts met their targets")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
