"""pytest plugin: conformance of your backend from your own test suite.

Installed with collspec (entry point ``pytest11``), so it is active in every
pytest run; it does nothing unless asked. Two ways to ask:

- the option ``--collspec-backend B`` (any ``--backend`` value) adds one test,
  ``collspec-conform[B]``, that runs ``collspec conform`` with the options in
  ``--collspec-options`` (the command's own, e.g. ``"--quick --world-size 2"``)
  and fails with the violations;
- the fixture ``collspec_conform`` is a function ``collspec_conform(backend=None,
  **options)`` taking :func:`collspec.conformance.conform.conform`'s keyword
  arguments (``world_size``, ``mode``, ``collectives``, ``dtypes``, ``ops``,
  ``sizes``, ...); it fails the test on any error and returns the result
  (``.outcomes``, ``.capability``, ``.report()``). ``backend`` defaults to
  ``--collspec-backend``.
"""

from __future__ import annotations

import argparse
import shlex

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("collspec", "conformance of a collective backend (collspec)")
    group.addoption("--collspec-backend", metavar="B", help="run collspec conform on B: reference, gloo, mpi, PATH.py:NAME, module:NAME")
    group.addoption("--collspec-options", default="--quick", metavar="ARGS",
                    help="options for collspec conform (default: --quick)")


def _failure_text(result, limit: int = 20) -> str:
    report = result.report()
    errors = [v for v in report.violations if v.is_error]
    lines = [f"collspec conform {result.backend.text}: {len(errors)} errors ({result.summary()})"]
    lines += [f"  {v}" for v in errors[:limit]]
    if len(errors) > limit:
        lines.append(f"  ... and {len(errors) - limit} more")
    return "\n".join(lines)


class ConformanceFailed(Exception):
    """Conformance found errors; the message lists them."""


class ConformanceItem(pytest.Item):
    """The test ``--collspec-backend`` adds."""

    def __init__(self, *, backend: str, options: str, **kwargs):
        super().__init__(**kwargs)
        self.backend, self.options = backend, options

    def runtest(self) -> None:
        from collspec.commands import conform as command

        parser = argparse.ArgumentParser(prog="--collspec-options", exit_on_error=False)
        command.configure(parser)
        try:
            args = parser.parse_args(["--backend", self.backend, *shlex.split(self.options)])
        except (argparse.ArgumentError, SystemExit) as error:
            raise pytest.UsageError(f"--collspec-options {self.options!r}: {error}") from None
        result = _stop_if_interrupted(command.conform_from_args(args))
        if not result.ok:
            raise ConformanceFailed(_failure_text(result))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ConformanceFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"collspec conform --backend {self.backend} {self.options}"


def pytest_collection_modifyitems(session, config, items):
    backend = config.getoption("collspec_backend")
    if backend:
        items.append(ConformanceItem.from_parent(session, name=f"collspec-conform[{backend}]", backend=backend,
                                                 options=config.getoption("collspec_options")))


def _stop_if_interrupted(result):
    """A run a signal ended (cleanly) stops the test session as Ctrl-C does."""
    if result.result.interrupted:
        raise KeyboardInterrupt(f"collspec conform ended by {result.result.interrupted}")
    return result


@pytest.fixture
def collspec_conform(request):
    """Run conformance on a backend; fail the test if any check fails. See the module text."""
    from collspec.conformance.conform import conform

    def run(backend: str | None = None, **options):
        backend = backend or request.config.getoption("collspec_backend")
        if not backend:
            pytest.fail("collspec_conform: name a backend or pass --collspec-backend", pytrace=False)
        result = _stop_if_interrupted(conform(backend, **options))
        if not result.ok:
            pytest.fail(_failure_text(result), pytrace=False)
        return result

    return run
