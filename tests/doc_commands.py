"""Run the shell commands of a Markdown page as its reader would.

Rule (the only one): every line of every ``sh`` block (a line ending in
``\\`` continues on the next) is run with ``bash -c``, with the
environment's ``bin`` folder (where ``make install`` put ``collspec`` and
``pytest``) first on PATH, in a fresh folder that holds the files the page
says to save ("Save as ``NAME``:" right before a block) and a link to the
checkout's ``models/`` (the bundled corpora, named by path as in the
checkout). The lines of one block run in order in one folder. Each must
exit 0. Not run, each for its stated reason:

- lines starting with ``make`` or ``source``: the setup line (the tests run
  inside the environment it creates) and the project's own targets
  (``make test`` is this suite; ``verify``, ``docs`` and ``bench`` take
  minutes and run in CI or by hand);
- ``pip install`` lines: they change the environment the tests run in;
- ``collspec verify``: what ``make verify`` runs;
- lines that need GPUs (``--backend nccl``, ``--device cuda``) where torch
  sees fewer than ``--world-size``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.M | re.S)
SAVE_AS = re.compile(r"Save as `([\w.-]+)`:\s*$")


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, dedented text, the line before the block) of every fenced block."""
    import textwrap

    out = []
    for match in BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        out.append((match.group(1), textwrap.dedent(match.group(2)), before))
    return out


def saved_files(text: str) -> dict[str, str]:
    """The files the page asks the reader to save: name -> text."""
    return {m.group(1): body for _, body, before in blocks(text) if (m := SAVE_AS.search(before))}


def sh_blocks(text: str) -> list[list[str]]:
    """The commands of each ``sh`` block, in order, continuation lines joined."""
    out = []
    for language, body, _ in blocks(text):
        if language == "sh":
            joined = re.sub(r"\\\n\s*", "", body)
            out.append([line.strip() for line in joined.splitlines() if line.strip()])
    return out


def not_run(command: str) -> str | None:
    """None to run the command, else why it is not run."""
    if command.startswith(("make ", "source ")):
        return "setup line or project target"
    if re.search(r"\bpip install\b", command):
        return "changes the environment"
    if command.startswith("collspec verify"):
        return "what make verify runs"
    if "--backend nccl" in command or "--device cuda" in command:
        import torch

        wanted = int(m.group(1)) if (m := re.search(r"--world-size (\d+)", command)) else 4
        if torch.cuda.device_count() < wanted:
            return f"needs {wanted} CUDA GPUs, torch sees {torch.cuda.device_count()}"
    return None


def run_block(text: str, block: list[str], folder: Path) -> tuple[list[str], list[str]]:
    """Run one block's commands in ``folder``; (commands run, 'command: reason' not run).
    Raises AssertionError naming the first command that did not exit 0."""
    for name, body in saved_files(text).items():
        (folder / name).write_text(body)
    if not (folder / "models").exists():
        (folder / "models").symlink_to(ROOT / "models")
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    ran, skipped = [], []
    for command in block:
        reason = not_run(command)
        if reason:
            skipped.append(f"{command}: {reason}")
            continue
        result = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=280)
        assert result.returncode == 0, f"{command}\nexit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        if "--collspec-backend" in command:  # the one conformance test, nothing else of the folder's
            assert re.search(r"\b1 passed\b", result.stdout) and " error" not in result.stdout.splitlines()[-1], result.stdout[-2000:]
        ran.append(command)
    return ran, skipped
