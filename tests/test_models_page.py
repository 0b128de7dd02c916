"""`collspec explain A --html FILE`: the self-contained step-through page.

The page's frames are what `collspec explain` computes; the page fetches and
names nothing outside itself. (tests/test_browser.py drives it in Chromium.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from collspec.models.diagram import schedule_svg
from collspec.models.explain import explain, number
from collspec.models.generators import generate
from collspec.models.page import explain_page, page_frames


def frames_in(page: str) -> list[dict]:
    found = re.search(r'<script type="application/json" id="frames">(.*?)</script>', page, re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_worked_example_frames():
    e = explain(generate("ring-seed", "allreduce", 4), "seed")
    frames = page_frames(e)
    assert len(frames) == 7 and [f["hop"] for f in frames] == list(range(7))
    assert frames[0]["cells"][1] == [["0", "1"], ["0", "1"], ["-2", "1"], ["0", "1"]]
    assert frames[1]["label"] == "Hop 1 of 6 (reduce-scatter)"
    assert frames[1]["lines"][1] == "rank 1 -> rank 2: chunk 1, reduce: rank 2's chunk 1 becomes +1 + (0) = +1   [1·2]"
    assert frames[1]["changed"] == [(0, 3), (1, 0), (2, 1), (3, 2)]
    assert [frames[3]["cells"][r][(r + 1) % 4] for r in range(4)] == [["+2", "0·1·2·3"], ["-10", "0·1·2·3"], ["+2", "0·1·2·3"], ["-2", "0·1·2·3"]]
    assert all(frames[6]["cells"][r] == [[t, "0·1·2·3"] for t in ("-2", "+2", "-10", "+2")] for r in range(4))
    for k, hop in enumerate(e.hops, start=1):  # every cell of every frame is what explain computed
        assert frames[k]["cells"] == [[[number(hop["state"][r][c]), str(hop["sets"][r][c])] for c in range(4)] for r in range(4)]


def test_page_is_self_contained():
    e = explain(generate("ring-seed", "allreduce", 4), "seed")
    page = explain_page(e)
    assert "http" not in page and not re.search(r"\ssrc=", page) and "@import" not in page and "url(" not in page.replace("url(#head-", "")
    assert frames_in(page) == json.loads(json.dumps(page_frames(e)))
    assert schedule_svg(e.schedule, standalone=False) in page
    assert all(f'id="cell-{r}-{c}"' in page for r in range(4) for c in range(4))
    for control in ("first", "prev", "next", "last"):
        assert f'<button id="{control}">' in page
    assert "ArrowRight" in page and "ArrowLeft" in page
    assert "Column totals we want: -2  +2  -10  +2" in page
    assert "<td>-0.50</td><td>+0.50</td><td>-2.50</td><td>+0.50</td>" in page


def test_script_end_tag_in_data_cannot_close_the_script():
    e = explain(generate("ring", "allgather", 3), "random")
    e.title = "</script><b>"
    page = explain_page(e)
    assert "</script><b>" not in page and "&lt;/script&gt;&lt;b&gt;" in page


@pytest.mark.parametrize("algorithm, collective, n", [("ring", "allgather", 3), ("binary-tree", "broadcast", 5), ("direct", "alltoall", 3)])
def test_pages_of_other_collectives(algorithm, collective, n):
    e = explain(generate(algorithm, collective, n), "random")
    page = explain_page(e)
    assert len(frames_in(page)) == len(e.schedule.steps) + 1
    assert "Column totals" not in page and "divides by" not in page
    assert ("The tree it runs along" in page) == (algorithm == "binary-tree")


def test_cli_writes_the_page(tmp_path):
    out = tmp_path / "ring.html"
    result = subprocess.run([sys.executable, "-m", "collspec", "explain", "ring-seed", "--ranks", "4", "--example", "seed", "--html", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8") == explain_page(explain(generate("ring-seed", "allreduce", 4), "seed"))
    assert [p.name for p in tmp_path.iterdir()] == ["ring.html"]  # no temporary left behind
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # readable as any file the user writes, not private like a temporary
