"""The offline HTML reference: its pages, generated from collspec itself.

    .venv/bin/python docs/sitegen.py build        # what `make docs` runs
    .venv/bin/python docs/sitegen.py diagrams     # rewrite docs/diagrams/ after a schedule changed

``build`` writes the Sphinx sources into ``build/docs-src/`` and the site
into ``build/docs/`` (open ``build/docs/index.html``). Nothing on a page is
written by hand where collspec can say it:

- the front page is the text of :mod:`collspec.spec` (its examples run as
  doctests in ``make test``);
- the reference pages are autodoc of every public function and class of
  ``spec/`` (their docstrings state pre- and postconditions);
- one page per built-in algorithm: its diagrams (``docs/diagrams/``, drawn by
  :mod:`collspec.models.diagram` from the schedules; ``tests/test_site.py``
  fails when one no longer matches its schedule), its cost read off the
  schedules by :mod:`collspec.models.cost` (a table, and alpha-beta time vs N
  as a plot), what ``collspec prove --json`` proved about it (rows named
  ``ALGORITHM.PROPERTY``, or ``GROUP.ALGORITHM``), and a step-through page;
- the checker's violation kinds, each with a zoo file and the report that
  ``collspec check --json`` writes for it;
- the Markdown notes under ``docs/`` (:data:`NOTES`: conformance matrices,
  the MPI libraries' algorithms, MSCCL, MSCCL++, benchmarks; each when present).

No page loads anything from the network: the theme (furo) is local, the
plots and diagrams are files of the site, and ``tests/test_site.py`` checks
the built HTML for remote resources.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from collspec.models.diagram import forest_svg, schedule_svg, trees_of
from collspec.models.generators import ALGORITHMS, generate
from collspec.models.layout import ScheduleError

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
DIAGRAMS = DOCS / "diagrams"
ZOO = ROOT / "tests" / "zoo"
ZOO_MSCCL = ROOT / "tests" / "zoo_msccl"
ZOO_BACKENDS = ROOT / "tests" / "zoo_backends"
#: Usage pages first in the contents (those present), then the reference; see :data:`NOTES`.
USAGE = ("install.md", "schedule-format.md", "backends.md", "gpu.md", "corpora.md", "cluster.md", "ci.md")
#: Notes known to come in this order after the reference pages; any other docs/*.md follows, by name.
ORDER = ("conformance.md", "mpi.md", "msccl.md", "mscclpp.md", "nccl.md", "bench.md")
#: docs/proofs.md is the text of the proofs page (:func:`proofs_page`), not a note of its own.
PROOFS_TEXT = "proofs.md"


def notes(folder: Path = DOCS) -> tuple[str, ...]:
    """Every Markdown page under docs/ that goes into the site as it is:
    the usage pages, then the known notes, then any other, by name."""
    present = {p.name for p in folder.glob("*.md")} - {PROOFS_TEXT}
    known = [n for n in USAGE + ORDER if n in present]
    return tuple(known + sorted(present - set(known)))


#: Markdown pages copied into the site (every docs/*.md but the proofs text).
NOTES = notes()
#: Rank counts tried for an algorithm's diagrams, first that works wins.
DIAGRAM_RANKS = (4, 6, 8)
#: Options for an algorithm's diagram where the defaults draw too many chunks
#: to read (nccl-tree's default is 12 elements: 12 colours over each other).
DIAGRAM_OPTIONS = {"nccl-tree": {"channels": 2, "chunk": 2, "parts": [2, 2]}}  # both trees: parts given (NCCL 2.30 runs 4 elements alone on channel 0)


def diagram_schedule(algorithm: str, collective: str, n: int):
    """The schedule an algorithm's diagram draws (with :data:`DIAGRAM_OPTIONS`)."""
    return generate(algorithm, collective, n, **DIAGRAM_OPTIONS.get(algorithm, {}))
COST_RANKS = tuple(range(2, 17)) + (20, 24, 28, 32, 40, 48, 56, 64)
COST_SIZES = ((64 * 1024, "64 KiB"), (256 * 1024 * 1024, "256 MiB"))
SPEC_MODULES = ("collectives", "contributions", "ops", "accuracy", "floating_point", "bandwidth", "kernel", "dtypes", "violations", "errors")


def rst_title(text: str, char: str = "=", over: bool = False) -> str:
    line = char * max(len(text), 3)
    return f"{line}\n{text}\n{line}\n" if over else f"{text}\n{line}\n"


def indent(text: str, by: str = "   ") -> str:
    return "\n".join(by + line if line.strip() else "" for line in text.splitlines())


# -- diagrams (committed under docs/diagrams/, compared by the tests) ---------------


def diagram_cases() -> list[tuple[str, str, int]]:
    """(algorithm, collective, ranks) of every diagram: each built-in
    algorithm's every collective, at the first rank count it accepts."""
    cases = []
    for algorithm, table in ALGORITHMS.items():
        for collective in table:
            for n in DIAGRAM_RANKS:
                try:
                    diagram_schedule(algorithm, collective, n)
                except ScheduleError:
                    continue
                cases.append((algorithm, collective, n))
                break
    return cases


def diagram_name(algorithm: str, collective: str, n: int, kind: str = "schedule") -> str:
    return f"{algorithm}-{collective}-{n}" + ("" if kind == "schedule" else f"-{kind}") + ".svg"


def diagrams() -> dict[str, str]:
    """Every diagram, file name -> SVG text, drawn from the schedules now."""
    out = {}
    for algorithm, collective, n in diagram_cases():
        schedule = diagram_schedule(algorithm, collective, n)
        out[diagram_name(algorithm, collective, n)] = schedule_svg(schedule)
        trees = trees_of(schedule)
        if trees:
            titles = [f"tree {k}" for k in range(len(trees))] if len(trees) > 1 else [f"{algorithm}, {n} ranks"]
            out[diagram_name(algorithm, collective, n, "tree")] = forest_svg(trees, titles, f"{schedule.label()}: its tree")
    return out


def write_diagrams(folder: Path = DIAGRAMS) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    drawn = diagrams()
    for old in folder.glob("*.svg"):
        if old.name not in drawn:
            old.unlink()
    for name, svg in drawn.items():
        (folder / name).write_text(svg, encoding="utf-8")
    return sorted(drawn)


def stale_diagrams(folder: Path = DIAGRAMS) -> list[str]:
    """What differs between ``folder`` and the diagrams drawn now: one line
    per missing, changed or extra file (empty when all match)."""
    drawn = diagrams()
    problems = []
    for name, svg in sorted(drawn.items()):
        path = folder / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif path.read_text(encoding="utf-8") != svg:
            problems.append(f"{name}: no longer matches its schedule")
    problems += [f"{p.name}: no schedule draws it" for p in sorted(folder.glob("*.svg")) if p.name not in drawn]
    return problems


# -- cost --------------------------------------------------------------------------


def cost_collective(algorithm: str) -> str:
    return "allreduce" if "allreduce" in ALGORITHMS[algorithm] else next(iter(ALGORITHMS[algorithm]))


@functools.lru_cache(maxsize=None)
def _cost_schedule(algorithm: str, n: int):
    try:
        return generate(algorithm, cost_collective(algorithm), n)
    except ScheduleError:
        return None


def cost_series(algorithm: str, nbytes: float) -> list[tuple[int, object]]:
    """(N, :class:`~collspec.models.cost.Cost`) for every N of COST_RANKS the algorithm accepts."""
    from collspec.models.cost import cost

    return [(n, cost(schedule, nbytes)) for n in COST_RANKS if (schedule := _cost_schedule(algorithm, n)) is not None]


def cost_plot(algorithm: str, path: Path) -> None:
    """Alpha-beta time vs N at two vector sizes, against the lower bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "collspec"
    figure, axes = plt.subplots(1, len(COST_SIZES), figsize=(9, 3.4))
    for ax, (nbytes, label) in zip(axes, COST_SIZES):
        series = cost_series(algorithm, nbytes)
        ns = [n for n, _ in series]
        ax.plot(ns, [c.seconds * 1e6 for _, c in series], marker=".", label=algorithm)
        ax.plot(ns, [c.lower_bound_seconds * 1e6 for _, c in series], linestyle="--", color="grey", label="lower bound")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks N")
        ax.set_ylabel("alpha-beta time (µs)")
        ax.set_title(f"{cost_collective(algorithm)} of {label}")
        ax.grid(True, alpha=0.3)
        ax.legend()
    figure.tight_layout()
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)


def cost_table(algorithm: str) -> str:
    from collspec.models.cost import DEFAULT_ALPHA, DEFAULT_BANDWIDTH

    rows = {n: c for n, c in cost_series(algorithm, 1.0)}
    big = {n: c for n, c in cost_series(algorithm, COST_SIZES[-1][0])}
    chosen = [n for n in (2, 3, 4, 8, 16, 64) if n in rows]
    lines = [
        f"Read off the {cost_collective(algorithm)} schedules by :func:`collspec.models.cost.cost` "
        f"(P is the vector's size; alpha = {DEFAULT_ALPHA * 1e6:g} µs per step, "
        f"{DEFAULT_BANDWIDTH / 1e9:g} GB/s per rank and direction; time for P = {COST_SIZES[-1][1]}). "
        f"``collspec cost --algorithm {algorithm} --ranks 4,8 --bytes 256M`` prints the same.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - N",
        "     - steps",
        "     - sent per rank",
        "     - busiest link",
        "     - lower bound per rank",
        f"     - time ({COST_SIZES[-1][1]})",
        "     - lower bound time",
    ]
    for n in chosen:
        c, b = rows[n], big[n]
        lines += [f"   * - {n}", f"     - {c.steps}", f"     - {c.sent:.4g} P", f"     - {c.busiest_link:.4g} P",
                  f"     - {c.lower_bound_bytes:.4g} P", f"     - {b.seconds * 1e3:.3f} ms", f"     - {b.lower_bound_seconds * 1e3:.3f} ms"]
    return "\n".join(lines) + "\n"


# -- proofs ------------------------------------------------------------------------


def run_prove(path: Path) -> None:
    """``collspec prove --json PATH`` (exit 1 is a failed proof: still a page)."""
    from collspec.cli import main

    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            code = main(["prove", "--json", str(path)])
        finally:
            sys.stdout = stdout
    if code not in (0, 1):
        raise SystemExit(f"collspec prove exited {code}")


def proof_rows(report: dict) -> list[dict]:
    rows = report.get("proofs") or report.get("stats", {}).get("proofs", [])
    try:
        from collspec.proofs.suite import suite

        statements = {p.name: p.statement for p in suite()}
    except Exception:  # the statements are a courtesy; the rows are the report's
        statements = {}
    return [dict(row, statement=row.get("statement") or statements.get(row["name"], "")) for row in rows]


def proofs_about(algorithm: str, rows: list[dict]) -> list[dict]:
    """Rows named ``ALGORITHM.PROPERTY``, or ``GROUP.ALGORITHM`` (a group
    proof about this algorithm), by name alone."""
    def about(name: str) -> bool:
        head, _, tail = name.partition(".")
        return head == algorithm or tail == algorithm

    return [row for row in rows if about(row["name"])]


def proof_table(rows: list[dict], link_algorithms: bool = False) -> str:
    if not rows:
        return "No proof in ``collspec prove`` names it yet.\n"
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 22 10 10 58", "", "   * - proof", "     - scope", "     - result", "     - statement"]
    for row in rows:
        name = f"``{row['name']}``"
        if link_algorithms:
            head, _, tail = row["name"].partition(".")
            target = head if head in ALGORITHMS else tail if tail in ALGORITHMS else None
            if target:
                name += f" (:doc:`{target} <algorithms/{target}>`)"
        statement = " ".join((row.get("statement") or "").split()) or "-"
        if row["result"] != "proved" and row.get("message"):
            statement += " — " + " ".join(str(row["message"]).split())
        lines += [f"   * - {name}", f"     - {row['scope']}", f"     - {row['result']}", f"     - {statement}"]
    return "\n".join(lines) + "\n"


# -- pages -------------------------------------------------------------------------


def index_page(has: set[str]) -> str:
    import collspec.spec as spec

    first, _, body = spec.__doc__.partition("\n")
    usage = [n[:-3] for n in USAGE if n in has]
    contents = usage[:1] + ["cli"] + usage[1:] + ["reference/index", "algorithms/index", "proofs", "violations"]
    contents += [n[:-3] for n in sorted(has - set(USAGE), key=lambda n: (n not in ORDER, ORDER.index(n) if n in ORDER else 0, n))]
    ring = diagram_name("ring-seed", "allreduce", 4)
    return "\n".join([
        rst_title("collspec: collective operations, specified", "#", over=True),
        "This is collspec's reference, built from the code by ``make docs`` and readable offline. "
        "The text below is the package text of :mod:`collspec.spec` (" + first.strip().rstrip(".") + "); "
        "every example on it runs in the test suite. The :doc:`algorithms <algorithms/index>` are drawn from their "
        "schedules, and what is :doc:`proved <proofs>` about them comes from ``collspec prove``. "
        "To install and run collspec, start with :doc:`install` and :doc:`the command line <cli>`." if "install.md" in has else
        "This is collspec's reference, built from the code by ``make docs`` and readable offline. "
        "The text below is the package text of :mod:`collspec.spec` (" + first.strip().rstrip(".") + "); "
        "every example on it runs in the test suite.",
        "",
        body,
        "",
        rst_title("How a ring all-reduce runs", "="),
        "The worked example's four ranks in a ring: each rank's vector is cut into four chunks. In each of the first "
        "three hops every rank sends one chunk to the next rank, which adds it into its own copy (solid arrows: "
        "reduce-scatter); after them each rank holds the full sum of one chunk. In the last three hops those sums are "
        "copied around the ring (dashed arrows: all-gather). Each arrow's colour is the chunk it carries.",
        "",
        f".. image:: diagrams/{ring}",
        "   :alt: ring-seed all-reduce on 4 ranks: 6 hops, one arrow per transfer",
        "",
        "Step through the same example hop by hop, with every cell's value and which ranks' inputs it holds: "
        "`the step-through page <explain/ring-seed.html>`_ (arrow keys move between hops; "
        "``collspec explain ring-seed --html FILE`` writes it).",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "   :caption: Contents",
        "",
        *[f"   {c}" for c in contents],
        "",
    ])


def reference_pages() -> dict[str, str]:
    """Every public function and class of spec/: an index page and one page
    per module (file name -> text)."""
    import importlib

    pages = {"index.rst": "\n".join([
        rst_title("Reference: the spec", "#", over=True),
        "Every public function and class of ``collspec.spec``, module by module; each docstring states the "
        "preconditions (what is refused, with :class:`~collspec.spec.errors.SpecError`) and the "
        "postconditions (what every rank holds afterwards).", "",
        ".. toctree::", "   :maxdepth: 1", "", *[f"   {m}" for m in SPEC_MODULES], ""])}
    for short in SPEC_MODULES:
        name = f"collspec.spec.{short}"
        module = importlib.import_module(name)
        out = [rst_title(f"``{name}``", "#", over=True), f".. module:: {name}", "",
               ".. testsetup:: *", "", f"   from {name} import *", "", _demote(inspect.cleandoc(module.__doc__ or "")), ""]
        members = []
        for attribute, value in vars(module).items():
            if attribute.startswith("_") or getattr(value, "__module__", None) != name:
                continue
            if inspect.isclass(value):
                members += [f".. autoclass:: {name}.{attribute}", "   :members:", ""]
            elif inspect.isfunction(value):
                members += [f".. autofunction:: {name}.{attribute}", ""]
        if members:
            out += [rst_title("Functions and classes", "="), *members]
        pages[f"{short}.rst"] = "\n".join(out) + "\n"
    return pages


def _escape_bars(lines: list[str]) -> list[str]:
    """``|x|`` in prose is absolute value, not a reST substitution: escape the
    bars outside code spans, doctest blocks and literal blocks."""
    out, literal, doctest = [], None, False
    for line in lines:
        stripped = line.strip()
        width = len(line) - len(line.lstrip())
        if literal is not None and stripped and width <= literal:
            literal = None
        if stripped.startswith(">>>"):
            doctest = True
        elif not stripped:
            doctest = False
        if literal is None and not doctest and "|" in line:
            parts = line.split("``")
            line = "``".join(p.replace("|", "\\|") if k % 2 == 0 else p for k, p in enumerate(parts))
        if literal is None and stripped.endswith("::"):
            literal = width
        out.append(line)
    return out


def _demote(text: str) -> str:
    """Section underlines of a module text, one level below the module's title."""
    lines = _escape_bars(text.splitlines())
    for i in range(1, len(lines)):
        line = lines[i]
        if line and len(set(line)) == 1 and line[0] in "=-~" and len(line) >= len(lines[i - 1].rstrip()) > 0:
            lines[i] = {"=": "-", "-": "~", "~": "^"}[line[0]] * len(line)
    return "\n".join(lines)


def link_notes(text: str, up: str = "") -> str:
    """``docs/NAME.md`` in plain text (not inside ````code````) becomes a link
    to that note's page when the note exists."""
    parts = text.split("``")
    for k in range(0, len(parts), 2):
        parts[k] = re.sub(r"(?<![\w/.])docs/([\w-]+)\.md\b",
                          lambda m: f":doc:`docs/{m[1]}.md <{up}{m[1]}>`" if (DOCS / f"{m[1]}.md").exists() else m[0], parts[k])
    return "``".join(parts)


def generator_module(algorithm: str):
    """The module that builds an algorithm's schedules (for a table entry
    that is a small lambda, the generator module it calls)."""
    import collspec.models.generators as package

    generator = ALGORITHMS[algorithm][cost_collective(algorithm)]
    module = inspect.getmodule(generator)
    if module is package:
        for name in getattr(generator, "__code__", None) and generator.__code__.co_names or ():
            if inspect.ismodule(getattr(package, name, None)):
                return getattr(package, name)
    return module


def algorithm_page(algorithm: str, rows: list[dict], cases: list[tuple[str, str, int]], explain_file: str | None) -> str:
    module = generator_module(algorithm)
    out = [rst_title(algorithm, "#", over=True)]
    collectives = ", ".join(f"``{c}``" for c in ALGORITHMS[algorithm])
    out += [f".. testsetup:: *", "", f"   from {module.__name__} import *", "",
            f"Collectives: {collectives}. From the text of ``{module.__name__}``:", "", link_notes(_demote(inspect.cleandoc(module.__doc__ or "")), "../"), ""]
    out += [rst_title("Diagrams", "="),
            "Drawn by :func:`collspec.models.diagram.schedule_svg` from the schedule itself: ranks as rows, hops as columns, "
            "one arrow per transfer coloured by the chunk it carries, solid for a reduce and dashed for a copy, the phases "
            f"named above. ``collspec explain {algorithm} --ranks N --format svg`` draws one.", ""]
    if explain_file:
        out += [f"Step through it hop by hop, with every cell's value and contributors: `the {algorithm} page <../explain/{explain_file}>`_ "
                f"(``collspec explain {algorithm} --ranks 4 --html FILE``).", ""]
    for a, collective, n in cases:
        if a != algorithm:
            continue
        out += [rst_title(f"{collective}, {n} ranks", "-"), f".. image:: ../diagrams/{diagram_name(a, collective, n)}",
                f"   :alt: {a} {collective} on {n} ranks", ""]
        tree = diagram_name(a, collective, n, "tree")
        if (DIAGRAMS / tree).exists():
            out += ["The tree it runs along (:func:`collspec.models.diagram.trees_of`: reduces go up it, broadcasts down), root shaded:", "",
                    f".. image:: ../diagrams/{tree}", f"   :alt: the tree of {a} {collective} on {n} ranks", ""]
    out += [rst_title("Cost", "="), cost_table(algorithm), "", f".. image:: ../plots/{algorithm}.svg", f"   :alt: alpha-beta time of {algorithm} vs N", ""]
    out += [rst_title("What is proved", "="),
            "The rows of ``collspec prove --json`` that name this algorithm (``" + algorithm + ".PROPERTY``, or a group's "
            "``GROUP." + algorithm + "``). The scope says for which N: ``all N>=2`` only where N is symbolic in the solver; "
            "``N<=K`` where every N up to K was checked.", "", proof_table(rows)]
    return "\n".join(out) + "\n"


#: One line per built-in algorithm for the algorithms index.
SUMMARIES = {
    "ring": "Ranks in a ring; N-1 hops of reduce-scatter, then N-1 of all-gather. Bandwidth-optimal, 2(N-1) steps.",
    "ring-seed": "The front page's worked example: the ring rotated so that on the first hop each rank sends the chunk with its own index.",
    "direct": "Every rank sends its data straight to every other rank in one step. One step, N-1 times the traffic of a ring.",
    "hub": "Reduce everything to one root, then broadcast the result from it.",
    "recursive-doubling": "Pairs of ranks exchange whole vectors at distance 1, 2, 4, ...; log2 N steps.",
    "halving-doubling": "Rabenseifner's algorithm: recursive halving for reduce-scatter, recursive doubling for all-gather.",
    "binary-tree": "Reduce up a binary tree to the root, broadcast back down it.",
    "hierarchical-ring": "A ring inside each group of ranks (a node's GPUs), a ring across the groups, a ring inside again.",
    "nccl-ring": "NCCL's ring with channels, per-channel rings and the last loop's rounding, as NCCL splits the work.",
    "nccl-tree": "NCCL's double binary tree: two complementary trees, each carrying half of the data.",
    "nccl-pat": "NCCL's Parallel Aggregated Trees for reduce-scatter and all-gather.",
}


def algorithms_index(chosen: list[str] | None = None) -> str:
    lines = [rst_title("Algorithms", "#", over=True),
             "The built-in algorithms (``collspec.models.generators.ALGORITHMS``), one page each with its diagrams, cost and "
             "proofs. ``collspec check -a NAME -c COLLECTIVE -n N`` checks one; ``collspec explain NAME --ranks N`` shows it "
             "hop by hop.", "",
             ".. list-table::", "   :header-rows: 1", "   :widths: 18 30 52", "",
             "   * - algorithm", "     - collectives", "     - how it works"]
    chosen = list(ALGORITHMS) if chosen is None else chosen
    for a in chosen:
        lines += [f"   * - :doc:`{a}`", f"     - {', '.join(ALGORITHMS[a])}", f"     - {SUMMARIES.get(a, '')}"]
    lines += ["", ".. toctree::", "   :hidden:", ""]
    return "\n".join(lines + [f"   {a}" for a in chosen]) + "\n"


def cli_page() -> str:
    """The command line, from collspec's own argparse parsers (so it cannot
    drift): every subcommand's ``--help``, at a fixed width of 100 columns."""
    from collspec.cli import COMMANDS, build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        out = [rst_title("The command line", "#", over=True),
               "Generated from collspec's own argument parsers when this site was built: each section is what "
               "``collspec COMMAND --help`` prints.", "",
               ".. list-table::", "   :header-rows: 1", "", "   * - command", "     - what it does"]
        out += [line for name, text in COMMANDS for line in (f"   * - `collspec {name}`_", f"     - {text}")]
        out += ["", rst_title("collspec", "="), ".. code-block:: text", "", indent(parser.format_help()), ""]
        for name, _ in COMMANDS:
            out += [rst_title(f"collspec {name}", "="), ".. code-block:: text", "", indent(subparsers[name].format_help()), ""]
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(out) + "\n"


def proofs_page(rows: list[dict], seconds: float, essay: str = "") -> str:
    """The proofs page, in Markdown: ``essay`` (docs/proofs.md: what is
    proved, the scopes, the premises, what is not proved), then every row
    of the ``collspec prove --json`` report the site is built from."""
    out = [essay.rstrip() + "\n" if essay else "# What is proved\n",
           "## Every row of `collspec prove`\n",
           f"All {len(rows)} rows of the `collspec prove --json` report this site was built from (the proofs took {seconds:.1f} s). "
           "Each algorithm's page lists the rows about it.\n"]
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["name"].partition(".")[0], []).append(row)
    for group, members in groups.items():
        out += [f"### {group}\n", "```{eval-rst}", proof_table(members, link_algorithms=True).rstrip(), "```\n"]
    return "\n".join(out) + "\n"


def _check_report(path: Path) -> dict:
    from collspec.cli import main

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "report.json"
        with open(os.devnull, "w") as quiet:
            stdout, stderr, sys.stdout, sys.stderr = sys.stdout, sys.stderr, quiet, quiet
            try:
                main(["check", str(path), "--json", str(out)])
            finally:
                sys.stdout, sys.stderr = stdout, stderr
        report = json.loads(out.read_text())
    report.get("stats", {}).pop("seconds", None)
    report["subject"] = path.relative_to(ROOT).as_posix()
    return report


#: Conformance's kinds, shown by running a zoo backend on the few cases that
#: show its bug: (backend under tests/zoo_backends/, conform options).
CONFORM_EXAMPLES = (
    ("avg_wrong_n.py:AvgWrongN", {"collectives": ["allreduce"], "dtypes": ["float32"], "ops": ["avg"], "sizes": [5]}),
    ("hangs_on_zero.py:HangsOnZero", {"collectives": ["allreduce"], "dtypes": ["int32"], "ops": ["sum"], "sizes": [0], "timeout": 3}),
    ("crashes_rank.py:CrashesRank", {"collectives": ["allreduce"], "dtypes": ["int32"], "ops": ["sum"], "sizes": [1009]}),
    ("avg_wrong_n.py:AvgWrongN", {"collectives": ["broadcast"], "dtypes": ["int32"], "ops": ["sum"], "sizes": [5]}),
)


def conform_reports() -> list[tuple[str, dict, dict]]:
    """(backend, options, report) of each CONFORM_EXAMPLES row: 4 ranks of
    real processes each, a few seconds a row."""
    from collspec.conformance.conform import conform

    out = []
    for backend, options in CONFORM_EXAMPLES:
        report = conform(str(ZOO_BACKENDS / backend), 4, "default", **options).report().to_json()
        report["subject"] = f"tests/zoo_backends/{backend}"
        report["stats"] = {k: v for k, v in report.get("stats", {}).items() if k in ("cases", "pass", "fail", "unsupported", "hang", "crash")}
        out.append((backend, options, report))
    return out


def conform_command(backend: str, options: dict) -> str:
    """The command line that runs the same cases as ``options``."""
    flag = {"collectives": "--collective", "dtypes": "--dtype", "ops": "--op", "sizes": "--sizes", "timeout": "--timeout"}
    parts = [f"{flag[k]} {','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in options.items()]
    return f"collspec conform --backend tests/zoo_backends/{backend} --world-size 4 " + " ".join(parts)


def zoo_reports() -> list[tuple[Path, dict]]:
    return [(p, _check_report(p)) for p in sorted(ZOO.glob("*.json")) + sorted(ZOO_MSCCL.glob("*.xml"))]


def _zoo_backend_table() -> dict[str, list[tuple[str, str]]]:
    """kind -> [(file, bug)] from tests/zoo_backends/README.md's table."""
    found: dict[str, list[tuple[str, str]]] = {}
    readme = ZOO_BACKENDS / "README.md"
    if not readme.exists():
        return found
    for line in readme.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for kind in re.findall(r"`([a-z-]+)`", cells[2]):
                found.setdefault(kind, []).append((cells[0].strip("`"), cells[1]))
    return found


def flagged_transfers(report: dict, kind: str) -> set[tuple[int, int, int]]:
    """(step, src, dst) of every transfer the report's ``kind`` violations
    name; for ``link-repeat`` also the first crossing (``first_step``)."""
    out = set()
    for v in report.get("violations", []):
        if v["kind"] != kind or None in (v.get("src"), v.get("dst")):
            continue
        for step in (v.get("step"), v.get("first_step")):
            if step is not None:
                out.add((step, v["src"], v["dst"]))
    return out


def violations_page(reports: list[tuple[Path, dict]], diagram_folder: Path, conformed: list[tuple[str, dict, dict]] = ()) -> str:
    from collspec.models.schedule_json import load
    from collspec.spec.violations import DEFINITIONS, KINDS

    out = [rst_title("Violation kinds", "#", over=True),
           "What the checkers report (:data:`collspec.spec.violations.KINDS`, the ``kind`` of every violation in a JSON "
           "report): each kind's definition, then an example. Where the bug zoo has a file that shows the kind — hand-broken "
           "schedules under ``tests/zoo/``, broken MSCCL programs under ``tests/zoo_msccl/``, broken backends under "
           "``tests/zoo_backends/`` — the example is that file and the report collspec writes for it, produced while this site "
           "was built; the test suite asserts the same reports.", ""]
    backends = _zoo_backend_table()
    recorded = recorded_examples()
    for kind in KINDS:
        out += [rst_title(f"``{kind}``", "="), DEFINITIONS[kind], ""]
        showing = [(p, r) for p, r in reports if any(v["kind"] == kind for v in r.get("violations", []))]
        if showing:
            path, report = min(showing, key=lambda pr: (len({v["kind"] for v in pr[1]["violations"]}), len(pr[1]["violations"]), pr[0].name))
            rel = path.relative_to(ROOT).as_posix()
            about = ""
            if path.suffix == ".json":
                about = json.loads(path.read_text()).get("name", "")
            out += [f"Zoo example: ``{rel}``" + (f" ({about})." if about else "."), ""]
            if path.suffix == ".json" and kind != "malformed":
                name = f"zoo-{path.stem}-{kind}.svg"  # one per kind: each has its own halo
                flagged = flagged_transfers(report, kind)
                (diagram_folder / name).write_text(schedule_svg(load(str(path)), flagged=flagged), encoding="utf-8")
                out += [f".. image:: diagrams/{name}", f"   :alt: the schedule of {path.name}", ""]
                if flagged:
                    named = ", ".join(f"step {s} (hop {s + 1}) {a}->{b}" for s, a, b in sorted(flagged))
                    out += [f"The transfers the report names have a red halo: {named}. Reports number steps from 0, as the "
                            "file does; the diagram labels each column with its hop (from 1) and its step.", ""]
            shown = dict(report)
            of_kind = [v for v in report["violations"] if v["kind"] == kind]
            others = len(report["violations"]) - len(of_kind)
            shown["violations"] = of_kind[:3]
            out += [f"``collspec check {rel} --json -``" + (f" (the {kind} violations; {others} of other kinds left out)" if others else "") + ":", "",
                    ".. code-block:: json", "", indent(json.dumps(shown, indent=1, ensure_ascii=False)), ""]
            if len(of_kind) > 3:
                out += [f"({len(of_kind) - 3} more of this kind left out.)", ""]
        elif any(v["kind"] == kind for _, _, r in conformed for v in r.get("violations", [])):
            backend, options, report = next((b, o, r) for b, o, r in conformed if any(v["kind"] == kind for v in r["violations"]))
            bug = next((bug for f, bug in backends.get(kind, []) if f == backend.split(":")[0]), "")
            of_kind = [v for v in report["violations"] if v["kind"] == kind]
            shown = dict(report, violations=of_kind[:2])
            out += [f"Zoo backend: ``tests/zoo_backends/{backend}``" + (f" ({bug})" if bug else "") + ", run on real "
                    f"rank processes while this site was built (``{conform_command(backend, options)}``):", "",
                    ".. code-block:: python", "", indent((ZOO_BACKENDS / backend.split(":")[0]).read_text().rstrip()), "",
                    "Its report (" + (f"{len(of_kind)} violations of this kind, 2 shown" if len(of_kind) > 2 else "JSON") + "):", "",
                    ".. code-block:: json", "", indent(json.dumps(shown, indent=1, ensure_ascii=False)), ""]
        elif kind in backends:
            out += ["Reported by ``collspec conform`` on real backends. Zoo backends under ``tests/zoo_backends/`` that show it "
                    "(``tests/test_conformance_zoo.py`` runs each and asserts its exact report):", ""]
            out += [f"- ``{f}``: {bug}" for f, bug in backends[kind]] + [""]
        elif kind in recorded:
            note, line = recorded[kind]
            out += [f"Found in the MPI libraries (:doc:`{note[:-3]}`), as ``collspec conform`` reports it:", "", ".. code-block:: text", "",
                    indent(textwrap.fill(line, 96, break_long_words=False, break_on_hyphens=False)), ""]
        else:
            out += ["This page has no example of it.", ""]
    return "\n".join(out) + "\n"


def recorded_examples() -> dict[str, tuple[str, str]]:
    """kind -> (note, one violation line) from the conformance results the
    Markdown notes record (``N x KIND, e.g. `LINE```), for kinds no zoo file shows."""
    found: dict[str, tuple[str, str]] = {}
    for note in ("mpi.md", "conformance.md"):
        path = DOCS / note
        if path.exists():
            for kind, line in re.findall(r"\d+ x ([a-z-]+), e\.g\. `([^`]+)`", path.read_text()):
                found.setdefault(kind, (note, line))
    return found


CONF = r'''# Generated by docs/sitegen.py; edit that file instead.
project = "collspec"
author = "collspec"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.doctest", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
html_theme = "furo"
html_title = "collspec reference"
copyright = "the collspec authors; Apache License 2.0"
# quotes and ellipses only: "--full" stays two hyphens, never an en dash
smartquotes_action = "qe"
html_extra_path = ["_extra"]
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
myst_heading_anchors = 3
suppress_warnings = ["myst.xref_missing"]
exclude_patterns = ["_extra"]

import re

CONTRACT = re.compile(r"^(\s*)(pre|post):\s*(.*)$")


def contracts_as_fields(app, what, name, obj, options, lines):
    """crosshair's ``pre:`` / ``post:`` docstring lines as a field list:
    Precondition / Postcondition, each expression as code."""
    out, previous_blank = [], True
    for line in lines:
        match = CONTRACT.match(line)
        if match:
            if not previous_blank and not (out and CONTRACT.match(out[-1].replace(":Precondition:", "pre:").replace(":Postcondition:", "post:"))):
                out.append("")
            indent, kind, expression = match.groups()
            out.append(f"{indent}:{'Precondition' if kind == 'pre' else 'Postcondition'}: ``{expression.strip()}``")
            previous_blank = False
            continue
        out.append(line)
        previous_blank = not line.strip()
    lines[:] = out


def setup(app):
    app.connect("autodoc-process-docstring", contracts_as_fields)
'''


def generate_sources(src: Path, prove_json: Path | None = None, conform: bool = True, algorithms: tuple[str, ...] | None = None) -> dict:
    """Write every page into ``src`` (a fresh folder); return what was made.
    ``algorithms`` limits the algorithm pages to those (a small site, for tests)."""
    if src.exists():
        shutil.rmtree(src)
    (src / "algorithms").mkdir(parents=True)
    (src / "_extra" / "explain").mkdir(parents=True)
    (src / "plots").mkdir()
    shutil.copytree(DIAGRAMS, src / "diagrams")
    (src / "conf.py").write_text(CONF)
    has = set()
    for note in notes():
        if (DOCS / note).exists():
            shutil.copy(DOCS / note, src / note)
            has.add(note)
    if (DOCS / "figures").exists():
        shutil.copytree(DOCS / "figures", src / "figures")
    if prove_json is None:
        run_prove(src / "prove.json")
    else:
        shutil.copy(prove_json, src / "prove.json")
    report = json.loads((src / "prove.json").read_text())
    rows = proof_rows(report)
    prove_seconds = float(report.get("stats", {}).get("seconds", 0.0))
    from collspec.models.explain import explain
    from collspec.models.page import explain_page

    cases = diagram_cases()
    chosen = [a for a in ALGORITHMS if algorithms is None or a in algorithms]
    for algorithm in chosen:
        collective = cost_collective(algorithm)
        schedule = generate(algorithm, collective, 4)
        example = "seed" if algorithm == "ring-seed" or (schedule.chunks == 4 and collective == "allreduce") else "random"
        try:
            page = explain_page(explain(schedule, example))
        except ScheduleError:
            page = explain_page(explain(schedule, "random"))
        (src / "_extra" / "explain" / f"{algorithm}.html").write_text(page, encoding="utf-8")
        cost_plot(algorithm, src / "plots" / f"{algorithm}.svg")
        (src / "algorithms" / f"{algorithm}.rst").write_text(algorithm_page(algorithm, proofs_about(algorithm, rows), cases, f"{algorithm}.html"))
    (src / "algorithms" / "index.rst").write_text(algorithms_index(chosen))
    (src / "index.rst").write_text(index_page(has))
    (src / "reference").mkdir()
    for name, text in reference_pages().items():
        (src / "reference" / name).write_text(text)
    essay = (DOCS / PROOFS_TEXT).read_text() if (DOCS / PROOFS_TEXT).exists() else ""
    (src / "proofs.md").write_text(proofs_page(rows, prove_seconds, essay))
    (src / "cli.rst").write_text(cli_page())
    (src / "violations.rst").write_text(violations_page(zoo_reports(), src / "diagrams", conform_reports() if conform else []))
    return {"pages": sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.suffix in (".rst", ".md")), "proofs": len(rows)}


REMOTE = re.compile(r"^\s*(https?:)?//", re.I)
CSS_REMOTE = re.compile(r"(url\(\s*['\"]?|@import\s+['\"])(https?:)?//", re.I)
SVG_REMOTE = re.compile(r"\bhref\s*=\s*['\"](https?:)?//", re.I)


def remote_resources(folder: Path) -> list[str]:
    """Everything under ``folder`` that would make a browser fetch from the
    network: a remote ``src``/``href`` on anything but a plain link
    (``<a>``), a remote ``url(...)`` or ``@import`` in CSS, a remote
    ``href`` in SVG. One line per finding, empty when the site is offline."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Resources(HTMLParser):
        def __init__(self, name: str):
            super().__init__()
            self.name = name

        def handle_starttag(self, tag, attrs):
            for key, value in attrs:
                if value is None:
                    continue
                if key in ("src", "srcset", "data", "poster") or (key == "href" and tag != "a"):
                    if any(REMOTE.match(part) for part in value.split(",")):
                        found.append(f"{self.name}: <{tag} {key}={value!r}>")
                if key == "style" and CSS_REMOTE.search(value):
                    found.append(f"{self.name}: <{tag} style={value!r}>")

        def handle_data(self, data):
            if self.lasttag == "style" and CSS_REMOTE.search(data):
                found.append(f"{self.name}: remote url in <style>")

    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.suffix == ".html":
            Resources(name).feed(path.read_text(encoding="utf-8", errors="replace"))
        elif path.suffix == ".css" and CSS_REMOTE.search(path.read_text(encoding="utf-8", errors="replace")):
            found.append(f"{name}: remote url in CSS")
        elif path.suffix == ".svg" and SVG_REMOTE.search(path.read_text(encoding="utf-8", errors="replace")):
            found.append(f"{name}: remote href in SVG")
    return found


def warnings_log(out: Path) -> Path:
    """Where :func:`build` writes Sphinx's warnings for the site in ``out``."""
    return out.parent / f"{out.name}-warnings.log"


def build(src: Path, out: Path, prove_json: Path | None = None, doctest: bool = False, conform: bool = True,
          algorithms: tuple[str, ...] | None = None) -> int:
    from sphinx.cmd.build import build_main

    made = generate_sources(src, prove_json, conform, algorithms)
    if out.exists():
        shutil.rmtree(out)
    code = build_main(["-q", "-b", "html", "-d", str(src.parent / "docs-doctrees"), "-w", str(warnings_log(out)), str(src), str(out)])
    if code == 0 and doctest:
        code = build_main(["-q", "-b", "doctest", "-d", str(src.parent / "docs-doctrees"), str(src), str(src.parent / "docs-doctest")])
    remote = remote_resources(out) if code == 0 else []
    for line in remote:
        print(f"docs: loads from the network: {line}", file=sys.stderr)
    print(f"docs: {len(made['pages'])} pages, {made['proofs']} proof rows -> {out / 'index.html'}")
    return code or (1 if remote else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="generate the sources and build the site")
    b.add_argument("--src", default=str(ROOT / "build" / "docs-src"))
    b.add_argument("--out", default=str(ROOT / "build" / "docs"))
    b.add_argument("--prove-json", help="use this `collspec prove --json` report instead of running the proofs")
    b.add_argument("--doctest", action="store_true", help="also run Sphinx's doctest builder over the pages")
    b.add_argument("--no-conform", action="store_true", help="leave out the conformance zoo's reports (they run real rank processes)")
    b.add_argument("--algorithms", metavar="A[,A...]", help="only these algorithms' pages (a small site, for tests)")
    sub.add_parser("diagrams", help="rewrite docs/diagrams/ from the schedules")
    args = parser.parse_args(argv)
    if args.command == "diagrams":
        names = write_diagrams()
        print(f"docs/diagrams: {len(names)} diagrams")
        return 0
    started = time.perf_counter()
    code = build(Path(args.src), Path(args.out), Path(args.prove_json) if args.prove_json else None, args.doctest, not args.no_conform,
                 tuple(args.algorithms.split(",")) if args.algorithms else None)
    print(f"docs: built in {time.perf_counter() - started:.1f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
