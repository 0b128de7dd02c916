"""Packaging: one distribution, one namespace, every package listed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"collspec": "collspec", "spec": "collspec.spec", "models": "collspec.models", "proofs": "collspec.proofs", "impl": "collspec.impl", "conformance": "collspec.conformance"}


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for folder, package in FOLDERS.items():
        assert config["package-dir"][package] == folder
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]))
    assert found == listed


def test_wheel_installs_only_collspec(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("collspec-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"collspec", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "collspec/spec/__init__.py" in names and "collspec/cli.py" in names
    # the MSCCL corpus `collspec verify` checks ships as package data
    assert "collspec/models/msccl/data/all-reduce-ring-simple.xml" in names and "collspec/models/msccl/data/SOURCES.md" in names
    # and the MSCCL++ plans
    assert "collspec/models/mscclpp/data/plan-reduce.json" in names and "collspec/models/mscclpp/data/SOURCES.md" in names
