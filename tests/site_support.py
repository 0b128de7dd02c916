"""The site for tests/test_site.py and tests/test_browser.py, without
building the whole site inside a test's timeout where that can be avoided.

- :func:`built_site`: the whole site. The one ``make docs`` built
  (``build/docs``, which ``.ci/run`` builds before ``make test``) when it is
  up to date, that is newer than every file it is made from; else built
  once per test session into a temporary folder (less the conformance zoo's
  runs, with this session's proof results).
- :func:`small_site`: what the browser tests need (the front page, one
  algorithm's page and step-through page, the violations page): the same
  ``make docs`` site when up to date, else a small site of one algorithm,
  built in seconds.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILT_SRC, BUILT = ROOT / "build" / "docs-src", ROOT / "build" / "docs"
#: what the site is made from: a file changed here after the build makes build/docs stale
#: (docs/screenshots/ is not: the browser tests write it, and no page shows it)
INPUTS = ("docs", "spec", "models", "proofs", "impl", "conformance", "collspec", "tests/zoo", "tests/zoo_msccl", "tests/zoo_backends")


def sitegen():
    """docs/sitegen.py as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("collspec_sitegen", ROOT / "docs" / "sitegen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def have_sphinx() -> bool:
    return importlib.util.find_spec("sphinx") is not None and importlib.util.find_spec("furo") is not None


def newest_input() -> float:
    """The latest modification time of any file the site is made from."""
    newest = 0.0
    for name in INPUTS:
        path = ROOT / name
        files = [path] if path.is_file() else (p for p in path.rglob("*") if p.is_file() and not {"__pycache__", "screenshots"} & set(p.parts))
        for file in files:
            newest = max(newest, file.stat().st_mtime)
    return newest


def made_site_is_fresh(out: Path = BUILT, src: Path = BUILT_SRC) -> bool:
    """Whether ``make docs`` left a whole site in ``out`` newer than its inputs."""
    index, log = out / "index.html", sitegen().warnings_log(out)
    return index.exists() and log.exists() and (src / "prove.json").exists() and index.stat().st_mtime > newest_input()


def _build(folder: Path, *options: str) -> tuple[Path, Path, str]:
    src, out = folder / "docs-src", folder / "docs"
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "sitegen.py"), "build", "--src", str(src), "--out", str(out), "--no-conform",
                             *options], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return src, out, result.stdout + result.stderr


def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="collspec-site-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


@functools.lru_cache(maxsize=1)
def built_site() -> tuple[Path, Path, str]:
    """(sources, html, Sphinx's warnings and the build's output) of the whole site."""
    if made_site_is_fresh():
        return BUILT_SRC, BUILT, sitegen().warnings_log(BUILT).read_text()
    from proof_results import write_prove_report

    folder = _folder()
    write_prove_report(folder / "prove.json")
    return _build(folder, "--prove-json", str(folder / "prove.json"))


@functools.lru_cache(maxsize=1)
def small_site() -> Path:
    """The html folder of a site with the front page, ring-seed's pages and
    the violations page: ``make docs``'s when fresh, else one built here with
    the proofs about ring-seed only."""
    if made_site_is_fresh():
        return BUILT
    folder = _folder()
    prove = subprocess.run([sys.executable, "-m", "collspec", "prove", "--only", "ring-seed.allreduce", "--json", str(folder / "prove.json")],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert prove.returncode == 0, prove.stdout + prove.stderr
    return _build(folder, "--prove-json", str(folder / "prove.json"), "--algorithms", "ring-seed")[1]
