"""`collspec explain ring-seed --ranks 4 --example seed` retraces the worked example."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from collspec.models.explain import explain, render, to_json
from collspec.models.generators import generate
from collspec.models.layout import ScheduleError


@pytest.fixture(scope="module")
def worked():
    return explain(generate("ring-seed", "allreduce", 4))


def additions(explanation):
    return [(hop["hop"], t["dst"], t["dst_chunk"], t["before"], t["received"], t["after"]) for hop in explanation.hops for t in hop["transfers"] if t["op"] == "reduce"]


def test_the_twelve_additions(worked):
    assert additions(worked) == [
        (1, 1, 0, 0, 1, 1), (1, 2, 1, 1, 0, 1), (1, 3, 2, -4, -3, -7), (1, 0, 3, -1, 2, 1),
        (2, 1, 3, 0, 1, 1), (2, 2, 0, -1, 1, 0), (2, 3, 1, 2, 1, 3), (2, 0, 2, -1, -7, -8),
        (3, 1, 2, -2, -8, -10), (3, 2, 3, 1, 1, 2), (3, 3, 0, -2, 0, -2), (3, 0, 1, -1, 3, 2),
    ]


def test_routes_totals_and_averages(worked):
    assert [(r["chunk"], r["route"], r["total"], r["average"], r["ends_on"]) for r in worked.routes] == [
        (0, [0, 1, 2, 3], -2, -0.5, 3),
        (1, [1, 2, 3, 0], 2, 0.5, 0),
        (2, [2, 3, 0, 1], -10, -2.5, 1),
        (3, [3, 0, 1, 2], 2, 0.5, 2),
    ]


def test_text_writes_the_additions_and_the_contributors(worked):
    text = render(worked)
    assert "rank 1 -> rank 2: chunk 1, reduce: rank 2's chunk 1 becomes +1 + (0) = +1   [1·2]" in text
    assert "rank 1's chunk 0 becomes 0 + (+1) = +1   [0·1]" in text
    assert "rank 1's chunk 2 becomes -2 + (-8) = -10   [0·1·2·3]" in text
    assert "chunk 0  0 -> 1 -> 2 -> 3     -2  -0.50       rank 3" in text
    assert "column totals we want: -2  +2  -10  +2" in text
    assert "Finally every rank divides by 4" in text and "-0.50    +0.50    -2.50    +0.50" in text
    assert text.count("(all-gather)") == 3 and text.count("(reduce-scatter)") == 3


def test_json_gives_the_same_events(worked):
    data = to_json(worked)
    first = data["hops"][0]["transfers"][0]
    assert first == {"src": 0, "dst": 1, "src_chunk": 0, "dst_chunk": 0, "op": "reduce", "before": 0.0, "received": 1.0, "after": 1.0, "contributors": "0·1"}
    assert data["finish"]["result"][2] == [-0.5, 0.5, -2.5, 0.5]
    assert data["hops"][5]["state"][3][2] == {"value": -10.0, "contributors": "0·1·2·3"}


def test_markdown_renders_tables(worked):
    text = render(worked, markdown=True)
    assert "## Hop 3 (reduce-scatter)" in text and "| rank | chunk 0 | chunk 1 | chunk 2 | chunk 3 |" in text


def test_seed_needs_four_ranks():
    with pytest.raises(ScheduleError, match="the worked example has 4 ranks of 4 chunks; this schedule has 5 ranks"):
        explain(generate("ring", "allreduce", 5), "seed")
    assert explain(generate("ring", "allreduce", 5), "random").routes


def test_command_line_json():
    result = subprocess.run([sys.executable, "-m", "collspec", "explain", "ring-seed", "--ranks", "4", "--format", "json"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert json.loads(result.stdout)["routes"][2]["total"] == -10


def test_explain_nccl_tree_writes_the_trees_and_the_hops_only_when_asked():
    import json
    import subprocess
    import sys

    from collspec.models.generators import nccl_tree

    def explain(*args):
        return subprocess.run([sys.executable, "-m", "collspec", "explain", "nccl-tree", *args], capture_output=True, text=True)

    done = explain("--ranks", "6", "--json", "-")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert "hops" not in data
    assert data["trees"] == [{"parent": [-1, 2, 4, 2, 0, 4], "children": [[4], [], [1, 3], [], [2, 5], []]},
                             {"parent": [1, 5, 3, 1, 3, -1], "children": [[], [3, 0], [], [4, 2], [], [1]]}]  # down0, down1 of the mirrored labels
    with_hops = json.loads(explain("--ranks", "6", "--hops", "--json", "-").stdout)
    assert with_hops["hops"] and with_hops["trees"] == data["trees"]
    # 65536 ranks: the trees only, from the same closed forms the schedule uses
    big = nccl_tree.trees(65536)
    assert [t["parent"] for t in big] == nccl_tree.parents(65536)
    assert sum(len(c) for t in big for c in t["children"]) == 2 * 65535
