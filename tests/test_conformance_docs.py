"""Every example in collspec.conformance's module texts runs.

(tests/test_docs.py walks ``collspec.__path__``, which does not reach the
subpackages mapped from top-level folders, so this covers conformance's.)
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import collspec.conformance as conformance

MODULES = sorted(info.name for info in pkgutil.iter_modules(conformance.__path__, "collspec.conformance."))


def test_every_module_is_listed():
    assert "collspec.conformance.checks" in MODULES and len(MODULES) >= 20


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"

