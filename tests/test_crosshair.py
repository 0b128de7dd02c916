"""CrossHair checks the contracts of the spec's list-based kernel.

Budget: PER_CONDITION_SECONDS of CPU per postcondition (17 of them: about
35 s on 2 cores). CrossHair explores execution paths symbolically; "Not
confirmed" means no counterexample exists on the paths it reached in the
budget, which for these small, loop-bounded functions covers the inputs the
preconditions allow (up to 4 ranks of 4 elements). A planted off-by-one
shows the check can fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PER_CONDITION_SECONDS = 2
CROSSHAIR = Path(sys.executable).with_name("crosshair")
HERE = Path(__file__).parent


def crosshair(*targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CROSSHAIR), "check", "--analysis_kind=PEP316", f"--per_condition_timeout={PER_CONDITION_SECONDS}", "--report_all", *targets],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE.parent,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def test_kernel_contracts_hold_within_the_budget():
    result = crosshair("collspec.spec.kernel")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    # every postcondition was analysed, none refuted
    assert len(lines) == 17, result.stdout
    assert all(re.search(r"info: (Not confirmed|Confirmed)", line) for line in lines), result.stdout


def test_crosshair_finds_a_planted_off_by_one():
    result = crosshair(str(HERE / "crosshair_planted.py"))
    assert result.returncode == 1, result.stdout + result.stderr
    # line 14 is "post: __return__[0] == sum(counts[:index])"
    assert re.search(r"crosshair_planted\.py:14: error: false when calling block_bounds\(", result.stdout), result.stdout
