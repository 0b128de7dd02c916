"""Installing from a wheel: `python -m build` gives an sdist and a wheel (built
from the sdist, so both carry every file), and the wheel, installed into a
fresh virtual environment and run away from the source tree, finds its data
files and registers its pytest plugin.

The fresh environment gets collspec from the wheel only; its dependencies
(numpy, z3, torch, ...) come from this environment's site-packages through
a .pth file, so nothing is downloaded or reinstalled. Its own site-packages
comes first on sys.path, so `import collspec` is the wheel's; this
environment's editable install is not active there (.pth files in a folder
added by a .pth are not read).

`collspec verify` from the installed wheel is the requirement; it takes
minutes (all proofs, and conformance of gloo), so this test runs the parts
of it that read data files (the MSCCL corpus, the MSCCL++ plans, the
spec's examples) and docs/ci.md records a run of the whole of it."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the fresh environment's python, the dist folder)."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)], check=True, capture_output=True, timeout=600)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "collspec-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = dist.glob("collspec-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    return python, dist, base


def _run(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_build_gives_a_wheel_and_an_sdist_with_the_data(installed):
    _, dist, _ = installed
    (wheel,) = dist.glob("collspec-*.whl")
    (sdist,) = dist.glob("collspec-*.tar.gz")
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    in_sdist = {name.split("/", 1)[1] for name in tarfile.open(sdist).getnames() if "/" in name}
    for data in ("models/msccl/data/all-reduce-ring-simple.xml", "models/mscclpp/data/plan-reduce.json", "models/msccl/data/SOURCES.md"):
        assert f"collspec/{data}" in in_wheel and data in in_sdist


def test_the_installed_wheel_runs_away_from_the_source_tree(installed):
    python, _, base = installed
    where = _run(python, base, "-c", "import collspec; print(collspec.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(base / "venv") and not Path(where.stdout.strip()).is_relative_to(ROOT)
    # the verify parts that read the package's data files, and the spec's examples
    parts = "from collspec.commands.verify import PARTS; import sys; r = {n: f() for n, f in PARTS if n in ('spec examples', 'check MSCCL corpus', 'check MSCCL++ plans')}; print(r); sys.exit(0 if len(r) == 3 and all(ok for ok, _ in r.values()) else 1)"
    result = _run(python, base, "-c", parts)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "9 files as expected" in result.stdout
    data = Path(where.stdout.strip()).parent / "models" / "msccl" / "data"
    check = _run(python, base, "-m", "collspec", "check", str(data / "allreduce-ring-4gpu-mscclang.xml"), str(data / "allgather-8n-0-1kb.xml"), "--jobs", "2")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines()[-1] == "check: 2 files: 2 ok"


def test_the_pytest_plugin_loads_from_the_wheel(installed):
    python, _, base = installed
    result = _run(python, base, "-m", "pytest", "--help", "-p", "no:cacheprovider")
    assert result.returncode == 0, result.stderr
    assert "--collspec-backend=B" in result.stdout
    origin = _run(python, base, "-c", "import importlib.metadata as m; (ep,) = [e for e in m.entry_points(group='pytest11') if e.name == 'collspec']; print(ep.dist._path)")
    assert Path(origin.stdout.strip()).is_relative_to(base / "venv"), origin.stdout + origin.stderr
