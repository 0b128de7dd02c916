"""Benchmark: `collspec check RING.xml` on a 128-rank MSCCL ring all-reduce.

Target (issue 15): the file that msccl-tools' MSCCLang example writes with
``allreduce_a100_ring.py 128 1 1`` is verified end to end (interpreter
start, import, parse, verify, report) in under 0.5 s. MSCCLang itself takes
over a minute to generate and check it here.

The file is not committed and msccl-tools is not a dependency, so
:func:`a100_ring_xml` writes the same program from its description: one
channel and one instance; on GPU r one thread block (send r+1, receive r-1,
channel 0) whose 2N-1 steps are a send of chunk r, N-2 receive-reduce-sends
of chunks r-1, r-2, ..., a receive-reduce-copy-send of chunk r+1, N-2
receive-copy-sends of chunks r, r-1, ..., and a final receive of chunk r+2,
in place on the input buffer, protocol LL128, with MSCCLang's attributes
and layout. docs/bench.md says how this was compared with the real output.

Each figure is the median of RUNS fresh processes; the CPU time (user +
system) is printed beside the wall time because the machine is shared.

    .venv/bin/python bench/msccl_ring128.py [--ranks 128] [--file RING.xml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _measure import command_run, machine_line  # noqa: E402

RUNS = 7
TARGET_SECONDS = 0.5


def a100_ring_xml(n: int) -> str:
    """The MSCCL XML of MSCCLang's ``allreduce_a100_ring.py n 1 1`` (see the module text)."""

    def step(s: int, kind: str, chunk: int) -> str:
        off = chunk % n
        return (
            f'      <step s="{s}" type="{kind}" srcbuf="i" srcoff="{off}" dstbuf="i" dstoff="{off}" cnt="1" '
            'depid="-1" deps="-1" hasdep="0"/>'
        )

    lines = [f'<algo name="allreduce_ring_1channelsperring" proto="LL128" nchannels="1" nchunksperloop="{n}" ngpus="{n}" coll="allreduce" inplace="1">']
    for r in range(n):
        lines.append(f'  <gpu id="{r}" i_chunks="{n}" o_chunks="0" s_chunks="0">')
        lines.append(f'    <tb id="0" send="{(r + 1) % n}" recv="{(r - 1) % n}" chan="0">')
        steps = [("s", r)]
        steps += [("rrs", r - k) for k in range(1, n - 1)]
        steps += [("rrcs", r + 1)]
        steps += [("rcs", r - k) for k in range(0, n - 2)]
        steps += [("r", r + 2)]
        lines += [step(s, kind, chunk) for s, (kind, chunk) in enumerate(steps)]
        lines += ["    </tb>", "  </gpu>"]
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def measure(path: str) -> dict:
    command = [sys.executable, "-m", "collspec", "check", path]
    runs = [command_run(command, expect_exit=0) for _ in range(RUNS)]
    return {
        "wall": statistics.median(r["wall"] for r in runs),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "rss_mib": max(r["rss_mib"] for r in runs),
    }


def measure_ring128() -> dict:
    """For bench/run_all.py: the generated 128-rank file, checked end to end."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "allreduce_a100_ring_128.xml")
        with open(path, "w") as handle:
            handle.write(a100_ring_xml(128))
        return measure(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=128)
    parser.add_argument("--file", help="check this file (for example MSCCLang's own output) instead of writing one")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as folder:
        path = args.file or os.path.join(folder, f"allreduce_a100_ring_{args.ranks}.xml")
        if not args.file:
            with open(path, "w") as handle:
                handle.write(a100_ring_xml(args.ranks))
        verdict = subprocess.run([sys.executable, "-m", "collspec", "check", path], capture_output=True, text=True)
        print(verdict.stdout.strip().splitlines()[-1] if verdict.stdout.strip() else verdict.stderr.strip())
        figures = measure(path)
    met = figures["wall"] < TARGET_SECONDS
    print(f"{'file':<40} {'median wall s':>13} {'median cpu s':>12} {'peak MiB':>9}")
    print(f"{os.path.basename(path):<40} {figures['wall']:>13.3f} {figures['cpu']:>12.3f} {figures['rss_mib']:>9.0f}")
    print(f"end to end {figures['wall']:.3f} s: {'meets' if met else 'MISSES'} the {TARGET_SECONDS} s target")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
