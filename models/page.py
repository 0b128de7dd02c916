"""``collspec explain A --html FILE``: one self-contained step-through page.

The page holds everything it shows: the schedule's diagram as inline SVG
(:mod:`collspec.models.diagram`), a small stylesheet, the explanation's
frames as JSON, and a few lines of script that step through them (buttons,
or the arrow keys; Home and End jump). It fetches nothing and names no URL,
so it opens the same from a file, a mail attachment or an offline machine.

Frame 0 is the state before the first hop, frame k the state after hop k.
Each frame carries, already written out by :mod:`collspec.models.explain`,
every cell's value and contributor set, the hop's transfers as sentences,
and which cells the hop wrote; the script only shows them, so the page says
exactly what ``collspec explain`` prints.

>>> from collspec.models.explain import explain
>>> from collspec.models.generators import generate
>>> page = explain_page(explain(generate("ring-seed", "allreduce", 4), "seed"))
>>> page.startswith("<!DOCTYPE html>"), "http" in page
(True, False)
>>> frames = page_frames(explain(generate("ring-seed", "allreduce", 4), "seed"))
>>> frames[3]["cells"][3][0]   # after hop 3, rank 3 holds the total of chunk 0
['-2', '0·1·2·3']
"""

from __future__ import annotations

import json
from html import escape

from .diagram import forest_svg, schedule_svg, trees_of
from .explain import Explanation, number, transfer_line


def _cells(explanation: Explanation, state, sets) -> list[list[list[str]]]:
    s = explanation.schedule
    return [[[number(state[r][c]), str(sets[r][c])] for c in range(s.layout.cells)] for r in range(s.ranks)]


def page_frames(explanation: Explanation) -> list[dict]:
    """The frames the page steps through, as plain data (what the page's
    JSON holds)."""
    s = explanation.schedule
    frames = [{"label": "Start: every rank holds its own input", "hop": 0, "lines": [],
               "cells": _cells(explanation, explanation.start, explanation.start_sets), "changed": []}]
    for hop in explanation.hops:
        phase = f" ({hop['phase']})" if hop["phase"] else ""
        frames.append({
            "label": f"Hop {hop['hop']} of {len(explanation.hops)}{phase}",
            "hop": hop["hop"],
            "lines": [transfer_line(s, t) for t in hop["transfers"]],
            "cells": _cells(explanation, hop["state"], hop["sets"]),
            "changed": sorted({(t["dst"], t["dst_chunk"]) for t in hop["transfers"]}),
        })
    return frames


STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 72em; }
h1 { font-size: 1.3em; }
#controls { margin: .8em 0; display: flex; gap: .4em; align-items: center; }
#controls button { font-size: 1em; padding: .25em .8em; }
#hop-label { font-weight: bold; margin-left: .8em; }
table { border-collapse: collapse; margin: .6em 0; }
th, td { border: 1px solid #ccd; padding: .25em .7em; text-align: right; }
th { background: #f2f4f8; }
td .value { font-weight: bold; font-family: monospace; font-size: 1.1em; }
td .contributors { display: block; color: #667; font-size: .85em; font-family: monospace; }
td.changed { background: #fff3c4; }
#transfers { font-family: monospace; min-height: 1.2em; white-space: pre-wrap; }
.diagram { overflow-x: auto; border: 1px solid #e3e6ea; padding: .3em; }
svg .transfer { opacity: .12; }
svg .transfer.done { opacity: .35; }
svg .transfer.current { opacity: 1; stroke-width: 3.5; }
.help { color: #556; }
"""

SCRIPT = """
const frames = JSON.parse(document.getElementById('frames').textContent);
let at = 0;
function show(k) {
  at = Math.max(0, Math.min(frames.length - 1, k));
  const f = frames[at];
  document.getElementById('hop-label').textContent = f.label;
  const changed = new Set(f.changed.map(rc => rc[0] + '-' + rc[1]));
  f.cells.forEach((row, r) => row.forEach((cell, c) => {
    const td = document.getElementById('cell-' + r + '-' + c);
    td.querySelector('.value').textContent = cell[0];
    td.querySelector('.contributors').textContent = cell[1];
    td.classList.toggle('changed', changed.has(r + '-' + c));
  }));
  const list = document.getElementById('transfers');
  list.replaceChildren(...f.lines.map(line => { const li = document.createElement('li'); li.textContent = line; return li; }));
  document.querySelectorAll('svg .transfer').forEach(a => {
    const hop = Number(a.dataset.hop);
    a.classList.toggle('current', hop === f.hop);
    a.classList.toggle('done', hop < f.hop);
  });
  document.getElementById('prev').disabled = at === 0;
  document.getElementById('next').disabled = at === frames.length - 1;
}
document.getElementById('first').onclick = () => show(0);
document.getElementById('prev').onclick = () => show(at - 1);
document.getElementById('next').onclick = () => show(at + 1);
document.getElementById('last').onclick = () => show(frames.length - 1);
document.addEventListener('keydown', e => {
  const to = {ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: frames.length - 1}[e.key];
  if (to !== undefined) { e.preventDefault(); show(to); }
});
show(0);
"""


def _table(header: list[str], rows: list[list[str]], table_id: str = "") -> str:
    ident = f' id="{table_id}"' if table_id else ""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


def explain_page(explanation: Explanation) -> str:
    """The whole page, as one string of HTML."""
    s = explanation.schedule
    name = s.layout.cell_name
    frames = page_frames(explanation)
    cells = range(s.layout.cells)
    state = ["<table id=\"state\"><tr><th>rank</th>" + "".join(f"<th>{escape(name(c))}</th>" for c in cells) + "</tr>"]
    for r in range(s.ranks):
        state.append(f"<tr><th>{r}</th>" + "".join(
            f'<td id="cell-{r}-{c}"><span class="value"></span><span class="contributors"></span></td>' for c in cells) + "</tr>")
    state.append("</table>")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(explanation.title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{escape(explanation.title)}</h1>",
        '<p class="help">Step through the schedule hop by hop with the buttons or the arrow keys '
        "(&larr; &rarr;; Home and End jump). Each cell shows its value and, below it, whose inputs it "
        "holds (<code>0·3</code>: ranks 0 and 3). Cells the hop wrote are highlighted; in the diagram the "
        "hop's transfers are drawn bold (solid: reduce, dashed: copy; colour: chunk).</p>",
        '<div id="controls"><button id="first">|&larr; start</button><button id="prev">&larr; previous</button>'
        '<button id="next">next &rarr;</button><button id="last">end &rarr;|</button><span id="hop-label"></span></div>',
        "\n".join(state),
        '<ul id="transfers"></ul>',
    ]
    if s.collective in ("allreduce", "reduce_scatter", "reduce"):
        totals = explanation.values.sum(axis=0)
        parts.append('<p id="totals">Column totals we want: ' + escape("  ".join(number(v) for v in totals)) + "</p>")
    parts.append(f'<div class="diagram">{schedule_svg(s, standalone=False)}</div>')
    trees = trees_of(s)
    if trees:
        titles = [f"tree {k + 1}" for k in range(len(trees))] if len(trees) > 1 else ["root shaded"]
        parts += ["<h2>The tree it runs along</h2>", f'<div class="diagram">{forest_svg(trees, titles, "trees", standalone=False)}</div>']
    if explanation.routes:
        rows = [[name(r["chunk"]), " → ".join(map(str, r["route"])) or "-", "" if r["total"] is None else number(r["total"]),
                 "" if r["average"] is None else number(r["average"]), "" if r["ends_on"] is None else f"rank {r['ends_on']}"]
                for r in explanation.routes]
        parts += ["<h2>Routes</h2>", _table(["chunk", "route", "total", f"÷ {s.ranks}", "complete on"], rows, "routes")]
    if explanation.finish:
        result = explanation.finish["result"]
        parts += [f"<h2>Finally every rank divides by {explanation.finish['divide_by']}</h2>",
                  _table(["rank"] + [name(c) for c in cells], [[str(r)] + [number(v) for v in result[r]] for r in range(s.ranks)], "finish")]
    data = json.dumps(frames, ensure_ascii=False).replace("</", "<\\/")
    parts += [f'<script type="application/json" id="frames">{data}</script>', f"<script>{SCRIPT}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"
