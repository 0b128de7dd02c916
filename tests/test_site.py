"""The offline reference (`make docs`): its diagrams are the schedules', its
examples run, every promised page is there, and nothing loads from the
network."""

from __future__ import annotations

import dataclasses
import doctest
import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from collspec.models.diagram import schedule_svg
from collspec.models.generators import ALGORITHMS, generate
from collspec.spec.violations import KINDS
from site_support import ROOT, built_site, have_sphinx, sitegen

gen = sitegen()
needs_sphinx = pytest.mark.skipif(not have_sphinx(), reason="Sphinx and furo are not installed (make install installs the docs extra)")


def test_committed_diagrams_match_their_schedules():
    assert gen.stale_diagrams() == [], "rerun: .venv/bin/python docs/sitegen.py diagrams"
    assert {a for a, _, _ in gen.diagram_cases()} == set(ALGORITHMS)  # every algorithm is drawn


def test_a_changed_schedule_makes_its_diagram_stale(tmp_path, monkeypatch):
    shutil.copytree(gen.DIAGRAMS, tmp_path, dirs_exist_ok=True)  # they match (the test above)
    real = gen.generate

    def changed(algorithm, collective, n, **options):
        schedule = real(algorithm, collective, n, **options)
        if (algorithm, collective) != ("ring", "allgather"):
            return schedule
        return dataclasses.replace(schedule, steps=schedule.steps[:-1])  # one hop dropped

    monkeypatch.setattr(gen, "generate", changed)
    assert gen.stale_diagrams(tmp_path) == ["ring-allgather-4.svg: no longer matches its schedule"]
    monkeypatch.undo()
    (tmp_path / "ring-allreduce-4.svg").unlink()
    (tmp_path / "old-algorithm-allreduce-4.svg").write_text("<svg/>")
    assert gen.stale_diagrams(tmp_path) == ["ring-allreduce-4.svg: missing", "old-algorithm-allreduce-4.svg: no schedule draws it"]


def test_write_diagrams_draws_each_once_and_drops_the_old(tmp_path):
    (tmp_path / "old-algorithm-allreduce-4.svg").write_text("<svg/>")
    names = gen.write_diagrams(tmp_path)
    assert names == sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in gen.DIAGRAMS.glob("*.svg"))
    assert all((tmp_path / name).read_bytes() == (gen.DIAGRAMS / name).read_bytes() for name in names)


ROWS = [{"name": n, "scope": "all N>=2", "result": "proved"} for n in
        ("ring.link-once", "ring-seed.link-once", "builtin.ring", "builtin.ring-seed", "lower-bound.ring", "float16.identical-bits", "nccl-tree.depth")]


@pytest.mark.parametrize("algorithm, expected", [
    ("ring", ["ring.link-once", "builtin.ring", "lower-bound.ring"]),
    ("ring-seed", ["ring-seed.link-once", "builtin.ring-seed"]),
    ("nccl-tree", ["nccl-tree.depth"]),
    ("hub", []),
])
def test_proof_rows_are_matched_by_name(algorithm, expected):
    assert [r["name"] for r in gen.proofs_about(algorithm, ROWS)] == expected


def test_proof_table_says_when_nothing_is_proved():
    assert gen.proof_table([]) == "No proof in ``collspec prove`` names it yet.\n"
    table = gen.proof_table([{"name": "x.y", "scope": "N<=6", "result": "failed", "statement": "s", "message": "counterexample N=3"}])
    assert "   * - ``x.y``\n     - N<=6\n     - failed\n     - s — counterexample N=3" in table


def test_remote_resources_are_found(tmp_path):
    (tmp_path / "a.html").write_text('<a href="https://example.org/">a link is fine</a><script src="https://cdn.example/x.js"></script>'
                                     '<link rel="stylesheet" href="//fonts.example/css"><img src="local.png">'
                                     '<div style="background: url(http://x/y.png)"></div><style>@import "https://x/y.css";</style>')
    (tmp_path / "b.css").write_text("body { background: url('https://x/z.png') }")
    (tmp_path / "c.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><image href="https://x/i.png"/></svg>')
    (tmp_path / "d.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><use href="#local"/></svg>')
    assert gen.remote_resources(tmp_path) == [
        "a.html: <script src='https://cdn.example/x.js'>",
        "a.html: <link href='//fonts.example/css'>",
        "a.html: <div style='background: url(http://x/y.png)'>",
        "a.html: remote url in <style>",
        "b.css: remote url in CSS",
        "c.svg: remote href in SVG",
    ]


@needs_sphinx
def test_site_pages_and_offline():
    src, out, log = built_site()
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html") if "_static" not in p.parts)
    expected = {"index.html", "reference/index.html", "reference/collectives.html", "proofs.html", "violations.html", "conformance.html", "msccl.html", "algorithms/index.html"}
    expected |= {f"algorithms/{a}.html" for a in ALGORITHMS} | {f"explain/{a}.html" for a in ALGORITHMS}
    expected |= {f"{note[:-3]}.html" for note in gen.NOTES if (ROOT / "docs" / note).exists()}
    assert expected <= set(pages), sorted(expected - set(pages))
    assert gen.remote_resources(out) == []
    index = (out / "index.html").read_text()
    for text in ("Reduce-scatter", "The identity everything rests on", "-0.5,  0.5, -2.5,  0.5"):
        assert text in index
    assert re.search(r"-2\.,\s+2\.,\s+-10\.,\s+2\.", index)


@needs_sphinx
def test_site_builds_without_warnings():
    """A docstring or note that docutils cannot read (a broken table, a list
    that ends without a blank line) would show garbled on its page."""
    _, _, log = built_site()
    assert not [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line], log


def test_front_page_lists_the_notes_present():
    page = gen.index_page({"conformance.md", "mpi.md", "bench.md"})
    toc = page.split(":caption: Contents\n\n", 1)[1].split()
    assert toc == ["cli", "reference/index", "algorithms/index", "proofs", "violations", "conformance", "mpi", "bench"]


#: words of a project's history, not of its product (issues, sessions, records, the machine a text was written on)
#: words that speak of how the product was made; "session" is history unless it is a process's
#: session id or a launcher's session directories (docs/runs.md)
HISTORY = re.compile(r"\bissues? \d+|\bissue's\b|\(issue|\bsessions?\b(?! id)(?! directories)|earlier record|this machine|closing note|during the tuning|"
                     r"re-read for this page|no zoo file|this (?:shared )?VM|written when", re.I)


def history_in(text: str) -> list[str]:
    return [line.strip()[:160] for line in text.splitlines() if HISTORY.search(line)]


def test_history_finder_finds_history():
    assert history_in("ok\nthe closing note of issue 7\nmet issue 15's targets on this machine\nAn earlier record showed") == [
        "the closing note of issue 7", "met issue 15's targets on this machine", "An earlier record showed"]
    assert history_in("signals issued on one channel\nthe session of a pytest hook") == ["the session of a pytest hook"]


@pytest.mark.parametrize("page", ["README.md"] + sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))
def test_product_text_has_no_history(page):
    assert history_in((ROOT / page).read_text()) == []


def html_text(path: Path) -> str:
    import html

    page = path.read_text(encoding="utf-8")
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@needs_sphinx
def test_built_site_has_no_history_no_en_dash_options_and_a_copyright():
    _, out, _ = built_site()
    found, dashes, copyright = [], [], []
    for path in sorted(out.rglob("*.html")):
        if "_static" in path.parts:
            continue
        text = html_text(path)
        name = path.relative_to(out).as_posix()
        found += [f"{name}: {line}" for line in history_in(text)]
        dashes += [f"{name}: {m.group(0)}" for m in re.finditer(r"\S*\u2013[a-z]\S*", text)]
        if re.search(r"Copyright\s*©\s*(?:\n|$|<)", path.read_text(encoding="utf-8")) or "Copyright" in text and not re.search(r"©\s*\w", text):
            copyright.append(name)
    assert found == [] and dashes == [] and copyright == [], (found[:10], dashes[:10], copyright[:10])
    for page in ("cli.html", "install.html", "schedule-format.html", "backends.html", "gpu.html", "corpora.html"):
        assert (out / page).exists(), page
    proofs = html_text(out / "proofs.html")
    assert "What stays a premise (not proved here)" in proofs and "Every row of collspec prove" in proofs
    violations = (out / "violations.html").read_text()
    assert 'class="flag"' in (out / "_images" / "zoo-ring4-duplicated-transfer-link-repeat.svg").read_text()
    assert "zoo-ring4-duplicated-transfer-link-repeat.svg" in violations


@needs_sphinx
def test_site_diagrams_are_the_schedules():
    _, out, _ = built_site()
    for algorithm, collective, n in gen.diagram_cases():
        name = gen.diagram_name(algorithm, collective, n)
        page = (out / "algorithms" / f"{algorithm}.html").read_text()
        assert f'src="../_images/{name}"' in page
        assert (out / "_images" / name).read_text() == schedule_svg(gen.diagram_schedule(algorithm, collective, n))
    ring = (out / "algorithms" / "binary-tree.html").read_text()
    assert 'src="../_images/binary-tree-allreduce-4-tree.svg"' in ring


@needs_sphinx
def test_site_algorithm_pages_carry_cost_and_proofs():
    src, out, _ = built_site()
    rows = gen.proof_rows(json.loads((src / "prove.json").read_text()))
    for algorithm in ALGORITHMS:
        page = (out / "algorithms" / f"{algorithm}.html").read_text()
        assert f'src="../_images/{algorithm}.svg"' in page  # the alpha-beta plot
        assert "lower bound time" in page
        about = gen.proofs_about(algorithm, rows)
        assert about, f"no proof row names {algorithm}"
        for row in about:
            assert row["name"] in page
    assert 'href="../explain/ring-seed.html"' in (out / "algorithms" / "ring-seed.html").read_text()


@needs_sphinx
def test_site_violation_kinds_with_zoo_reports():
    _, out, _ = built_site()
    page = (out / "violations.html").read_text()
    for kind in KINDS:
        assert f'id="{kind}"' in page or f"<span class=\"pre\">{kind}</span>" in page
    text = re.sub(r"<[^>]+>", "", page).replace("&#39;", "'").replace("&quot;", '"')
    for fragment in ("tests/zoo/ring4-wrong-column.json", "rank 2 added rank 1's chunk 2 into its chunk 1",
                     "tests/zoo/ring4-race.json", "tests/zoo_msccl/ring4-receive-first-deadlock.xml", "hangs_on_zero.py"):
        assert fragment in text, fragment


def test_violation_page_shows_a_conformance_report():
    report = {"ok": False, "command": "conform", "subject": "tests/zoo_backends/hangs_on_zero.py:HangsOnZero",
              "violations": [{"kind": "hang", "message": "allreduce/int32/sum/n=0: rank(s) 1, 2, 3 did not finish within 3 s"}], "stats": {"cases": 1}}
    options = {"collectives": ["allreduce"], "sizes": [0], "timeout": 3}
    page = gen.violations_page([], Path("/nonexistent"), [("hangs_on_zero.py:HangsOnZero", options, report)])
    section = page.split("``hang``\n", 1)[1].split("``crash``\n", 1)[0]
    assert "(rank 0 skips a header for empty buffers)" in section
    assert "collspec conform --backend tests/zoo_backends/hangs_on_zero.py:HangsOnZero --world-size 4 --collective allreduce --sizes 0 --timeout 3" in section
    assert "class HangsOnZero" in section and '"did not finish within 3 s' not in section and "did not finish within 3 s" in section
    assert gen.conform_command("x.py:X", {"ops": ["avg", "sum"], "dtypes": ["float32"]}) == "collspec conform --backend tests/zoo_backends/x.py:X --world-size 4 --op avg,sum --dtype float32"


@needs_sphinx
def test_site_pages_examples_run():
    """The doctests of the site's pages (the Sphinx sources), run here so
    that `make test` catches an example that drifted."""
    src, _, _ = built_site()
    attempted = 0
    for page in sorted(src.rglob("*")):
        if page.suffix in (".rst", ".md"):
            globs: dict = {}
            for setup in re.findall(r"^\.\. testsetup:: \*\n\n((?:   .*\n)+)", page.read_text(), re.M):
                exec(textwrap.dedent(setup), globs)  # what Sphinx's doctest runs first
            result = doctest.testfile(str(page), module_relative=False, globs=globs, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            assert result.failed == 0, page.name
            attempted += result.attempted
    assert attempted >= 40
