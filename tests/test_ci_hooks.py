"""The pre-commit hooks (.pre-commit-hooks.yaml) run by pre-commit itself, and
the GitHub Action's (action.yml) script, against a temporary git repository
with one good and one broken file each.

pre-commit would install a ``language: python`` hook from its repository
into an environment of its own, which needs the network. The test runs the
very hook definitions of the manifest (entry, files, types) from a
``repo: local`` configuration with ``language: system``, so the
``collspec`` of this environment runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from collspec.models.generators import generate
from collspec.models.msccl import to_xml
from collspec.models.schedule_json import dumps

ROOT = Path(__file__).parent.parent
HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def _environment(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PRE_COMMIT_HOME=str(tmp_path / "cache"), HOME=str(tmp_path),
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return env


@pytest.fixture
def repository(tmp_path):
    """A git repository with a good and a broken file of each kind, staged,
    and a configuration running the manifest's hooks."""
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    (repo / "mscclpp").mkdir()
    (repo / "algorithms").mkdir()
    (repo / "algorithms" / "ring4.xml").write_text(to_xml(generate("ring", "allreduce", 4)))
    shutil.copy(HERE / "zoo_msccl" / "ring4-reduce-wrong-offset.xml", repo / "algorithms" / "broken.xml")
    (repo / "schedules" / "ring4.json").write_text(dumps(generate("ring", "allreduce", 4)))
    shutil.copy(HERE / "zoo" / "ring4-out-of-range.json", repo / "schedules" / "broken.json")
    shutil.copy(ROOT / "models" / "mscclpp" / "data" / "exec-allreduce.json", repo / "mscclpp" / "good.json")
    shutil.copy(HERE / "zoo_mscclpp" / "reduce-missing-wait.json", repo / "mscclpp" / "broken.json")
    (repo / "package.json").write_text('{"name": "not a schedule"}')
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    for hook in hooks:
        hook["language"] = "system"
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}))
    env = _environment(tmp_path)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    return repo, env


def _pre_commit(repo: Path, env: dict, hook: str, *files: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "pre-commit"), "run", hook, "--files", *files], cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def test_the_msccl_hook_passes_a_good_file_and_fails_a_broken_one(repository):
    repo, env = repository
    good = _pre_commit(repo, env, "collspec-msccl", "algorithms/ring4.xml", "package.json")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "collspec check (MSCCL XML programs)" in good.stdout and "Passed" in good.stdout
    bad = _pre_commit(repo, env, "collspec-msccl", "algorithms/ring4.xml", "algorithms/broken.xml")
    assert bad.returncode == 1
    assert "- exit code: 1" in bad.stdout
    assert "check algorithms/broken.xml: FAILED (9 errors, 1 warning)" in bad.stdout
    assert "check algorithms/ring4.xml: ok (0 errors, 0 warnings)" in bad.stdout


def test_the_schedule_hook_reports_a_malformed_file_with_exit_2(repository):
    repo, env = repository
    result = _pre_commit(repo, env, "collspec-schedule", "schedules/ring4.json", "schedules/broken.json", "package.json")
    assert result.returncode == 1  # pre-commit's own status: a hook failed
    assert "- exit code: 2" in result.stdout
    assert "check schedules/broken.json: malformed: schedules/broken.json: step 1, transfer 2: field 'dst' = 4 is out of range 0..3" in result.stdout
    assert "package.json" not in result.stdout


def test_the_mscclpp_hook_takes_only_plans(repository):
    repo, env = repository
    result = _pre_commit(repo, env, "collspec-mscclpp", "mscclpp/good.json", "mscclpp/broken.json", "schedules/ring4.json")
    assert "- exit code: 1" in result.stdout
    assert "check mscclpp/broken.json: FAILED (4 errors, 0 warnings)" in result.stdout
    assert "mscclpp/good.json: ok" in result.stdout and "schedules/" not in result.stdout


def _action_script(step: str) -> str:
    steps = {s.get("name", ""): s for s in yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"]}
    return next(s["run"] for name, s in steps.items() if name.startswith(step))


@pytest.mark.parametrize("command, paths, status", [("check", "algorithms schedules/ring4.json", 1), ("prove", "schedules/*.json", 2)])
def test_the_action_runs_collspec_and_writes_both_reports(repository, tmp_path, command, paths, status):
    repo, env = repository
    output = tmp_path / "github-output"
    env.update(COMMAND=command, PATHS=paths, ARGS="", JOBS="2", JUNIT="out/junit.xml", SARIF="out/collspec.sarif", GITHUB_OUTPUT=str(output))
    (repo / "out").mkdir()
    result = subprocess.run(["bash", "-eo", "pipefail", "-c", _action_script("collspec")], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == status, result.stderr
    assert output.read_text() == f"status={status}\n"
    import xml.etree.ElementTree as ElementTree

    names = [case.get("name") for case in ElementTree.parse(repo / "out" / "junit.xml").iter("testcase")]
    expected = ["algorithms/broken.xml", "algorithms/ring4.xml", "schedules/ring4.json"] if command == "check" else ["schedules/broken.json", "schedules/ring4.json"]
    assert names == expected
    from test_ci_formats import valid_sarif

    assert valid_sarif(repo / "out" / "collspec.sarif")["runs"][0]["invocations"][0]["exitCode"] == status


def test_the_action_refuses_an_unknown_command(repository):
    repo, env = repository
    env.update(COMMAND="explain", PATHS=".", ARGS="", JOBS="1", JUNIT="", SARIF="", GITHUB_OUTPUT=os.devnull)
    result = subprocess.run(["bash", "-c", _action_script("collspec")], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (2, "collspec action: command must be check or prove, not 'explain'\n")
