"""The site, built once per test session (``docs/sitegen.py build`` into a
temporary folder), for tests/test_site.py and tests/test_browser.py."""

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


def sitegen():
    """docs/sitegen.py as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("collspec_sitegen", ROOT / "docs" / "sitegen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def have_sphinx() -> bool:
    return importlib.util.find_spec("sphinx") is not None and importlib.util.find_spec("furo") is not None


@functools.lru_cache(maxsize=1)
def built_site() -> tuple[Path, Path, str]:
    """(sources, html, build log): the whole site as `make docs` builds it,
    less the conformance zoo's runs (tests/test_conformance_zoo.py runs
    those) and from this session's proof results (tests/proof_results.py:
    each proof runs once, in tests/test_proofs_suite.py when that runs first)."""
    from proof_results import write_prove_report

    folder = Path(tempfile.mkdtemp(prefix="collspec-site-"))
    atexit.register(shutil.rmtree, folder, True)
    src, out = folder / "docs-src", folder / "docs"
    prove_json = folder / "prove.json"
    write_prove_report(prove_json)
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "sitegen.py"), "build", "--src", str(src), "--out", str(out), "--no-conform",
                             "--prove-json", str(prove_json)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return src, out, result.stdout + result.stderr
