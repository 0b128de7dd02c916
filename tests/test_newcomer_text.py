"""What a newcomer reads: the command line's texts and the site's pages say
what is, number things one way, and define what they use. Each test here
feeds the text-producing code and asserts the exact text (the site-wide
greps over the built site are in tests/test_site.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collspec.spec.violations import DEFINITIONS, KINDS
from site_support import ROOT, sitegen

gen = sitegen()


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collspec", *args], capture_output=True, text=True, timeout=280, cwd=cwd)


RING2 = {"collective": "allreduce", "ranks": 2, "chunks": 2, "steps": [
    [{"src": 0, "dst": 1, "chunk": 0, "op": "reduce"}, {"src": 1, "dst": 0, "chunk": 1, "op": "reduce"}],
    [{"src": 1, "dst": 0, "chunk": 0, "op": "copy"}, {"src": 0, "dst": 1, "chunk": 1, "op": "copy"}]]}


# -- the command line -------------------------------------------------------------


def test_check_prove_prints_the_proof(tmp_path):
    (tmp_path / "ring2.json").write_text(json.dumps(RING2))
    result = run("check", "ring2.json", "--prove", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "prove: proved: every output cell is right for all input values (ring2.json, 2 ranks)"
    plain = run("check", "ring2.json", cwd=tmp_path)
    assert "prove:" not in plain.stdout


def test_cost_explains_its_rounded_column():
    result = run("cost", "-a", "ring", "-n", "4", "-b", "1M")
    assert "whole P (up)" in result.stdout.splitlines()[0] and "≈" not in result.stdout
    assert "whole P (up): sent per rank rounded up to a whole number of vectors" in result.stdout


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_reports_get_the_umasks_mode(tmp_path, umask):
    from collspec.report import write_json

    old = os.umask(umask)
    try:
        write_json({"ok": True}, str(tmp_path / "r.json"))
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_one_rank_is_singular():
    result = run("check", "-a", "direct", "-c", "allreduce", "-n", "1:2")
    assert "direct allreduce, 1 rank:" in result.stdout and "1 ranks" not in result.stdout
    from collspec.models.schedule import Schedule

    assert Schedule("allreduce", 1, 1, ()).label() == "allreduce schedule on 1 rank"


def test_help_names_what_each_command_reads_and_writes():
    result = run("--help")
    assert "MSCCL++" in result.stdout.split("export", 1)[1].split("\n")[0] + result.stdout.split("export", 1)[1].split("\n")[1]
    assert "MSCCL and MSCCL++ corpora" in " ".join(result.stdout.split())


def test_mpich_without_its_prefix_stops_before_any_case(tmp_path):
    env = dict(os.environ, COLLSPEC_MPICH_PREFIX=str(tmp_path / "none"))
    result = subprocess.run([sys.executable, "-m", "collspec", "conform", "--backend", "mpich", "--world-size", "2", "--quick"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (f"collspec conform: error: --backend mpich: MPICH is not installed under {tmp_path / 'none'}; "
                                     "`make install` in collspec's checkout installs it (a plain pip install brings Open MPI only)")


def test_verify_says_why_a_row_is_not_proved():
    from collspec.commands.verify import _prove_summary
    from collspec.proofs.solver import COUNTEREXAMPLE, RESOURCE_LIMIT
    from collspec.proofs.suite import ProofResult

    rows = [ProofResult("ring.x", "all N>=2", "proved", 1.0),
            ProofResult("binary-tree.broadcast-exactly-once", "all N in 2..65536", "unknown", 30.0, "step: unknown", reason=RESOURCE_LIMIT, rlimit=4000000),
            ProofResult("ring.y", "N<=6", "FAILED", 1.0, "counterexample N=3", reason=COUNTEREXAMPLE)]
    ok, detail = _prove_summary(rows)
    assert not ok
    assert ("not proved: binary-tree.broadcast-exactly-once: unknown (resource limit reached); to do: Z3 ran out of resource units "
            "(limit 4,000,000 per check), which is no verdict: rerun with a larger limit, "
            "`collspec prove --only binary-tree.broadcast-exactly-once --rlimit-factor 10`") in detail
    assert "not proved: ring.y: FAILED (counterexample); to do: the claim is false at the values shown" in detail


def test_shm_vs_mpi_says_the_target_is_the_paired_ratio():
    spec = importlib.util.spec_from_file_location("shm_vs_mpi", ROOT / "bench" / "shm_vs_mpi.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    size = 4 << 20
    result = {"seconds": {f"shm {size}": 2e-3, f"mpi {size}": 1.9e-3, f"ratio {size}": 0.97, f"shm {size} cpu": 1e-3, f"mpi {size} cpu": 1e-3}}
    row = bench.rows(result, 4, [size])[0]
    assert row["met"] and row["target"] == "ratio <= 1 (busbw)"  # shm's median time is above MPI's, the paired ratio is below 1
    text = bench.table([row])
    assert text.splitlines()[-1].startswith("target: on ratio, the median over repetitions of shm's time / Open MPI's in the same repetition")


# -- the site's pages, as sitegen writes them ------------------------------------


def test_every_violation_kind_has_a_definition():
    assert set(DEFINITIONS) == set(KINDS)
    assert all(text.endswith(".") and text.count(". ") == 0 for text in DEFINITIONS.values())


@pytest.fixture(scope="module")
def violations(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diagrams")
    return gen.violations_page(gen.zoo_reports(), folder, []), folder


def section(page: str, kind: str) -> str:
    return page.split(f"``{kind}``\n", 1)[1].split("\n``", 1)[0]


def test_violation_sections_define_and_show(violations):
    page, folder = violations
    for kind in KINDS:
        assert DEFINITIONS[kind] in section(page, kind)
    assert "No zoo file" not in page
    operand = " ".join(section(page, "operand-order").split())
    assert "a non-commutative compose combined the ranks' operands out of rank order" in operand and ":doc:`mpi`" in operand


def test_a_promised_halo_is_drawn(violations):
    page, folder = violations
    promised = 0
    for kind in KINDS:
        text = section(page, kind)
        image = re.search(r"\.\. image:: diagrams/(\S+)", text)
        if "red halo" in text:
            promised += 1
            assert image and 'class="flag"' in (folder / image.group(1)).read_text(), kind
    assert promised >= 3
    repeat = section(page, "link-repeat")
    assert "red halo: step 0 (hop 1) 0->1, step 1 (hop 2) 0->1" in repeat


def test_diagrams_number_hops_and_steps_and_draw_no_empty_banner():
    from collspec.models.diagram import schedule_svg
    from collspec.models.schedule_json import loads

    svg = schedule_svg(loads(json.dumps(RING2)))
    assert re.findall(r'class="hop-label"[^>]*>([^<]+)<', svg) == ["hop 1", "hop 2"]
    assert re.findall(r'class="step-label"[^>]*>([^<]+)<', svg) == ["step 0", "step 1"]
    assert 'class="phase"' not in svg and ">-<" not in svg


def test_nccl_trees_are_numbered_0_and_1_everywhere():
    names = gen.diagrams()
    tree = names["nccl-tree-allreduce-4-tree.svg"]
    assert ">tree 0<" in tree and ">tree 1<" in tree and ">tree 2<" not in tree
    result = run("explain", "nccl-tree", "--ranks", "4")
    assert "\nTree 0\n" in result.stdout and "\nTree 1\n" in result.stdout and "of 2" not in result.stdout


def test_the_nccl_tree_diagram_is_readable():
    schedule = gen.diagram_schedule("nccl-tree", "allreduce", 4)
    assert schedule.chunks <= 4 and len(gen.trees_of(schedule)) == 2


def test_notes_named_in_module_text_are_links():
    page = gen.algorithm_page("nccl-tree", [], gen.diagram_cases(), None)
    assert ":doc:`docs/nccl.md <../nccl>`" in page
    assert re.search(r"(?<!<)(?<!`)docs/nccl\.md(?!`| <)", page.replace(":doc:`docs/nccl.md <../nccl>`", "")) is None


def test_front_page_defines_its_words_and_shows_a_ring():
    page = gen.index_page({"install.md", "conformance.md"})
    for words in ("called its **rank**", "**data-parallel training**", "**ZeRO**"):
        assert words in page
    assert "card" not in page.lower().split("discard")[0]
    assert ".. image:: diagrams/ring-seed-allreduce-4.svg" in page and "<explain/ring-seed.html>`_" in page
    doctest_lines = [line for line in page.splitlines() if line.startswith((">>> ", "... "))]
    assert max(len(line) for line in doctest_lines) <= 90


def test_contents_put_usage_first_and_pick_up_any_page(tmp_path):
    page = gen.index_page({"install.md", "backends.md", "conformance.md", "mpi.md", "zebra.md"})
    toc = page.split(":caption: Contents\n\n", 1)[1].split()
    assert toc == ["install", "cli", "backends", "reference/index", "algorithms/index", "proofs", "violations", "conformance", "mpi", "zebra"]
    for name in ("a.md", "install.md", "proofs.md", "mpi.md"):
        (tmp_path / name).write_text("# x\n")
    assert gen.notes(tmp_path) == ("install.md", "mpi.md", "a.md")


def test_algorithms_index_is_a_table_that_says_what_each_does():
    page = gen.algorithms_index()
    assert ".. list-table::" in page
    for algorithm in gen.ALGORITHMS:
        assert f"   * - :doc:`{algorithm}`" in page and gen.SUMMARIES[algorithm]


def test_the_command_line_page_is_the_parsers_help():
    from collspec.cli import COMMANDS, build_parser

    page = gen.cli_page()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    os.environ["COLUMNS"] = "100"
    try:
        for name, _ in COMMANDS:
            assert gen.indent(sub[name].format_help()) in page, name
    finally:
        del os.environ["COLUMNS"]


def test_the_proofs_page_carries_scopes_premises_and_what_is_not_proved():
    essay = (ROOT / "docs" / "proofs.md").read_text()
    page = gen.proofs_page([{"name": "ring.x", "scope": "all N>=2", "result": "proved", "statement": "s"}], 1.0, essay)
    for heading in ("## Proved for all N", "**Not proved for all N", "## What stays a premise (not proved here)", "## Bounded rows",
                    "## How the built schedule is tied to the proved function"):
        assert heading in page
    assert "## Every row of `collspec prove`" in page and "```{eval-rst}" in page


def test_mpi_messages_are_never_cut_mid_word():
    spec = importlib.util.spec_from_file_location("gen_mpi", ROOT / "docs" / "gen_mpi.py")
    gen_mpi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_mpi)
    whole = gen_mpi._whole_words(["MPI refused: not usable for the provided arguments", "MPI refused: not usable for the provided argumen",
                                  "x: " + "word " * 60 + "cutmid"])
    assert whole("MPI refused: not usable for the provided argumen") == "MPI refused: not usable for the provided arguments"
    assert whole("x: " + "word " * 60 + "cutmid").endswith("word …")
    assert gen_mpi.clip("alpha beta gamma", 12) == "alpha …"
    assert not re.search(r"provided argumen\b|\bFat \(", (ROOT / "docs" / "mpi.md").read_text())


def test_not_applicable_summary_names_every_count():
    from types import SimpleNamespace

    from collspec.conformance.output import not_applicable_lines

    note = "a count of {} does not split evenly over 4 ranks: unequal blocks go to reduce_scatter_v, which the backend does not define"
    outcomes = [SimpleNamespace(status="n/a", case=SimpleNamespace(collective="reduce_scatter", count=n), note=note.format(n)) for n in (5, 1009, 5, 7)]
    outcomes.append(SimpleNamespace(status="pass", case=SimpleNamespace(collective="reduce_scatter", count=8), note=""))
    assert not_applicable_lines(outcomes) == ["  4 x n/a reduce_scatter: counts 5, 7, 1009 do not split evenly over 4 ranks: unequal blocks go "
                                              "to reduce_scatter_v, which the backend does not define"]


def test_constraints_name_no_make_variable_the_makefile_lacks():
    makefile = (ROOT / "Makefile").read_text()
    for variable in re.findall(r"make (\w+)=", (ROOT / "constraints.txt").read_text()):
        assert re.search(rf"^{variable}\s*\??=", makefile, re.M), variable
    assert "make TORCH=" not in (ROOT / "constraints.txt").read_text()
