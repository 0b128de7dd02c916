"""Hop-by-hop state of an algorithm: every transfer, every addition written
out, the contributor set of every cell, each chunk's route, and the final
division for avg. `collspec explain ring-seed --ranks 4` retraces the worked
example of the reference texts. `--format svg` prints the schedule's diagram
(`--diagram tree` the tree it runs along); `--html FILE` writes a
self-contained page that steps through the hops."""

from __future__ import annotations

from ..spec.errors import CollspecError


def configure(parser):
    parser.add_argument("algorithm", metavar="A", help="a built-in algorithm, e.g. ring-seed")
    parser.add_argument("--ranks", "-n", type=int, default=4, metavar="N")
    parser.add_argument("--collective", "-c", default="allreduce", metavar="C")
    parser.add_argument("--example", choices=["seed", "random"], default=None,
                        help="seed: the worked example's four gradients (4 ranks of 4 chunks); random: random small integers "
                             "(default: seed where the schedule has the worked example's shape, random otherwise)")
    parser.add_argument("--op", choices=["avg", "sum"], default="avg", help="avg divides by N at the end, as gradient averaging does")
    parser.add_argument("--format", choices=["text", "markdown", "json", "svg"], default=None,
                        help="text (the default), markdown, json; svg: the schedule as a diagram (ranks as rows, hops as columns)")
    parser.add_argument("--diagram", choices=["schedule", "tree"], default="schedule",
                        help="with --format svg: the schedule, or the tree(s) it runs along")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained page that steps through the hops")
    parser.add_argument("--hops", action="store_true",
                        help="tree models (nccl-tree): also the hop-by-hop state; without it, only the trees (parents and children)")
    parser.add_argument("--json", metavar="PATH", help="also write the explanation as JSON (--format json's content) to PATH ('-' for stdout); "
                                                      "it carries \"trees\": [{\"parent\": [...]}] for algorithms that run along declared trees")


def run(args) -> int:
    import json

    from ..models.explain import explain, render, to_json
    from ..models.generators import generate

    if args.diagram != "schedule" and args.format != "svg":
        raise CollspecError("--diagram applies to --format svg only")
    if args.html and args.format:
        raise CollspecError(f"--html writes a page, --format {args.format} prints to stdout: give one of them")
    from ..models.explain import TREE_MODELS

    if args.algorithm in TREE_MODELS and not args.hops and not args.html and args.format != "svg":
        return _trees_only(args)
    schedule = generate(args.algorithm, args.collective, args.ranks)
    if args.format == "svg":
        print(_svg(schedule, args.diagram), end="")
        return 0
    explanation = explain(schedule, args.example or default_example(schedule), args.op)
    if args.json:
        from ..report import write_json

        write_json(to_json(explanation), args.json)
        if args.json == "-":
            return 0
    if args.html:
        from ..models.page import explain_page

        _write(args.html, explain_page(explanation))
        return 0
    if args.format == "json":
        print(json.dumps(to_json(explanation), indent=1))
    else:
        print(render(explanation, markdown=args.format == "markdown"), end="")
    return 0


def _trees_only(args) -> int:
    """A tree model without --hops: its trees, parents and children."""
    import json

    from ..models.explain import declared_trees, tree_lines

    data = declared_trees(args.algorithm, args.collective, args.ranks)
    if args.json:
        from ..report import write_json

        write_json(data, args.json)
        if args.json == "-":
            return 0
    if args.format == "json":
        print(json.dumps(data))
        return 0
    markdown = args.format == "markdown"
    out = [("# " if markdown else "") + data["title"] + " (--hops: every hop)", ""]
    for k, tree in enumerate(data["trees"]):
        out += [("## " if markdown else "") + (f"Tree {k}" if len(data["trees"]) > 1 else "Tree")]  # numbered from 0, as NCCL's tree 0 and tree 1
        out += [("    " if markdown else "  ") + line for line in tree_lines(tree["parent"])] + [""]
    print("\n".join(out), end="")
    return 0


def default_example(schedule) -> str:
    """``seed`` where the schedule has the worked example's shape, else ``random``."""
    fits = schedule.ranks == 4 and all(len(cells) == 4 for cells in schedule.layout.inputs)
    return "seed" if fits else "random"


def _svg(schedule, diagram: str) -> str:
    from ..models.diagram import forest_svg, schedule_svg, trees_of

    if diagram == "schedule":
        return schedule_svg(schedule)
    trees = trees_of(schedule)
    if not trees:
        raise CollspecError(f"{schedule.label()} does not run along a tree; use --diagram schedule")
    titles = [f"tree {k}" if len(trees) > 1 else "tree" for k in range(len(trees))]  # from 0, as NCCL numbers them
    return forest_svg(trees, titles, f"{schedule.label()}: the tree{'s' if len(trees) > 1 else ''} it runs along")


def _write(path: str, text: str) -> None:
    import os
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CollspecError(f"--html {path}: folder {folder} does not exist")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".explain-", suffix=".html")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)  # as an ordinary file: mkstemp's is private to its owner
    os.replace(temporary, path)
