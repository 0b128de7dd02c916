"""Every example in collspec's documentation runs (doctest).

The spec is the documentation: its module texts teach the collectives, and
this test executes each example in every module of every subpackage.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import collspec



PACKAGES = ["collspec", "collspec.spec", "collspec.models", "collspec.proofs", "collspec.impl", "collspec.conformance"]


def all_modules() -> list[str]:
    """Every module of every subpackage (they live in separate top-level
    folders, so walking collspec/ alone would miss them)."""
    names = set()
    for package in PACKAGES:
        module = importlib.import_module(package)
        names.add(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            if not info.name.endswith("__main__"):
                names.add(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", all_modules())
def test_module_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_spec_teaches_with_examples():
    import collspec.spec as spec

    finder = doctest.DocTestFinder()
    examples = sum(len(t.examples) for t in finder.find(spec))
    assert examples >= 15
    assert "0·1·2·3" in spec.__doc__
    for total in ("-2", "+2", "-10"):
        assert total in spec.__doc__


def test_readme_examples():
    from pathlib import Path

    readme = Path(__file__).resolve().parent.parent / "README.md"
    result = doctest.testfile(str(readme), module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 3


def test_every_subpackage_is_walked():
    names = all_modules()
    for expected in ("collspec.spec.kernel", "collspec.models.checker", "collspec.models.generators.ring", "collspec.cli"):
        assert expected in names
