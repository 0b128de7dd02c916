"""In a real browser: the explain page steps through the worked example with
the keyboard, and the site's pages load with nothing from the network.

Drives Debian's ``chromium`` through playwright (``executable_path``; no
browser download) with a fresh profile, and saves screenshots under
``docs/screenshots/``. Skipped, with the reason, where either is missing
(``.ci/run`` installs chromium). The site is the one ``make docs`` built
when it is up to date (``.ci/run`` runs ``make docs`` first), else a small
site of one algorithm built in seconds (tests/site_support.py): never the
whole site inside a test's timeout.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collspec.models.explain import explain
from collspec.models.generators import generate
from collspec.models.page import page_frames
from site_support import ROOT, have_sphinx, small_site

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
SHOTS = ROOT / "docs" / "screenshots"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (Debian: apt-get install -y chromium; .ci/run does)"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None, reason="playwright is not installed (make install installs the docs extra)"),
]


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """One chromium, with a fresh profile, for the tests of this file."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(tmp_path_factory.mktemp("chromium") / "profile"), executable_path=CHROMIUM,
                                                       headless=True, args=FLAGS, viewport={"width": 1280, "height": 900})
        yield context
        context.close()


@pytest.fixture()
def browser(chromium):
    """A new page; every request to the network is refused and recorded
    (the tests assert there are none), and so are the page's script errors."""
    page = chromium.new_page()
    remote: list[str] = []
    page.route(re.compile(r"^(https?|wss?|ftp)://"), lambda route: (remote.append(route.request.url), route.abort()))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page, remote, errors
    page.close()


def visible_cells(page, ranks: int, cells: int) -> list[list[list[str]]]:
    return [[[page.inner_text(f"#cell-{r}-{c} .value"), page.inner_text(f"#cell-{r}-{c} .contributors")] for c in range(cells)] for r in range(ranks)]


WORKED = {  # hop -> cells the worked example names: (rank, chunk) -> (value, contributors)
    0: {(0, 0): ("+1", "0"), (3, 2): ("-4", "3")},
    1: {(1, 0): ("+1", "0·1"), (2, 1): ("+1", "1·2"), (3, 2): ("-7", "2·3"), (0, 3): ("+1", "0·3")},
    3: {(3, 0): ("-2", "0·1·2·3"), (0, 1): ("+2", "0·1·2·3"), (1, 2): ("-10", "0·1·2·3"), (2, 3): ("+2", "0·1·2·3")},
}


def test_explain_page_steps_through_the_worked_example(browser, tmp_path):
    page, remote, errors = browser
    html = tmp_path / "ring-seed.html"
    result = subprocess.run([sys.executable, "-m", "collspec", "explain", "ring-seed", "--ranks", "4", "--example", "seed", "--html", str(html)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    frames = page_frames(explain(generate("ring-seed", "allreduce", 4), "seed"))
    page.goto(html.as_uri())
    SHOTS.mkdir(parents=True, exist_ok=True)
    for k, frame in enumerate(frames):
        if k:
            page.keyboard.press("ArrowRight")
        assert page.inner_text("#hop-label") == frame["label"]
        shown = visible_cells(page, 4, 4)
        assert shown == frame["cells"]
        for (r, c), cell in WORKED.get(k, {}).items():
            assert tuple(shown[r][c]) == cell, (k, r, c)
        assert page.locator("svg .transfer.current").count() == len(frame["lines"])
        assert page.locator("td.changed").count() == len(frame["changed"])
        assert [li.inner_text() for li in page.locator("#transfers li").all()] == frame["lines"]
        if k in (0, 1, 3):
            page.screenshot(path=str(SHOTS / f"explain-ring-seed-hop-{k}.png"), full_page=True)
    assert all(row == [["-2", "0·1·2·3"], ["+2", "0·1·2·3"], ["-10", "0·1·2·3"], ["+2", "0·1·2·3"]] for row in visible_cells(page, 4, 4))
    page.screenshot(path=str(SHOTS / "explain-ring-seed-end.png"), full_page=True)
    page.keyboard.press("ArrowRight")  # past the end: stays
    assert page.inner_text("#hop-label") == frames[-1]["label"]
    assert page.is_disabled("#next")
    page.keyboard.press("ArrowLeft")
    assert page.inner_text("#hop-label") == frames[-2]["label"]
    page.keyboard.press("Home")
    assert visible_cells(page, 4, 4) == frames[0]["cells"] and page.is_disabled("#prev")
    page.click("#next")
    assert page.inner_text("#hop-label") == frames[1]["label"]
    page.keyboard.press("End")
    assert page.inner_text("#hop-label") == frames[-1]["label"]
    assert page.inner_text("#finish").split()[-4:] == ["-0.50", "+0.50", "-2.50", "+0.50"]
    assert remote == [] and errors == []


@pytest.mark.skipif(not have_sphinx(), reason="Sphinx and furo are not installed (make install installs the docs extra)")
def test_site_index_and_an_algorithm_page_load_offline(browser):
    page, remote, errors = browser
    out = small_site()
    page.goto((out / "index.html").as_uri())
    assert page.title() == "collspec reference"
    assert page.locator("h1").first.inner_text().startswith("collspec: collective operations, specified")
    assert "-0.5,  0.5, -2.5,  0.5" in page.inner_text("article")
    page.screenshot(path=str(SHOTS / "site-index.png"))
    ring = page.locator("section#how-a-ring-all-reduce-runs")
    assert ring.locator("img").evaluate("img => img.complete && img.naturalWidth > 0")
    ring.screenshot(path=str(SHOTS / "site-index-ring.png"))
    assert page.locator("article img[src='_images/ring-seed-allreduce-4.svg']").count() == 1  # the ring picture
    page.locator("article").get_by_role("link", name="algorithms", exact=True).first.click()
    page.wait_for_url("**/algorithms/index.html")  # and its load event
    page.locator("article").get_by_role("link", name="ring-seed", exact=True).click()
    page.wait_for_url("**/algorithms/ring-seed.html")
    images = page.locator("article img")
    assert images.count() >= 3
    for i in range(images.count()):  # every diagram and plot is there and decodes
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0"), images.nth(i).get_attribute("src")
    page.screenshot(path=str(SHOTS / "site-ring-seed.png"), full_page=True)
    page.locator("article").get_by_role("link", name="the ring-seed page").click()
    page.wait_for_url("**/explain/ring-seed.html")
    page.keyboard.press("ArrowRight")
    assert page.inner_text("#cell-1-0 .value") == "+1" and page.inner_text("#cell-1-0 .contributors") == "0·1"
    page.goto((out / "violations.html").as_uri())
    page.screenshot(path=str(SHOTS / "site-violations.png"))
    section = page.locator("section#link-repeat")
    assert section.locator("img").evaluate("img => img.complete && img.naturalWidth > 0")
    section.screenshot(path=str(SHOTS / "site-violations-link-repeat.png"))
    page.goto((out / "schedule-format.html").as_uri())
    assert "ring3.json" in page.inner_text("article")
    page.screenshot(path=str(SHOTS / "site-schedule-format.png"), full_page=True)
    assert remote == [] and errors == []
