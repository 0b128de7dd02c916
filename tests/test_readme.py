"""The README and the usage pages under docs/: every command runs, exactly
as written, after the README's own setup line (the rule of what is run and
what is not, and why, is in tests/doc_commands.py), every link resolves,
and the README stays short."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from doc_commands import ROOT, blocks, run_block, saved_files, sh_blocks

README = ROOT / "README.md"
#: usage pages whose commands run here (docs/install.md installs, so it is not run)
PAGES = ("README.md", "docs/schedule-format.md", "docs/backends.md", "docs/corpora.md", "docs/gpu.md")
SLOW = ("conform", "pytest ")


def params():
    out = []
    for page in PAGES:
        for k, block in enumerate(sh_blocks((ROOT / page).read_text())):
            marks = [pytest.mark.slow] if any(s in c for c in block for s in SLOW) else []
            out.append(pytest.param(page, block, marks=marks, id=f"{page}:{k}:{block[0].split('#')[0].strip()}"))
    return out


@pytest.mark.parametrize("page, block", params())
def test_page_commands_run(page, block, tmp_path):
    ran, skipped = run_block((ROOT / page).read_text(), block, tmp_path)
    if not ran:
        pytest.skip("; ".join(skipped))


def test_the_readme_has_its_parts():
    text = README.read_text()
    first = blocks(text)[0]
    assert first[0] == "sh" and "make install" in first[1] and "source .venv/bin/activate" in first[1]
    assert set(saved_files(text)) == {"ring2.json", "my_kernels.py"}
    assert len(text.split()) < 1300
    for heading in ("## Getting started", "## Check a schedule file", "## Prove, explain, cost", "## Conform a backend",
                    "## Read the reference", "## Exit status", "## Development"):
        assert heading in text


def test_the_setup_line_is_the_only_make_install():
    setup = [c for block in sh_blocks(README.read_text()) for c in block if c.startswith(("make install", "source"))]
    assert [c.split("#")[0].strip() for c in setup] == ["make install", "source .venv/bin/activate"]


def test_the_readmes_broken_example_is_reported(tmp_path):
    """'Change the first "reduce" to "copy" and check exits 1 naming the missing-contribution'."""
    text = saved_files(README.read_text())["ring2.json"].replace('"reduce"', '"copy"', 1)
    (tmp_path / "broken.json").write_text(text)
    result = subprocess.run([sys.executable, "-m", "collspec", "check", "broken.json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "missing-contribution" in result.stdout, result.stdout + result.stderr
    assert "Change the first `\"reduce\"` to `\"copy\"`" in README.read_text()


@pytest.mark.slow
def test_the_backend_pages_broken_kernel_is_reported(tmp_path):
    """docs/backends.md: 'make the second phase add ... and conform exits 1
    with duplicate-contribution violations'."""
    text = saved_files((ROOT / "docs" / "backends.md").read_text())["ring_kernel.py"]
    broken = text.replace("chunks[theirs].copy_(incoming)", "chunks[theirs].add_(incoming)")
    assert broken != text
    (tmp_path / "broken.py").write_text(broken)
    result = subprocess.run([sys.executable, "-m", "collspec", "conform", "--backend", "broken.py:RingAllReduce", "--world-size", "2",
                             "--quick", "-c", "allreduce", "--op", "sum", "--dtype", "int32", "--json", "-"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert result.returncode == 1, result.stderr
    kinds = {v["kind"] for v in __import__("json").loads(result.stdout)["violations"]}
    assert {"duplicate-contribution", "ranks-disagree"} <= kinds


@pytest.mark.parametrize("page", ["README.md"] + sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))
def test_links_resolve(page):
    """Every relative link and image of README.md and docs/*.md names a file
    of the checkout."""
    path = ROOT / page
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        resolved = (path.parent / target).resolve()
        if not resolved.exists():
            missing.append(resolved.relative_to(ROOT).as_posix())
    assert not missing, missing


def test_exit_statuses_are_the_contract():
    table = re.findall(r"^\| ([0-9]) \|", README.read_text(), re.M)
    assert table == ["0", "1", "2", "3"]
