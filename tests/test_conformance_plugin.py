"""The pytest plugin: one option or one fixture runs conformance in a user's suite."""

from __future__ import annotations

import pytest

from conformance_support import ZOO, leftover_processes

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

SMALL = "--collective allreduce --dtype int32 --op sum --sizes 5"


def test_the_option_adds_a_test_that_fails_with_the_violations(pytester):
    pytester.makepyfile(
        test_user="""
        def test_fixture_on_gloo(collspec_conform):
            result = collspec_conform("gloo", mode="default", collectives=["broadcast"], dtypes=["int8"], sizes=[5])
            assert result.counts()["pass"] == 4  # one case per root
        """
    )
    result = pytester.runpytest_subprocess("-v", f"--collspec-backend={ZOO}/drops_rank.py:DropsRank", f"--collspec-options={SMALL}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*collspec-conform*DropsRank* FAILED*",
        "*1 errors (1 fail)*",
        "*missing-contribution*the result is missing the contribution of rank(s) 3*",
    ])
    assert leftover_processes() == []


def test_the_fixture_fails_the_test_on_a_broken_backend_and_adds_nothing_without_the_option(pytester):
    pytester.makepyfile(
        test_user=f"""
        def test_mine(collspec_conform):
            collspec_conform("{ZOO}/ignores_op.py:IgnoresOp", mode="default", collectives=["allreduce"],
                             dtypes=["int32"], ops=["max"], sizes=[5])
        """
    )
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_mine FAILED*", "*error wrong-value*allreduce/int32/max*"])
    assert "collspec-conform" not in result.stdout.str()


def test_bad_collspec_options_are_a_usage_error(pytester):
    pytester.makepyfile(test_user="def test_nothing(): pass")
    result = pytester.runpytest_subprocess("--collspec-backend=gloo", "--collspec-options=--no-such-option")
    assert "--no-such-option" in result.stdout.str() + result.stderr.str()
    assert result.ret != 0
