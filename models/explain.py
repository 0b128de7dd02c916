"""``collspec explain``: an algorithm run hop by hop, every addition written out.

The same schedule runs through the interpreter twice, once over numbers and
once over contributor sets, and every transfer is recorded with the
receiver's value before, the value received, the value after, and which
ranks' inputs are inside. :func:`explain` returns that as data;
:func:`render_text` and :func:`render_markdown` print it.

With ``--example seed`` and 4 ranks the numbers are the worked example's
four gradients, and the output retraces it: rank 1's chunk 0 becomes
0 + (+1) = +1 on hop 1, chunk 0 travels 0 -> 1 -> 2 -> 3 to a total of -2
(-0.50 after dividing by 4), and so on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..spec.contributions import complete
from ..spec.ops import finish
from .algebras import Numbers, contributions
from .interpreter import run
from .layout import ScheduleError
from .schedule import Schedule

#: The worked example's gradients: rank r's opinion of weights w0..w3.
WORKED_EXAMPLE = np.array([[1, -1, -1, -1], [0, 0, -2, 0], [-1, 1, -3, 1], [-2, 2, -4, 2]], dtype=np.float64)


@dataclass
class Explanation:
    title: str
    schedule: Schedule
    values: np.ndarray  # values[r][k]: rank r's input element k
    start: np.ndarray  # state before the first hop
    start_sets: np.ndarray
    hops: list[dict] = field(default_factory=list)
    routes: list[dict] = field(default_factory=list)
    finish: dict | None = None
    trees: list[list[int]] = field(default_factory=list)  # parent arrays a generator declares (meta["trees"])


#: algorithms whose trees :func:`declared_trees` gives without building the schedule
TREE_MODELS = ("nccl-tree",)


def declared_trees(algorithm: str, collective: str, n: int) -> dict:
    """The trees a tree model runs along (parents and children), without the
    per-hop state: what ``collspec explain nccl-tree --json`` writes unless
    asked for the hops. ScheduleError for other algorithms."""
    from .generators import nccl_tree
    from ..spec.collectives import collective_name

    if algorithm not in TREE_MODELS or collective_name(collective) != "allreduce":
        raise ScheduleError(f"{algorithm} {collective}: no declared trees; tree models: {', '.join(TREE_MODELS)} (allreduce)")
    if not 1 <= n <= 1 << 16:
        raise ScheduleError(f"{algorithm}: --ranks {n} must be 1..65536")
    return {"title": f"{algorithm} allreduce, {n} ranks: the trees", "algorithm": algorithm, "collective": "allreduce", "ranks": n,
            "trees": nccl_tree.trees(n)}


def example_values(schedule: Schedule, example: str, seed: int = 0) -> tuple[np.ndarray, str]:
    """Input values per rank and element, and a line saying where they come from."""
    counts = [len(cells) for cells in schedule.layout.inputs]
    if example == "seed":
        if schedule.ranks != 4 or any(c != 4 for c in counts):
            raise ScheduleError(
                f"the worked example has 4 ranks of 4 chunks; this schedule has {schedule.ranks} ranks "
                f"of {max(counts)} input chunks: use --example random"
            )
        return WORKED_EXAMPLE.copy(), "the worked example's four gradients"
    rng = np.random.default_rng(seed)
    return rng.integers(-4, 5, size=(schedule.ranks, max(counts))).astype(np.float64), f"random integers in -4..4 (seed {seed})"


def explain(schedule: Schedule, example: str = "seed", op: str = "avg") -> Explanation:
    """Run ``schedule`` over numbers and contributor sets, recording every hop."""
    values, source = example_values(schedule, example)
    numbers = Numbers([values[r] for r in range(schedule.ranks)], op="sum")
    sets = contributions()
    recorded: list[list[dict]] = [[] for _ in schedule.steps]
    number_run = run(schedule, numbers, history=True, observe=_recorder(recorded, "value"))
    set_run = run(schedule, sets, history=True, observe=_recorder(recorded, "set"))
    result = Explanation(
        title=f"{schedule.label()}, with {source}",
        schedule=schedule,
        values=values,
        start=number_run.history[0],
        start_sets=set_run.history[0],
    )
    for index, step in enumerate(schedule.steps):
        transfers = sorted(recorded[index], key=lambda t: (t["src"], t["dst"]))
        result.hops.append(
            {
                "hop": index + 1,
                "phase": step.phase or "",
                "name": step.name or "",
                "transfers": transfers,
                "state": number_run.history[index + 1],
                "sets": set_run.history[index + 1],
            }
        )
    result.routes = _routes(schedule, result)
    if schedule.meta and schedule.meta.get("trees"):
        from .diagram import trees_of

        result.trees = trees_of(schedule)
    if op == "avg" and schedule.collective == "allreduce":
        result.finish = {"op": "avg", "divide_by": schedule.ranks, "result": finish("avg", number_run.state, schedule.ranks, np.float64)}
    return result


def _recorder(recorded: list[list[dict]], key: str):
    def observe(index, step, positions, before, incoming, after):
        rows = recorded[index]
        if key == "value":
            for j, p in enumerate(positions):
                t = step.transfer(int(p))
                t.update(before=float(before[j]), received=float(incoming[j]), after=float(after[j]), position=int(p))
                rows.append(t)
        else:
            by_position = {t["position"]: t for t in rows}
            for j, p in enumerate(positions):
                by_position[int(p)]["contributors"] = str(after[j])

    return observe


def _routes(schedule: Schedule, result: Explanation) -> list[dict]:
    """For each chunk: the chain of ranks its partial sum travelled through in
    the reduce phase, its total where it became complete, and that rank."""
    n = schedule.ranks
    routes = []
    for chunk in range(schedule.chunks):
        path: list[int] = []
        complete_at = None
        total = None
        for hop in result.hops:
            for t in hop["transfers"]:
                if t["op"] == "reduce" and t["dst_chunk"] == chunk:
                    if not path:
                        path.append(t["src"])
                    if path[-1] == t["src"]:
                        path.append(t["dst"])
            for r in range(n):
                cell = hop["sets"][r][chunk]
                if complete_at is None and cell == complete(n, chunk):
                    complete_at, total = r, float(hop["state"][r][chunk])
        if path or complete_at is not None:
            routes.append({"chunk": chunk, "route": path, "total": total, "average": None if total is None else total / n, "ends_on": complete_at})
    return routes


# -- rendering -----------------------------------------------------------------


def number(x: float) -> str:
    """+1, 0, -10, -0.50: the worked example's way of writing values."""
    if np.isnan(x):
        return "?"
    if float(x).is_integer():
        return "0" if x == 0 else f"{x:+.0f}"
    return f"{x:+.2f}"


def _table(schedule: Schedule, state, sets, markdown: bool) -> list[str]:
    name = schedule.layout.cell_name
    header = ["rank"] + [name(c) for c in range(schedule.layout.cells)]
    rows = [[str(r)] + [f"{number(state[r][c])} ({sets[r][c]})" for c in range(schedule.layout.cells)] for r in range(schedule.ranks)]
    return _grid(header, rows, markdown)


def _grid(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  " + "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return [line(header)] + [line(r) for r in rows]


def transfer_line(schedule: Schedule, t: dict) -> str:
    name = schedule.layout.cell_name
    what = f"rank {t['src']} -> rank {t['dst']}: {name(t['src_chunk'])}"
    if t["op"] == "reduce":
        return (
            f"{what}, reduce: rank {t['dst']}'s {name(t['dst_chunk'])} becomes "
            f"{number(t['before'])} + ({number(t['received'])}) = {number(t['after'])}   [{t['contributors']}]"
        )
    return f"{what}, copy: rank {t['dst']}'s {name(t['dst_chunk'])} becomes {number(t['after'])}   [{t['contributors']}]"


def render(explanation: Explanation, markdown: bool = False) -> str:
    s = explanation.schedule
    h = (lambda text, level=2: f"{'#' * level} {text}") if markdown else (lambda text, level=2: text if level == 1 else f"\n{text}")
    out = [h(explanation.title, 1)]
    for k, parent in enumerate(explanation.trees):
        out.append(h(f"Tree {k}" if len(explanation.trees) > 1 else "Tree"))  # numbered from 0, as NCCL's tree 0 and tree 1
        out += [("    " if markdown else "  ") + line for line in tree_lines(parent)]
    out.append(h("Start"))
    out += _table(s, explanation.start, explanation.start_sets, markdown)
    if s.collective in ("allreduce", "reduce_scatter", "reduce"):
        totals = explanation.values.sum(axis=0)
        out.append(("" if markdown else "  ") + "column totals we want: " + "  ".join(number(v) for v in totals))
    for hop in explanation.hops:
        label = f"Hop {hop['hop']}" + (f" ({hop['phase']})" if hop["phase"] else "")
        out.append(h(label))
        out += [("- " if markdown else "  ") + transfer_line(s, t) for t in hop["transfers"]]
        out.append("")
        out += _table(s, hop["state"], hop["sets"], markdown)
    if explanation.routes:
        out.append(h("Routes"))
        rows = []
        for r in explanation.routes:
            route = " -> ".join(str(x) for x in r["route"]) if r["route"] else "-"
            average = "" if r["average"] is None else number(r["average"])
            rows.append([s.layout.cell_name(r["chunk"]), route, "" if r["total"] is None else number(r["total"]), average, "" if r["ends_on"] is None else f"rank {r['ends_on']}"])
        out += _grid(["chunk", "route", "total", f"÷ {s.ranks}", "complete on"], rows, markdown)
    if explanation.finish:
        out.append(h(f"Finally every rank divides by {explanation.finish['divide_by']}"))
        result = explanation.finish["result"]
        rows = [[str(r)] + [number(v) for v in result[r]] for r in range(s.ranks)]
        out += _grid(["rank"] + [s.layout.cell_name(c) for c in range(s.layout.cells)], rows, markdown)
    return "\n".join(out) + "\n"


def tree_lines(parent: list[int]) -> list[str]:
    """A parent array drawn as an outline, root first, children by rank.

    >>> print("\\n".join(tree_lines([-1, 2, 0, 2])))
    0
    └── 2
        ├── 1
        └── 3
    """
    from .diagram import check_parents

    root = check_parents(parent)
    children: dict[int, list[int]] = {r: [] for r in range(len(parent))}
    for r, p in enumerate(parent):
        if p != -1:
            children[p].append(r)
    lines = [str(root)]
    stack = [(c, "", i == len(children[root]) - 1) for i, c in reversed(list(enumerate(children[root])))]
    while stack:
        r, prefix, last = stack.pop()
        lines.append(f"{prefix}{'└── ' if last else '├── '}{r}")
        below = prefix + ("    " if last else "│   ")
        kids = children[r]
        stack += [(c, below, i == len(kids) - 1) for i, c in reversed(list(enumerate(kids)))]
    return lines


def _trees_json(explanation: Explanation) -> list[dict]:
    declared = explanation.schedule.meta.get("trees") if explanation.schedule.meta else None
    if declared and all(isinstance(t, dict) and "children" in t for t in declared):
        return [{"parent": t["parent"], "children": t["children"]} for t in declared]
    return [{"parent": p} for p in explanation.trees]


def to_json(explanation: Explanation) -> dict:
    s = explanation.schedule

    def grid(state, sets):
        return [[{"value": float(state[r][c]), "contributors": str(sets[r][c])} for c in range(s.layout.cells)] for r in range(s.ranks)]

    return {
        "title": explanation.title,
        "algorithm": s.name,
        "collective": s.collective,
        "ranks": s.ranks,
        "chunks": s.chunks,
        "start": grid(explanation.start, explanation.start_sets),
        "hops": [
            {
                "hop": hop["hop"],
                "phase": hop["phase"],
                "transfers": [
                    {k: t[k] for k in ("src", "dst", "src_chunk", "dst_chunk", "op", "before", "received", "after", "contributors")}
                    for t in hop["transfers"]
                ],
                "state": grid(hop["state"], hop["sets"]),
            }
            for hop in explanation.hops
        ],
        "routes": explanation.routes,
        **({"trees": _trees_json(explanation)} if explanation.trees else {}),
        "finish": None
        if explanation.finish is None
        else {"op": "avg", "divide_by": explanation.finish["divide_by"], "result": explanation.finish["result"].tolist()},
    }

