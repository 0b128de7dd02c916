"""Diagrams are read back as data: one arrow per transfer, with the transfer's
hop, ranks, chunks, op and chunk colour; phases and legend as drawn; trees
from parent arrays. A diagram changes when its schedule does."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

import numpy as np
import pytest

from collspec.models.diagram import MAX_TRANSFERS, check_parents, chunk_colour, forest_svg, schedule_svg, tree_svg, trees_of
from collspec.models.generators import ALGORITHMS, generate
from collspec.models.indexing import tree_parent
from collspec.models.layout import ScheduleError
from collspec.models.schedule import REDUCE, Step

NS = {"s": "http://www.w3.org/2000/svg"}
CASES = [(a, c, n) for a in ALGORITHMS for c in ALGORITHMS[a] for n in (4, 5) if not (a == "ring-seed" and n == 5)]


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def arrows(svg: str) -> list[dict]:
    root = parse(svg)
    return [dict(e.attrib) for e in root.iterfind(".//s:path", NS) if e.get("class", "").startswith("transfer ")]


def transfers(schedule) -> Counter:
    return Counter(
        (s + 1, int(step.src[i]), int(step.dst[i]), int(step.src_chunk[i]), int(step.dst_chunk[i]), "reduce" if step.op[i] == REDUCE else "copy")
        for s, step in enumerate(schedule.steps)
        for i in range(len(step))
    )


def drawn(svg: str) -> Counter:
    return Counter(
        (int(a["data-hop"]), int(a["data-src"]), int(a["data-dst"]), int(a["data-src-chunk"]), int(a["data-dst-chunk"]), a["class"].split()[1])
        for a in arrows(svg)
    )


@pytest.mark.parametrize("algorithm, collective, n", CASES)
def test_one_arrow_per_transfer_with_its_data(algorithm, collective, n):
    try:
        schedule = generate(algorithm, collective, n)
    except ScheduleError as error:
        pytest.skip(f"{algorithm} {collective} has no schedule for {n} ranks: {error}")
    svg = schedule_svg(schedule)
    found = arrows(svg)
    assert len(found) == schedule.transfers
    assert drawn(svg) == transfers(schedule)
    for a in found:
        assert a["stroke"] == chunk_colour(int(a["data-src-chunk"]))
        assert ("stroke-dasharray" in a) == (a["class"] == "transfer copy")
        assert a["marker-end"] == f"url(#head-{a['data-src-chunk']})"


def test_ring_colours_reduce_and_copy():
    svg = schedule_svg(generate("ring", "allreduce", 4))
    found = arrows(svg)
    assert Counter(a["class"] for a in found) == {"transfer reduce": 12, "transfer copy": 12}
    assert Counter(a["stroke"] for a in found) == {chunk_colour(c): 6 for c in range(4)}
    assert len(set(chunk_colour(c) for c in range(40))) == 40


def test_phases_and_legend():
    schedule = generate("ring", "allreduce", 4)
    root = parse(schedule_svg(schedule))
    phases = [(g.get("data-phase"), g.get("data-first-hop"), g.get("data-last-hop")) for g in root.iterfind(".//s:g[@class='phase']", NS)]
    assert phases == [("reduce-scatter", "1", "3"), ("all-gather", "4", "6")]
    swatches = {r.get("data-chunk"): r.get("fill") for r in root.iterfind(".//s:rect[@class='swatch']", NS)}
    assert swatches == {str(c): chunk_colour(c) for c in range(4)}
    text = "".join(root.itertext())
    assert "reduce (receiver combines)" in text and "copy (receiver overwrites)" in text
    assert [t.text for t in root.iterfind(".//s:text[@class='rank-label']", NS)] == [f"rank {r}" for r in range(4)]
    assert len(root.findall(".//s:text[@class='hop-label']", NS)) == 6


def test_diagram_changes_with_its_schedule():
    schedule = generate("ring", "allreduce", 4)
    step = schedule.steps[1]
    dst = step.dst.copy()
    dst[0] = (dst[0] + 1) % 4
    broken = dataclasses.replace(schedule, steps=(schedule.steps[0], dataclasses.replace(step, dst=dst)) + schedule.steps[2:])
    before, after = schedule_svg(schedule), schedule_svg(broken)
    assert before != after
    assert drawn(after) == transfers(broken) != transfers(schedule)
    copy_to_reduce = dataclasses.replace(schedule, steps=schedule.steps[:3] + (dataclasses.replace(schedule.steps[3], op=np.full(4, REDUCE, np.int8)),) + schedule.steps[4:])
    assert Counter(a["class"] for a in arrows(schedule_svg(copy_to_reduce))) == {"transfer reduce": 16, "transfer copy": 8}


def test_local_transfers_and_parallel_arrows_are_drawn():
    local = Step.of([0, 0], [0, 0], [0, 1], [1, 0], "copy")
    schedule = dataclasses.replace(generate("ring", "allreduce", 2), steps=(local,))
    found = arrows(schedule_svg(schedule))
    assert len(found) == 2 and all(" Q" in a["d"] for a in found)  # a bow along rank 0's row
    overloaded = arrows(schedule_svg(generate("hierarchical-ring", "allreduce", 4)))  # two chunks per link per hop
    assert max(Counter(a["d"] for a in overloaded).values()) == 1  # arrows sharing a link fan out instead of overlapping


def test_too_large_to_draw():
    with pytest.raises(ScheduleError, match=f"diagrams stop at {MAX_TRANSFERS}"):
        schedule_svg(generate("direct", "allreduce", 150))


def test_tree_from_parent_array():
    parent = [2, 2, -1, 0, 0]
    root = parse(tree_svg(parent, "some tree"))
    edges = {(int(e.get("data-child")), int(e.get("data-parent"))) for e in root.iterfind(".//s:line[@class='edge']", NS)}
    assert edges == {(0, 2), (1, 2), (3, 0), (4, 0)}
    nodes = {int(g.get("data-rank")): g for g in root.iterfind(".//s:g[@class='node']", NS)}
    assert sorted(nodes) == [0, 1, 2, 3, 4]
    centre = lambda r: tuple(float(nodes[r].find("s:circle", NS).get(k)) for k in ("cx", "cy"))  # noqa: E731
    assert centre(2)[1] < centre(0)[1] < centre(3)[1]  # root on top, then depth by depth
    assert centre(3)[0] < centre(0)[0] < centre(4)[0]  # a parent above and between its children


def test_two_trees_side_by_side():
    root = parse(forest_svg([[-1, 0, 0], [1, -1, 1]], ["first", "second"]))
    trees = root.findall(".//s:g[@class='tree']", NS)
    assert [t.get("data-root") for t in trees] == ["0", "1"]
    assert len(root.findall(".//s:line[@class='edge']", NS)) == 4


@pytest.mark.parametrize(
    "parent, message",
    [
        ([0, -1], "parent[0] = 0 is not another rank of 0..1"),
        ([1, 0], "a tree needs exactly one root (parent -1); got 0"),
        ([-1, -1], "got 2"),
        ([-1, 2, 1], "rank 1's ancestors form a cycle"),
        ([-1, 5], "parent[1] = 5 is not another rank"),
    ],
)
def test_bad_parent_arrays(parent, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_parents(parent)


@pytest.mark.parametrize("n", [2, 3, 7, 12])
def test_binary_tree_schedule_reduces_along_the_heap(n):
    expected = [-1] + [int(tree_parent(p)) for p in range(1, n)]
    assert trees_of(generate("binary-tree", "allreduce", n)) == [expected]


def test_declared_trees_and_no_tree():
    assert trees_of(generate("ring", "allreduce", 4)) == []
    assert trees_of(generate("direct", "allreduce", 4)) == []
    assert trees_of(generate("hub", "allreduce", 4)) == [[-1, 0, 0, 0]]  # a star is a tree
    assert trees_of(generate("binary-tree", "broadcast", 5)) == [[-1, 0, 0, 1, 1]]  # copies down the tree
    assert trees_of(generate("ring", "allgather", 4)) == []
    declared = dataclasses.replace(generate("ring", "allreduce", 3), meta={"trees": [[-1, 0, 1], [2, 2, -1]]})
    assert trees_of(declared) == [[-1, 0, 1], [2, 2, -1]]
    as_json = dataclasses.replace(declared, meta={"trees": [{"parent": [-1, 0, 1]}, {"parent": [2, 2, -1]}]})
    assert trees_of(as_json) == [[-1, 0, 1], [2, 2, -1]]


def test_flagged_transfers_get_a_halo():
    schedule = generate("ring", "allreduce", 4)
    root = parse(schedule_svg(schedule, flagged={(2, 1, 2), (9, 0, 0)}))
    halos = root.findall(".//s:path[@class='flag']", NS)
    assert [h.get("data-hop") for h in halos] == ["3"]
    arrow = next(a for a in arrows(schedule_svg(schedule)) if (a["data-hop"], a["data-src"], a["data-dst"]) == ("3", "1", "2"))
    assert halos[0].get("d") == arrow["d"]
    assert len(arrows(schedule_svg(schedule, flagged={(2, 1, 2)}))) == schedule.transfers


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collspec", "explain", *args], capture_output=True, text=True, timeout=120)


def test_cli_svg_and_tree():
    result = cli("ring-seed", "--ranks", "4", "--format", "svg")
    assert result.returncode == 0, result.stderr
    assert result.stdout == schedule_svg(generate("ring-seed", "allreduce", 4))
    result = cli("binary-tree", "--ranks", "6", "--format", "svg", "--diagram", "tree")
    assert result.returncode == 0, result.stderr
    edges = parse(result.stdout).findall(".//s:line[@class='edge']", NS)
    assert len(edges) == 5


@pytest.mark.parametrize(
    "args, message",
    [
        (("ring", "--format", "svg", "--diagram", "tree"), "ring allreduce, 4 ranks does not run along a tree; use --diagram schedule"),
        (("ring", "--diagram", "tree"), "--diagram applies to --format svg only"),
        (("ring", "--html", "/no/such/folder/x.html"), "--html /no/such/folder/x.html: folder /no/such/folder does not exist"),
        (("direct", "--ranks", "150", "--format", "svg"), "diagrams stop at"),
        (("ring", "--format", "svg", "--html", "x.html"), "--html writes a page, --format svg prints to stdout: give one of them"),
        (("ring", "--format", "text", "--html", "x.html"), "--html writes a page, --format text prints to stdout: give one of them"),
    ],
)
def test_cli_bad_input_is_exit_2(args, message):
    result = cli(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
