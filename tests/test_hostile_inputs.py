"""Hostile inputs: every file gets exit 0, 1 or 2 and a one-line message,
never a traceback; special files are refused or read once; MSCCL integers
are read as strtol reads them; an internal error is exit 3.

The inputs come from tests/hostile.py (shared with bench/hostile_inputs.py,
which times them); the fuzz test mutates the bundled corpus of each format.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import threading

import pytest

import hostile
from collspec.cli import main
from collspec.models.msccl import integers

ROOT = os.path.join(os.path.dirname(__file__), "..")


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """The real entry point in-process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


# -- each defect of the review, with the message it now gets -----------------------

REFUSED = [
    ("plan-name-nested-100000", "JSON nested more than 64 levels deep"),
    ("schedule-nested-990", "JSON nested more than 64 levels deep"),
    ("xml-encoding-x-nonsense", "encoding='x-nonsense' in the XML declaration"),
    ("xml-encoding-shift_jis", "encoding='shift_jis' in the XML declaration"),
    ("xml-encoding-utf-7", "encoding='utf-7' in the XML declaration"),
    ("xml-encoding-utf-32", "encoding='utf-32' in the XML declaration"),
    ("xml-tb-id-2^63", "<tb> id: '9223372036854775808' is outside the 64-bit range strtol reads"),
    ("transfer-op-list", "step 0, transfer 0: field 'op' = ['reduce']; use 'reduce' or 'copy'"),
    ("integer-5000-digits", "invalid JSON: Exceeds the limit (4300 digits) for integer string conversion"),
    ("65536-ranks-x-2^20-chunks", "checking 65536 ranks x 1048576 cells and 0 transfers needs about"),
    ("65536-ranks-x-2^20-chunks-prove", "checking 65536 ranks x 1048576 cells and 0 transfers needs about 8 TiB, over the"),
    ("plan-sendrecv-prove", "collective 'sendrecv' has no postcondition in collspec, so the plan has no result to prove"),
]


@pytest.mark.parametrize("name, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_each_crash_of_the_review_is_a_one_line_refusal(tmp_path, name, message):
    case = next(c for c in hostile.CASES if c.name == name)
    path = write(tmp_path, "input" + case.suffix, case.make())
    status, _, err = run_cli([*case.command, path])
    assert status == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert message in err


RUNAWAYS = [
    # (generator, suffix, status, what the message says)
    (lambda: hostile.one_wide_step(30_000), ".json", 2, "step 0 writes one cell 30000 times"),
    (lambda: hostile.empty_steps(140_000), ".json", 2, "140000 steps, more than the 131072 collspec checks"),
    (lambda: hostile.xml_one_connection(5_000), ".xml", 2, "has 5000 steps, more than the 4096 collspec checks"),
    (lambda: hostile.plan_nops(512), ".json", 1, "check"),
    (lambda: hostile.xml_no_threadblocks(64), ".xml", 1, "check"),
]


@pytest.mark.parametrize("make, suffix, status, message", RUNAWAYS, ids=["wide-step", "many-empty-steps", "long-thread-block", "plan-nops", "xml-no-tb"])
def test_runaway_shapes_finish_or_are_refused(tmp_path, make, suffix, status, message):
    """Small instances of the review's runaways (the full sizes are timed by bench/hostile_inputs.py)."""
    got, out, err = run_cli(["check", write(tmp_path, "input" + suffix, make())])
    assert got == status and "Traceback" not in err
    assert message in (err if status == 2 else out + err)


def test_a_schedule_without_transfers_takes_fingerprints_not_exact_multisets(tmp_path):
    """Exact mode counted transfers x ranks only: 0 for a schedule of no transfers however many cells."""
    path = write(tmp_path, "square.json", hostile.square(200))
    status, _, _ = run_cli(["check", path, "--json", str(tmp_path / "r.json")])
    report = json.loads((tmp_path / "r.json").read_text())
    assert status == 1
    assert report["stats"]["contributions"] == "fingerprints, failures re-checked exactly"
    assert report["stats"]["violations_by_kind"] == {"missing-contribution": 200 * 200}
    first = report["violations"][0]["message"]
    assert first.startswith("rank 0's chunk 0 is missing rank 1's chunk 0, rank 2's chunk 0") and "and 183 more" in first


def test_a_proof_over_the_work_limit_is_refused_up_front(tmp_path):
    """Z3 ran out of memory after 46 s: now (transfers + cells) x ranks is refused before any term is built."""
    path = write(tmp_path, "square.json", hostile.square(256))
    status, _, err = run_cli(["prove", "--schedule", path])
    assert status == 2
    assert "a bounded proof of 256 ranks x 256 cells and 0 transfers needs (transfers + cells) x ranks = 16777216 terms, over the 2000000 limit" in err


def test_max_memory_refuses_with_the_estimate_and_the_ceiling(tmp_path):
    path = write(tmp_path, "square.json", hostile.square(512))
    status, _, err = run_cli(["check", path, "--max-memory", "16M"])
    assert status == 2
    assert "checking 512 ranks x 512 cells and 0 transfers needs about 32 MiB, over the 16 MiB memory ceiling (--max-memory)" in err


# -- files ------------------------------------------------------------------------


SCHEDULE = hostile.schedule(2, 1, [[{"src": 0, "dst": 1, "chunk": 0, "op": "reduce"}], [{"src": 1, "dst": 0, "chunk": 0, "op": "copy"}]])


def test_a_fifo_fed_once_is_read_once(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as handle:
            handle.write(SCHEDULE)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    status, out, err = run_cli(["check", str(fifo)])
    writer.join(timeout=10)
    assert (status, err) == (0, "")


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_a_symlink_to_a_device_is_refused_by_name(tmp_path, target):
    link = tmp_path / "schedule.json"
    link.symlink_to(target)
    status, _, err = run_cli(["check", str(link)])
    assert status == 2
    assert err.strip().endswith("is a character device (through a symbolic link); give a regular file or a pipe")


def test_a_directory_is_a_folder_to_search_and_an_empty_one_is_refused_by_name(tmp_path):
    (tmp_path / "d.json").mkdir()
    status, _, err = run_cli(["check", str(tmp_path / "d.json")])
    assert status == 2 and "d.json: no *.json or *.xml file in this folder" in err


def test_plan_or_schedule_is_decided_by_content_for_any_size(tmp_path):
    """A schedule over the plan reader's 64 MiB is still a schedule."""
    from collspec.models.mscclpp.parse import MAX_FILE_BYTES

    padding = b" " * (MAX_FILE_BYTES + 1)
    path = write(tmp_path, "big.json", SCHEDULE[:-1] + padding + b"}")
    status, _, err = run_cli(["check", path])
    assert (status, err) == (0, "")


def test_a_plan_over_its_limit_is_refused_by_the_plan_reader(tmp_path):
    from collspec.models.mscclpp.parse import MAX_FILE_BYTES

    plan = hostile.plan_nops(2)
    path = write(tmp_path, "big.json", plan[:-1] + b" " * MAX_FILE_BYTES + b"}")
    status, _, err = run_cli(["check", path])
    assert status == 2 and "more than the 67108864 this checker reads" in err


# -- MSCCL integers as strtol reads them ------------------------------------------


@pytest.mark.parametrize("text, value", [("010", 8), ("0x10", 16), ("0X1f", 31), (" 7", 7), ("7 ", 7), ("\n7\t", 7), ("+3", 3), ("-0", 0), ("0", 0), ("-12", -12)])
def test_integers_read_as_strtol_base_0(text, value):
    assert integers.read(text) == value


@pytest.mark.parametrize("text, why", [
    ("008", "strtol reads '008' as 0: it stops at '8', not an octal digit (a leading 0 means octal)"),
    ("1_0", "strtol reads '1_0' as 1: it stops at '_'"),
    ("٣", "'٣' is not an integer (strtol reads no digits in it)"),
    ("", "'' is not an integer (strtol reads no digits in it)"),
    ("0x", "strtol reads '0x' as 0: it stops at 'x'"),
    ("3.0", "strtol reads '3.0' as 3: it stops at '.'"),
    ("9223372036854775808", "'9223372036854775808' is outside the 64-bit range strtol reads"),
])
def test_forms_strtol_reads_otherwise_are_refused_by_name(text, why):
    assert integers.read(text) is None
    assert integers.problem(text) == why


@pytest.mark.parametrize("written", ["2", "02", "0x2", " 2 "])
def test_both_xml_paths_read_an_offset_as_the_executor(tmp_path, written):
    """The numpy scan (plain files) and expat's handlers (a comment makes
    the file not plain) read srcoff identically, as strtol does."""
    from collspec.models.msccl import loads

    plain = hostile.xml_attribute(written)
    handled = plain.replace(b"<algo", b"<!-- not plain -->\n<algo", 1)
    for data in (plain, handled):
        program = loads(data, "p.xml")
        assert int(program.src_off[0]) == 2  # the first step of GPU 0 (2 in every base)


@pytest.mark.parametrize("written, value", [("010", 8), ("0x3", 3)])
def test_octal_and_hex_offsets_are_checked_with_the_executors_values(written, value):
    from collspec.models.msccl import loads

    for data in (hostile.xml_attribute(written, "dstoff"), hostile.xml_attribute(written, "dstoff").replace(b"<algo", b"<!-- x -->\n<algo", 1)):
        assert int(loads(data, "p.xml").dst_off[0]) == value


@pytest.mark.parametrize("written", ["008", "1_0", "٣"])
def test_forms_read_otherwise_are_refused_on_both_paths(tmp_path, written):
    data = hostile.xml_attribute(written)
    for variant in (data, data.replace(b"<algo", b"<!-- x -->\n<algo", 1)):
        status, _, err = run_cli(["check", write(tmp_path, "p.xml", variant)])
        assert status == 2 and f"<step> srcoff: {integers.problem(written)}" in err


# -- exit 3 ------------------------------------------------------------------------


def test_an_internal_error_is_exit_3_with_one_line(tmp_path, monkeypatch):
    from collspec.models import checker

    def broken(*args, **kwargs):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(checker, "check", broken)
    status, _, err = run_cli(["check", write(tmp_path, "s.json", SCHEDULE)])
    assert status == 3
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("collspec check: internal error: ZeroDivisionError: planted (traceback in ")
    assert "this is a bug in collspec" in err


# -- fuzz ---------------------------------------------------------------------------


def corpus() -> list[tuple[str, bytes]]:
    folders = ["tests/zoo", "tests/zoo_msccl", "tests/zoo_mscclpp", "models/msccl/data", "models/mscclpp/data"]
    files = []
    for folder in folders:
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith((".json", ".xml")):
                with open(os.path.join(ROOT, folder, name), "rb") as handle:
                    data = handle.read()
                if len(data) < 200_000:
                    files.append((name, data))
    return files


TOKENS = [b"0", b"-1", b"1", b"010", b"0x10", b"9" * 30, b"[]", b"{}", b"null", b"true", b'"x"', b"NaN", b"1e999", b"[[[[", b"<", b">",
          b'"', b"&amp;", b"\xff", b"\x00", b"\xd9\xa3", b"1_0", b"-9223372036854775809", b"4096", b"1048576"]


NUMBERS = [b"0", b"1", b"2", b"3", b"7", b"-1", b"64", b"4096", b"65536", b"1048576", b"99999999999"]
#: spellings strtol reads otherwise than a decimal reading (XML only)
XML_NUMBERS = NUMBERS + [b"010", b"0x3", b"08", b" 2", b"1_0"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """Half the time one number becomes another (the file stays well formed),
    else one to four byte-level edits with hostile tokens."""
    if rng.random() < 0.5:
        numbers = [m.span() for m in re.finditer(rb"-?[0-9]+", data)]
        if numbers:
            start, end = rng.choice(numbers)
            value = rng.choice(NUMBERS if data.lstrip().startswith(b"{") else XML_NUMBERS)
            return data[:start] + value + data[end:]
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data) + 1)
        choice = rng.random()
        if choice < 0.4:  # replace a number or a short span with a token
            end = min(len(data), at + rng.randint(0, 6))
            data[at:end] = rng.choice(TOKENS)
        elif choice < 0.6:
            del data[at : at + rng.randint(1, 40)]
        elif choice < 0.8:  # duplicate a span
            end = min(len(data), at + rng.randint(1, 200))
            data[at:at] = data[at:end]
        else:
            data[at:at] = rng.choice(TOKENS)
    return bytes(data)


def test_fuzz_mutated_corpus_files_never_crash(tmp_path):
    """Seeded mutations of every format's corpus files through the real CLI:
    exit 0, 1 or 2, never 3 or a traceback (1,500 files, about 8 s of CPU)."""
    rng = random.Random(25)
    files = corpus()
    assert {os.path.splitext(n)[1] for n, _ in files} == {".json", ".xml"} and len(files) > 30
    failures = []
    for k in range(1500):
        name, data = files[k % len(files)]
        variant = mutate(data, rng)
        path = write(tmp_path, f"m{k}{os.path.splitext(name)[1]}", variant)
        argv = ["prove", "--schedule", path] if k % 40 == 39 else ["check", path]
        status, _, err = run_cli(argv)
        if status not in (0, 1, 2) or "Traceback" in err or (status == 2 and len(err.strip().splitlines()) != 1):
            failures.append((name, k, status, err[-300:]))
    assert failures == []
