"""The command line: subcommands, exit codes and one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from collspec.cli import COMMANDS, main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collspec", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_subcommand_of_the_contract():
    result = run("--help")
    assert result.returncode == 0
    for name in ("verify", "prove", "check", "explain", "cost", "conform", "bench", "export"):
        assert name in result.stdout


@pytest.mark.parametrize("name", [name for name, _ in COMMANDS])
def test_every_subcommand_has_help(name):
    result = run(name, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: collspec " + name in result.stdout


def test_usage_error_is_one_line_and_exit_2():
    result = run("check", "--no-such-option")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "unrecognized arguments: --no-such-option" in result.stderr


def test_no_subcommand_prints_help_and_exit_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out
