"""Diagrams of schedules, as SVG text built from the schedule itself.

Two drawings, both pure string building (no dependency):

- :func:`schedule_svg`: ranks as rows, hops (steps) as columns. Every
  transfer is one arrow from its sender's row at the start of its hop to its
  receiver's row at the end, coloured by the chunk it carries
  (:func:`chunk_colour`); a ``reduce`` is a solid line, a ``copy`` a dashed
  one; a band above the hops names each phase. A legend says all that.
- :func:`tree_svg`: any tree given as a parent array (``parent[r]`` is rank
  r's parent, ``-1`` for the root), drawn root on top.
  :func:`trees_of` finds the trees a schedule runs along.

Every arrow is a ``<path class="transfer reduce|copy">`` carrying its hop,
ranks and chunks as ``data-`` attributes, so tests and the step-through page
(:mod:`collspec.models.page`) read the drawing as data:

>>> from collspec.models.generators import generate
>>> ring = generate("ring", "allreduce", 4)
>>> svg = schedule_svg(ring)
>>> svg.count('class="transfer ') == ring.transfers
True
>>> svg.count('class="transfer reduce"'), svg.count('class="transfer copy"')
(12, 12)
>>> tree = tree_svg([-1, 0, 0, 1])
>>> tree.count('class="edge"'), tree.count('class="node"')
(3, 4)
>>> trees_of(generate("binary-tree", "allreduce", 5))
[[-1, 0, 0, 1, 1]]

``standalone=False`` leaves out the XML namespace, which inline SVG in HTML
does not need (so a page holds no URL at all).
"""

from __future__ import annotations

from html import escape

import numpy as np

from .layout import ScheduleError
from .schedule import REDUCE, Schedule

#: The first chunk colours (a palette that stays distinguishable for most
#: colour vision); later chunks step round the hue circle by the golden angle.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")

#: Drawings larger than this are refused: the picture would be unreadable.
MAX_TRANSFERS = 20_000

COLUMN, ROW, LEFT, TOP, RIGHT = 96, 56, 72, 58, 24
DASH = "6 4"
SVG_NS = ' xmlns="http://www.w3.org/2000/svg"'


def chunk_colour(chunk: int) -> str:
    """The colour of chunk ``chunk`` in every diagram.

    >>> chunk_colour(0), chunk_colour(10) != chunk_colour(0)
    ('#1f77b4', True)
    """
    if chunk < len(PALETTE):
        return PALETTE[chunk]
    return f"hsl({(chunk * 137.508) % 360:.1f}, 65%, 42%)"


def _open(width: float, height: float, title: str, standalone: bool, kind: str) -> list[str]:
    ns = SVG_NS if standalone else ""
    return [
        f'<svg{ns} class="collspec-{kind}" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        '<rect width="100%" height="100%" fill="#ffffff"/>',
    ]


def _phases(schedule: Schedule) -> list[tuple[str, int, int]]:
    """Runs of consecutive steps with the same phase: (phase, first, last)."""
    runs: list[tuple[str, int, int]] = []
    for index, step in enumerate(schedule.steps):
        phase = step.phase or ""
        if runs and runs[-1][0] == phase:
            runs[-1] = (phase, runs[-1][1], index)
        else:
            runs.append((phase, index, index))
    return runs


def _fit(text: str, width: float) -> str:
    """``text`` shortened with an ellipsis to fit ``width`` pixels (about
    6.5 pixels a character at the diagrams' font size)."""
    room = max(int(width / 6.5) - 1, 3)
    return text if len(text) <= room else text[: room - 1] + "…"


def _lanes(step) -> np.ndarray:
    """For each transfer of a step: its place among those on the same
    (src, dst) pair, and how many share it, so parallel arrows fan out."""
    n = len(step)
    place, count = np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    seen: dict[tuple[int, int], list[int]] = {}
    for i in range(n):
        seen.setdefault((int(step.src[i]), int(step.dst[i])), []).append(i)
    for members in seen.values():
        for k, i in enumerate(members):
            place[i], count[i] = k, len(members)
    return np.stack([place, count])


def schedule_svg(schedule: Schedule, title: str | None = None, standalone: bool = True, flagged: set[tuple[int, int, int]] = frozenset()) -> str:
    """The schedule as an SVG diagram: ranks as rows, hops as columns (each
    labelled with its hop, from 1, and its step as files and reports number
    it, from 0), one arrow per transfer (colour: chunk carried; solid:
    reduce; dashed: copy), named phases above the hops. Transfers named in ``flagged`` as
    (step, src, dst), steps from 0 as in reports, get a red halo
    (``<path class="flag">``) under their arrow."""
    if schedule.transfers > MAX_TRANSFERS:
        raise ScheduleError(f"{schedule.label()} has {schedule.transfers} transfers; diagrams stop at {MAX_TRANSFERS}: use fewer ranks")
    title = title or schedule.label()
    n, steps = schedule.ranks, len(schedule.steps)
    chunks_drawn = sorted({int(c) for step in schedule.steps for c in step.src_chunk})
    legend_rows = 1 + (len(chunks_drawn) + 5) // 6
    width = LEFT + COLUMN * max(steps, 1) + RIGHT
    grid_bottom = TOP + ROW * (n - 1) + 24
    height = grid_bottom + 22 * legend_rows + 16
    width = max(width, LEFT + 6 * 100)
    x = lambda s: LEFT + COLUMN * s  # noqa: E731 - boundary before hop s+1
    y = lambda r: TOP + 12 + ROW * r  # noqa: E731
    out = _open(width, height, title, standalone, "schedule")
    out.append("<defs>")
    for c in chunks_drawn:
        out.append(f'<marker id="head-{c}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
                   f'<path d="M0,0 L10,5 L0,10 z" fill="{chunk_colour(c)}"/></marker>')
    out.append("</defs>")
    # phases: a band above the hops, a line between phases
    shades = ("#eef3fb", "#fbf1e6")
    for k, (phase, first, last) in enumerate(_phases(schedule)):
        x0, x1 = x(first), x(last + 1)
        if not phase:  # an unnamed phase: no band to label
            continue
        out.append(f'<g class="phase" data-phase="{escape(phase)}" data-first-hop="{first + 1}" data-last-hop="{last + 1}">')
        out.append(f'<rect x="{x0:.1f}" y="4" width="{x1 - x0:.1f}" height="18" fill="{shades[k % 2]}" stroke="#c8cdd6"/>')
        out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="17" text-anchor="middle" fill="#333">{escape(_fit(phase or "-", x1 - x0))}'
                   f"<title>{escape(phase or '-')}</title></text>")
        if first:
            out.append(f'<line x1="{x0:.1f}" y1="4" x2="{x0:.1f}" y2="{grid_bottom - 10}" stroke="#9aa3b0" stroke-dasharray="2 3"/>')
        out.append("</g>")
    for s in range(steps):
        out.append(f'<text class="hop-label" x="{(x(s) + x(s + 1)) / 2:.1f}" y="36" text-anchor="middle" fill="#555">hop {s + 1}</text>')
        out.append(f'<text class="step-label" x="{(x(s) + x(s + 1)) / 2:.1f}" y="49" text-anchor="middle" fill="#888" '
                   f'font-size="10">step {s}</text>')
    for r in range(n):
        out.append(f'<text class="rank-label" x="{LEFT - 10}" y="{y(r) + 4:.1f}" text-anchor="end">rank {r}</text>')
        out.append(f'<line class="rank-row" x1="{x(0)}" y1="{y(r):.1f}" x2="{x(max(steps, 1))}" y2="{y(r):.1f}" stroke="#e1e4e8"/>')
    name = schedule.layout.cell_name
    for s, step in enumerate(schedule.steps):
        lanes = _lanes(step)
        for i in range(len(step)):
            src, dst, sc, dc = int(step.src[i]), int(step.dst[i]), int(step.src_chunk[i]), int(step.dst_chunk[i])
            op = "reduce" if int(step.op[i]) == REDUCE else "copy"
            spread = min(8.0, ROW * 0.5 / lanes[1][i])
            offset = (lanes[0][i] - (lanes[1][i] - 1) / 2) * spread
            x0, x1 = x(s) + 6, x(s + 1) - 6
            y0, y1 = y(src) + offset, y(dst) + offset
            if src == dst:  # a local copy or reduce: a bow along the row
                d = f"M{x0:.1f},{y0:.1f} Q{(x0 + x1) / 2:.1f},{y0 - ROW * 0.45:.1f} {x1:.1f},{y1:.1f}"
            else:
                d = f"M{x0:.1f},{y0:.1f} L{x1:.1f},{y1:.1f}"
            dash = f' stroke-dasharray="{DASH}"' if op == "copy" else ""
            if (s, src, dst) in flagged:
                out.append(f'<path class="flag" data-hop="{s + 1}" d="{d}" fill="none" stroke="#e0001b" stroke-opacity="0.35" stroke-width="9"/>')
            label = f"hop {s + 1}: rank {src} -> rank {dst}, {name(sc)}" + (f" into {name(dc)}" if dc != sc else "") + f", {op}"
            out.append(
                f'<path class="transfer {op}" data-hop="{s + 1}" data-src="{src}" data-dst="{dst}" data-src-chunk="{sc}" '
                f'data-dst-chunk="{dc}" d="{d}" fill="none" stroke="{chunk_colour(sc)}" stroke-width="2"{dash} '
                f'marker-end="url(#head-{sc})"><title>{escape(label)}</title></path>'
            )
    # legend: line styles, then one swatch per chunk
    ly = grid_bottom + 8
    out.append('<g class="legend">')
    out.append(f'<line x1="{LEFT}" y1="{ly:.1f}" x2="{LEFT + 30}" y2="{ly:.1f}" stroke="#333" stroke-width="2"/>')
    out.append(f'<text x="{LEFT + 36}" y="{ly + 4:.1f}">reduce (receiver combines)</text>')
    out.append(f'<line x1="{LEFT + 230}" y1="{ly:.1f}" x2="{LEFT + 260}" y2="{ly:.1f}" stroke="#333" stroke-width="2" stroke-dasharray="{DASH}"/>')
    out.append(f'<text x="{LEFT + 266}" y="{ly + 4:.1f}">copy (receiver overwrites)</text>')
    for k, c in enumerate(chunks_drawn):
        cx, cy = LEFT + 100 * (k % 6), ly + 22 * (1 + k // 6)
        out.append(f'<rect class="swatch" data-chunk="{c}" x="{cx}" y="{cy - 6:.1f}" width="14" height="12" fill="{chunk_colour(c)}"/>')
        out.append(f'<text x="{cx + 20}" y="{cy + 4:.1f}">{escape(name(c))}</text>')
    out.append("</g></svg>")
    return "\n".join(out) + "\n"


def check_parents(parent: list[int]) -> int:
    """Validate a parent array and return its root: exactly one ``-1``,
    every other entry a rank, no cycle.

    >>> check_parents([1, -1, 1])
    1
    >>> check_parents([1, 0])
    Traceback (most recent call last):
    ...
    ValueError: a tree needs exactly one root (parent -1); got 0
    """
    n = len(parent)
    roots = [r for r, p in enumerate(parent) if p == -1]
    if len(roots) != 1:
        raise ValueError(f"a tree needs exactly one root (parent -1); got {len(roots)}")
    for r, p in enumerate(parent):
        if p != -1 and not (isinstance(p, (int, np.integer)) and 0 <= p < n and p != r):
            raise ValueError(f"parent[{r}] = {p!r} is not another rank of 0..{n - 1}")
    for r in range(n):
        seen, at = set(), r
        while at != -1:
            if at in seen:
                raise ValueError(f"rank {r}'s ancestors form a cycle")
            seen.add(at)
            at = parent[at]
    return roots[0]


def _tree_body(parent: list[int], title: str) -> tuple[float, float, list[str]]:
    """Width, height and SVG elements of one tree drawing."""
    root = check_parents(parent)
    n = len(parent)
    children: dict[int, list[int]] = {r: [] for r in range(n)}
    for r, p in enumerate(parent):
        if p != -1:
            children[p].append(r)
    depth, order = {root: 0}, [root]
    for r in order:  # breadth first
        for c in children[r]:
            depth[c] = depth[r] + 1
            order.append(c)
    slot: dict[int, float] = {}
    leaves = [0]

    def place(r: int) -> None:  # leaves take the next slot; a parent sits above its children
        if not children[r]:
            slot[r] = leaves[0]
            leaves[0] += 1
            return
        for c in children[r]:
            place(c)
        slot[r] = (slot[children[r][0]] + slot[children[r][-1]]) / 2

    place(root)
    gap_x, gap_y, pad = 56, 64, 30
    width = max(pad * 2 + gap_x * max(leaves[0] - 1, 0), 160)
    height = pad * 2 + gap_y * max(depth.values()) + 20
    pos = {r: (pad + gap_x * slot[r], pad + 10 + gap_y * depth[r]) for r in range(n)}
    out = [f'<g class="tree" data-root="{root}">',
           f'<text x="{width / 2:.1f}" y="16" text-anchor="middle" fill="#333">{escape(title)}</text>']
    for r in range(n):
        if parent[r] != -1:
            (x0, y0), (x1, y1) = pos[r], pos[parent[r]]
            out.append(f'<line class="edge" data-child="{r}" data-parent="{parent[r]}" x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="#556" stroke-width="2"/>')
    for r in range(n):
        px, py = pos[r]
        fill = "#fde9c9" if r == root else "#e3ecfa"
        out.append(f'<g class="node" data-rank="{r}"><circle cx="{px:.1f}" cy="{py:.1f}" r="15" fill="{fill}" stroke="#334"/>'
                   f'<text x="{px:.1f}" y="{py + 4:.1f}" text-anchor="middle">{r}</text></g>')
    out.append("</g>")
    return width, height, out


def tree_svg(parent: list[int], title: str = "tree", standalone: bool = True) -> str:
    """A tree from its parent array, root on top (shaded), children in rank
    order; an edge joins each rank to its parent (a reduce travels up it, a
    broadcast down)."""
    return forest_svg([parent], [title], title, standalone)


def forest_svg(parents: list[list[int]], titles: list[str], title: str = "trees", standalone: bool = True) -> str:
    """Several trees side by side in one drawing (NCCL's double binary tree
    is two trees over the same ranks)."""
    bodies = [_tree_body(p, t) for p, t in zip(parents, titles, strict=True)]
    width = sum(b[0] for b in bodies) + 20 * (len(bodies) - 1)
    height = max(b[1] for b in bodies)
    out = _open(width, height, title, standalone, "tree")
    left = 0.0
    for w, _, body in bodies:
        out.append(f'<g transform="translate({left:.1f},0)">')
        out += body
        out.append("</g>")
        left += w + 20
    out.append("</svg>")
    return "\n".join(out) + "\n"


def trees_of(schedule: Schedule) -> list[list[int]]:
    """The trees a schedule runs along (reduces up, broadcasts down), as parent arrays.

    ``schedule.meta["trees"]`` when a generator declares them (NCCL's double
    binary tree has two; parent arrays, or ``{"parent": [...]}`` as
    ``explain --json`` carries them); otherwise read off the reduces between ranks: when
    every rank but one reduces into exactly one other rank and that forms a
    tree, that tree. A ring (every rank sends on) or direct exchange (every
    rank sends to all) is no tree: ``[]``.
    """
    declared = schedule.meta.get("trees") if schedule.meta else None
    if declared:  # [parent, ...] or [{"parent": parent}, ...] as explain --json writes them
        return [list(map(int, t["parent"] if isinstance(t, dict) else t)) for t in declared]
    n = schedule.ranks
    reduces = [set() for _ in range(n)]  # rank -> the ranks it reduces into
    senders = [set() for _ in range(n)]  # rank -> the ranks it receives copies from
    for step in schedule.steps:
        between = step.src != step.dst
        for s_, d_, op in zip(step.src[between].tolist(), step.dst[between].tolist(), step.op[between].tolist()):
            (reduces[s_].add(d_) if op == REDUCE else senders[d_].add(s_))
    links = reduces if any(reduces) else senders  # reduce up the tree, or broadcast down it
    if n < 2 or any(len(t) > 1 for t in links):
        return []
    parent = [next(iter(t)) if t else -1 for t in links]
    try:
        check_parents(parent)
    except ValueError:
        return []
    return [parent]
