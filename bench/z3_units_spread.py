"""Benchmark: how far Z3's resource units for one and the same check spread.

`collspec.proofs.solver.Solver` decides every check from its SMT-LIB text
in a fresh Z3 context, so that the units do not depend on the terms other
proofs built before. This decides one check's text (nccl-ring all-reduce's
"composition" lemma, proofs/nccl_ring_loops.py) REPEAT times, each in a
fresh context, in four processes: one that only imported z3 and read the
text from a file, one that built the query, one that built it and then ran
the `nccl-ring.reduce-exactly-once` row, one that read it and ran that row;
it prints the units of each run:
the same text, the same random seed, a fresh context each time. Any spread
is Z3's own (state outside the context), and it is what the 8x margins of
`collspec.proofs.suite.RLIMITS` must absorb.

Run: .venv/bin/python bench/z3_units_spread.py [REPEAT]
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys


def units_of(text: str, rlimit: int = 100_000_000) -> int:
    import z3

    solver = z3.Solver(ctx=z3.Context())
    solver.set("rlimit", rlimit)
    solver.from_string(text)
    before = int(solver.statistics().get_key_value("rlimit count"))
    assert solver.check() == z3.unsat
    return int(solver.statistics().get_key_value("rlimit count")) - before


def text() -> str:
    import z3

    from collspec.proofs import nccl_ring_loops, solver

    (query,) = [q for q in nccl_ring_loops.allreduce_lemmas() if q.name.startswith("composition")]
    check = z3.Solver()
    check.add(*query.premises, *query.when, *query.case, z3.Not(query.claim))
    return solver._canonical(check.sexpr())


def child(mode: str, path: str, repeat: int) -> None:
    if mode in ("bare", "file-after"):  # the text read from the file
        query = open(path).read()
    else:
        query = text()
    if mode in ("after", "file-after"):
        from collspec.proofs.suite import run_proof, suite

        (row,) = [p for p in suite() if p.name == "nccl-ring.reduce-exactly-once"]
        run_proof(row)
    print(f"{WORDS[mode]:<45}: " + ", ".join(f"{units_of(query):,}" for _ in range(repeat)), flush=True)


WORDS = {"bare": "only z3 imported, the text read from a file", "built": "the query built in the process", "after": "built, then after a proof row",
         "file-after": "read from the file, then after a proof row"}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    import tempfile

    import z3

    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, z3 {z3.get_version_string()}; "
          f"load average {os.getloadavg()}")
    with tempfile.NamedTemporaryFile("w", suffix=".smt2", delete=False) as file:
        file.write(text())
    try:
        for mode in WORDS:
            subprocess.run([sys.executable, __file__, "--child", mode, file.name, str(repeat)], check=True)
    finally:
        os.unlink(file.name)


if __name__ == "__main__":
    main()
