"""The MSCCL parser: every attribute read, every broken or hostile input
refused with FILE:LINE and what to change (exit 2 on the command line)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from collspec.models.msccl import MscclFormatError, load, loads
from collspec.models.msccl import parse as parse_module
from collspec.models.msccl.program import TYPE_NAMES
from msccl_programs import PAIR, nop, program, step

# PAIR's lines: 1 <algo>, 2 <gpu 0>, 3 <tb>, 4-7 its steps, 10 <gpu 1>, 11 <tb>, 12-15 its steps


def edit(old: str, new: str, count: int = 1, text: str = PAIR) -> str:
    assert text.count(old) >= count, old
    return text.replace(old, new, count)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE algo [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
]>
<algo name="&lol2;"/>
"""
EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE algo [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<algo name="&secret;"/>
"""
BARE_DOCTYPE = '<?xml version="1.0"?>\n<!DOCTYPE algo>\n' + PAIR

CASES = [
    # (id, text, line, words in the message)
    ("unclosed-tag", PAIR.replace("</algo>", ""), 19, ["malformed XML (no element found)", "fix the XML syntax"]),
    ("mismatched-tag", PAIR.replace("</tb>", "</gpu>", 1), 8, ["malformed XML (mismatched tag)"]),
    ("not-xml", "this is not xml", 1, ["malformed XML"]),
    ("empty", "", 1, ["malformed XML"]),
    # the DTD itself is refused, before any entity is declared, let alone expanded
    ("billion-laughs", BILLION_LAUGHS, 2, ["refused a document type declaration", "no DTD or entity"]),
    ("external-entity", EXTERNAL, 2, ["refused a document type declaration"]),
    ("doctype", BARE_DOCTYPE, 2, ["refused a document type declaration (<!DOCTYPE ...>) [DTDForbidden]"]),
    ("wrong-root", "<gpu id='0'/>", 1, ["<gpu> at the top level", "expected <algo>"]),
    ("step-in-gpu", edit('<tb id="0" send="1" recv="1" chan="0">', "<step/><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">"), 3, ["<step> inside <gpu>", "expected <tb>"]),
    ("element-in-step", edit('hasdep="0"/>', 'hasdep="0"><x/></step>'), 4, ["<x> inside <step>", "holds no elements"]),
    ("missing-step-attribute", edit(' cnt="1" depid="-1" deps="-1" hasdep="0"/>\n      <step s="1"', ' depid="-1" deps="-1" hasdep="0"/>\n      <step s="1"'), 4, ["<step> has no 'cnt' attribute", 'add cnt="..."']),
    ("missing-algo-attribute", edit(' ngpus="2"', ""), 1, ["<algo> has no 'ngpus' attribute"]),
    ("missing-tb-attribute", edit(' chan="0"', ""), 3, ["<tb> has no 'chan' attribute"]),
    ("missing-gpu-attribute", edit(' s_chunks="0"', ""), 2, ["<gpu> has no 's_chunks' attribute"]),
    ("non-integer", edit('srcoff="1"', 'srcoff="1.5"'), 4, ["srcoff: strtol reads '1.5' as 1: it stops at '.'"]),
    ("octal-integer-with-8", edit('srcoff="1"', 'srcoff="08"'), 4, ["srcoff: strtol reads '08' as 0: it stops at '8', not an octal digit"]),
    ("huge-integer", edit('srcoff="1"', 'srcoff="99999999999999999999999"'), 4, ["is outside the 64-bit range strtol reads"]),
    ("offset-past-buffer", edit('srcoff="1"', 'srcoff="2"'), 4, ["source i[2:3] is outside buffer 'i' of 2 chunks", "off + cnt <= 2"]),
    ("range-past-buffer", edit('srcoff="1" dstbuf="i" dstoff="1" cnt="1"', 'srcoff="1" dstbuf="i" dstoff="1" cnt="2"'), 4, ["source i[1:3] is outside buffer 'i'"]),
    ("negative-offset", edit('type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1"', 'type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="-1"'), 7, ["destination i[-1:0] is outside buffer"]),
    ("undeclared-output", edit('type="r" srcbuf="i" srcoff="1" dstbuf="i"', 'type="r" srcbuf="i" srcoff="1" dstbuf="o"'), 7, ["destination o[1:2] is outside buffer 'o' of 0 chunks", "declare a larger o_chunks"]),
    ("scratch-past-buffer", edit('type="rrc" srcbuf="i"', 'type="rrc" srcbuf="s"'), 5, ["source s[0:1] is outside buffer 's' of 0 chunks"]),
    ("peer-out-of-range", edit('send="1"', 'send="2"'), 3, ["<tb> send=2 is out of range", "-1..1"]),
    ("peer-below-minus-one", edit('recv="1"', 'recv="-2"'), 3, ["recv=-2 is out of range"]),
    ("sends-to-itself", edit('send="1"', 'send="0"'), 3, ["thread block 0 of GPU 0 has send=0, its own GPU", "use -1 for none"]),
    ("receives-from-itself", edit('<tb id="0" send="0" recv="0"', '<tb id="0" send="0" recv="1"'), 11, ["thread block 0 of GPU 1 has recv=1, its own GPU"]),
    ("channel-out-of-range", edit('chan="0"', 'chan="1"'), 3, ["chan=1 is out of range", "0..0"]),
    ("unknown-type", edit('type="rrc"', 'type="rrr"'), 5, ["type='rrr' is not a step type the executors know", "use one of s, r, rcs"]),
    ("unknown-buffer", edit('srcbuf="i" srcoff="1"', 'srcbuf="x" srcoff="1"'), 4, ["srcbuf='x' is not a buffer", "use one of i, o, s"]),
    ("step-numbering", edit('<step s="1" type="rrc"', '<step s="5" type="rrc"'), 5, ["step s=5 is step 1 of thread block 0 on GPU 0", "0, 1, 2, ... in order"]),
    ("zero-count", edit('type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1"', 'type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="0"'), 5, ["has cnt=0", "at least one chunk"]),
    ("tb-id-gap", edit('<tb id="0" send="0"', '<tb id="1" send="0"'), 11, ["GPU 1 has thread block id 1 where id 0 is missing"]),
    ("gpu-id-twice", edit('<gpu id="1"', '<gpu id="0"'), 10, ["GPU id 0 appears twice"]),
    ("gpu-count", edit('ngpus="2"', 'ngpus="3"'), 10, ["2 <gpu> elements but ngpus=3"]),
    ("gpu-id-range", edit('<gpu id="1"', '<gpu id="7"'), 10, ["<gpu> id=7 is out of range"]),
    ("dependency-on-missing-tb", edit('<step s="3" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1"', '<step s="3" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="3" deps="0"'), 7, ["depends on thread block 3, which GPU 0 does not have"]),
    ("dependency-on-missing-step", edit('<step s="3" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1"', '<step s="3" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="0" deps="9"'), 7, ["depends on step 9 of thread block 0, which has 4 steps"]),
    ("hasdep-2", edit('hasdep="0"', 'hasdep="2"'), 4, ["hasdep=2", "hasdep is 0 or 1"]),
    ("send-without-peer", edit('send="1"', 'send="-1"'), 4, ["sends, but its thread block has send=-1"]),
    ("receive-without-peer", edit('recv="1"', 'recv="-1"'), 5, ["receives, but its thread block has recv=-1"]),
    ("unknown-collective", edit('coll="allreduce"', 'coll="gather"'), 1, ["coll='gather' is not a collective collspec can check"]),
    ("unknown-protocol", edit('proto="Simple"', 'proto="Fast"'), 1, ["proto='Fast' is not a protocol", "Simple, LL, LL128"]),
    ("no-mode", edit('inplace="1"', 'inplace="0"'), 1, ["neither inplace=\"1\" nor outofplace=\"1\""]),
    ("input-too-big", edit('i_chunks="2"', 'i_chunks="3"'), 2, ["GPU 0 declares i_chunks=3 but a allreduce with nchunksperloop=2 on 2 GPUs has 2"]),
    ("not-divisible", edit('coll="allreduce"', 'coll="allgather"').replace('nchunksperloop="2"', 'nchunksperloop="3"'), 1, ["needs nchunksperloop divisible by ngpus (got 3 for 2 GPUs)"]),
    # a reduce-scatter's output blocks (o[k] is i[r*C/N + k]) partition the chunks only when N divides C
    ("reducescatter-not-divisible", edit('coll="allreduce"', 'coll="reducescatter"').replace('nchunksperloop="2"', 'nchunksperloop="3"'), 1, ["a reduce_scatter needs nchunksperloop divisible by ngpus (got 3 for 2 GPUs)"]),
]


@pytest.mark.parametrize("text, line, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_input_is_refused_with_file_and_line(text, line, words):
    with pytest.raises(MscclFormatError) as caught:
        loads(text, "bad.xml")
    message = str(caught.value)
    assert message.startswith(f"bad.xml:{line}: "), message
    assert "\n" not in message
    for word in words:
        assert word in message, message
    assert ";" in message  # what is wrong; what to change


def test_two_threadblocks_on_one_connection_are_refused():
    gpu0 = [(1, -1, 0, [step(0, "s")]), (1, -1, 0, [step(0, "s", srcoff=1)])]
    gpu1 = [(-1, 0, 0, [step(0, "r")]), (-1, 0, 0, [step(0, "r", dstoff=1)])]
    with pytest.raises(MscclFormatError, match=r"thread blocks 0 and 1 of GPU 0 both sends to GPU 1 on channel 0; a connection .* belongs to one thread block"):
        loads(program([(0, gpu0), (1, gpu1)]), "x.xml")


def test_a_nop_chain_before_a_step_without_dependency_is_refused_as_the_executors_do():
    gpu0 = [(-1, -1, 0, [step(0, "cpy", srcoff=0, dstoff=1, hasdep=1)]), (-1, -1, 0, [nop(0, 0, 0), step(1, "cpy", srcoff=1, dstoff=0)])]
    text = program([(0, gpu0), (1, [])])
    with pytest.raises(MscclFormatError, match=r"x.xml:\d+: GPU 0 tb 1 step 1 \(cpy\) follows nop steps with dependencies but has depid=-1"):
        loads(text, "x.xml")
    fixed = text.replace('<step s="1" type="cpy" srcbuf="i" srcoff="1" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1"', '<step s="1" type="cpy" srcbuf="i" srcoff="1" dstbuf="i" dstoff="0" cnt="1" depid="0" deps="0"')
    assert loads(fixed).steps == 3


def test_files_over_the_size_limit_are_refused_before_parsing(tmp_path, monkeypatch):
    path = tmp_path / "big.xml"
    path.write_text(PAIR)
    monkeypatch.setattr(parse_module, "MAX_FILE_BYTES", len(PAIR) - 1)
    with pytest.raises(MscclFormatError, match=rf"{path}:1: {len(PAIR)} bytes is over the 0 MiB limit"):
        load(str(path))
    with pytest.raises(MscclFormatError, match="over the 0 MiB limit"):
        loads(PAIR)


def test_a_program_too_big_to_check_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(parse_module, "MAX_CELLS", 7)
    with pytest.raises(MscclFormatError, match=r"x.xml:1: checking needs 2 GPUs x 6 cells \(buffers and received chunks\), over the 7"):
        loads(PAIR, "x.xml")


def test_an_unreadable_file_is_bad_input(tmp_path):
    with pytest.raises(MscclFormatError, match="cannot read"):
        load(str(tmp_path / "missing.xml"))


def test_every_attribute_is_read():
    text = edit('maxBytes="0"', 'maxBytes="4096" maxcount="1" nthreadblocks="1" root="1" bogus="x"').replace('coll="allreduce"', 'coll="broadcast"')
    p = loads(text)
    assert (p.ngpus, p.chunks, p.nchannels, p.proto, p.collective, p.coll_written, p.root) == (2, 2, 1, "Simple", "broadcast", "broadcast", 1)
    assert (p.inplace, p.outofplace) == (True, False)
    assert p.attrs["maxBytes"] == "4096" and p.attrs["maxcount"] == "1"
    assert p.unknown_attrs == [("algo", "bogus", 1)]
    assert p.i_chunks.tolist() == [2, 2] and p.o_chunks.tolist() == [0, 0] and p.s_chunks.tolist() == [0, 0]
    assert p.tb_send.tolist() == [1, 0] and p.tb_recv.tolist() == [1, 0] and p.tb_chan.tolist() == [0, 0]
    assert [TYPE_NAMES[t] for t in p.type[:4]] == ["s", "rrc", "s", "r"]
    assert p.src_off[:4].tolist() == [1, 0, 0, 1] and p.line[:4].tolist() == [4, 5, 6, 7]
    assert p.where(5) == {"gpu": 1, "tb": 0, "step": 1, "type": "rrc", "line": 13, "column": 7}


def test_reducescatter_and_reduce_scatter_both_mean_the_collective():
    for written in ("reducescatter", "reduce_scatter"):
        p = loads(edit('coll="allreduce"', f'coll="{written}"').replace('i_chunks="2"', 'i_chunks="2"'))
        assert p.collective == "reduce_scatter" and p.coll_written == written


def test_thread_blocks_and_gpus_may_appear_in_any_order():
    swapped = program([(1, [(0, 0, 0, [step(0, "s", srcoff=0, dstoff=0), step(1, "r", srcoff=1, dstoff=1)])]), (0, [(-1, 1, 0, [step(0, "r", srcoff=0, dstoff=0)]), (1, -1, 0, [step(0, "s", srcoff=1, dstoff=1)])])])
    swapped = swapped.replace('<tb id="0" send="-1" recv="1"', '<tb id="9" send="-1" recv="1"').replace('<tb id="1" send="1" recv="-1"', '<tb id="0" send="1" recv="-1"').replace('<tb id="9"', '<tb id="1"')
    p = loads(swapped)
    assert p.tb_gpu.tolist() == [0, 0, 1] and p.tb_id.tolist() == [0, 1, 0]
    assert p.tb_send.tolist() == [1, -1, 0]
    assert p.gpu.tolist() == [0, 0, 1, 1]


def test_every_step_type_parses_including_residual_adds():
    steps = [step(k, kind, srcoff=0, dstoff=0) for k, kind in enumerate(["s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "res", "ra"])] + [nop(10)]
    p = loads(program([(0, [(1, 1, 0, steps)]), (1, [])]))
    assert sorted(TYPE_NAMES[t] for t in np.unique(p.type)) == sorted(TYPE_NAMES)


def test_cli_refuses_hostile_input_with_one_line_and_exit_2(tmp_path):
    path = tmp_path / "laughs.xml"
    path.write_text(BILLION_LAUGHS)
    report = tmp_path / "r.json"
    result = subprocess.run([sys.executable, "-m", "collspec", "check", str(path), "--json", str(report)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and f"{path}:2: refused" in result.stderr
    data = json.loads(report.read_text())
    assert data["ok"] is False and data["violations"][0]["kind"] == "malformed"


def _columns(p) -> dict:
    return {name: getattr(p, name).tolist() for name in ("type", "src_buf", "src_off", "dst_buf", "dst_off", "cnt", "depid", "deps", "hasdep", "line", "gpu", "tb", "pos")}


@pytest.mark.parametrize("spelling, fast", [("+1", False), (" 1", False), ("1 ", False), ("01", False), ("0x1", False), ("1", True)])
def test_unusual_integer_spellings_read_as_before(spelling, fast):
    """Plain decimals without a leading zero take the fast column reader;
    anything else falls back to the attribute-by-attribute reader, which
    reads it as the executors' strtol(s, NULL, 0) does (here: 1)."""
    plain = loads(PAIR)
    text = edit('srcoff="1"', f'srcoff="{spelling}"')
    assert (parse_module._step_columns_fast(_attributes_of(text)) is not None) == fast
    unusual = loads(text)
    expected = _columns(plain)
    expected["src_off"][0] = 1
    assert _columns(unusual) == expected


def _attributes_of(text: str) -> list[dict]:
    import re

    return [dict(re.findall(r'(\w+)="([^"]*)"', m)) for m in re.findall(r"<step ([^>]*)/>", text)]


def test_fast_and_slow_step_readers_agree_on_the_corpus():
    from collspec.models.msccl.corpus import DATA

    for path in sorted(DATA.glob("*.xml")):
        steps = _attributes_of(path.read_text())
        fast = parse_module._step_columns_fast(steps)
        slow = parse_module._step_columns_each(steps, np.arange(len(steps)), None)
        assert fast is not None, path.name
        assert list(fast) == list(slow) and all(np.array_equal(fast[k], slow[k]) and fast[k].dtype == slow[k].dtype for k in slow), path.name


def _read(text: str):
    """loads' outcome as comparable data: the program's fields, or the error."""
    try:
        p = loads(text)
    except MscclFormatError as error:
        return ("error", str(error))
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in vars(p).items()}


PLAIN_VARIANTS = [
    # (id, old, new): each edit of PAIR either keeps it plain or is read by the handlers
    ("as-written", "", ""),
    ("swapped-attributes", 'srcbuf="i" srcoff="1"', 'srcoff="1" srcbuf="i"'),
    ("two-spaces", 'srcbuf="i" srcoff="1"', 'srcbuf="i"  srcoff="1"'),
    ("space-before-end", 'hasdep="0"/>', 'hasdep="0" />'),
    ("spaces-around-equals", 'srcoff="1"', 'srcoff = "1"'),
    ("newline-in-tag", 'srcbuf="i" srcoff="1"', 'srcbuf="i"\n srcoff="1"'),
    ("tab", "      <step", "\t<step"),
    ("carriage-returns", "\n", "\r\n"),
    ("character-reference", 'srcoff="1"', 'srcoff="&#49;"'),
    ("apostrophes", 'srcoff="1"', "srcoff='1'"),
    ("comment", "<algo", "<!-- a comment --><algo"),
    ("declaration", "<algo", '<?xml version="1.0"?>\n<algo'),
    ("open-close-step", 'hasdep="0"/>', 'hasdep="0"></step>'),
    ("extra-step-attribute", 'hasdep="0"/>', 'hasdep="0" x="1"/>'),
    ("extra-tb-attribute", 'chan="0">', 'chan="0" x="y">'),
    ("namespace", "<algo ", '<algo xmlns="urn:x" '),
    ("prefixed-attribute", 'chan="0">', 'chan="0" xmlns:a="urn:a" a:x="1">'),
    ("greater-than-in-value", 'name="t"', 'name="t>"'),
    ("text-between-elements", "</tb>", "words</tb>"),
    ("non-ascii-name", 'name="t"', 'name="t\u00e9"'),
    ("comma-in-value", 'srcoff="1"', 'srcoff="1,1"'),
    ("empty-value", 'srcoff="1"', 'srcoff=""'),
    ("step-in-gpu", '<tb id="0" send="1"', '<step/><tb id="0" send="1"'),
    ("element-in-step", 'hasdep="0"/>', 'hasdep="0"><x/></step>'),
    ("wrong-root", PAIR, "<gpu id='0'/>"),
    ("bare-root", PAIR, "<a/>"),
    ("no-steps", PAIR, '<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="1" coll="allreduce" inplace="1"><gpu id="0" i_chunks="2" o_chunks="0" s_chunks="0"/></algo>'),
]


@pytest.mark.parametrize("old, new", [v[1:] for v in PLAIN_VARIANTS], ids=[v[0] for v in PLAIN_VARIANTS])
def test_plain_files_read_as_the_handlers_read_them(old, new, monkeypatch):
    """The byte-level reader of plain files (scan.py) gives the same program,
    or the same error, as expat's element handlers."""
    text = PAIR.replace(old, new, 1) if old else PAIR
    scanned = _read(text)
    monkeypatch.setattr(parse_module, "_scan", lambda data: None)
    assert scanned == _read(text)


def test_plain_reader_takes_plain_files_and_only_those():
    from collspec.models.generators import generate
    from collspec.models.msccl import to_xml

    assert parse_module._scan(PAIR.encode()) is not None
    assert parse_module._scan(to_xml(generate("ring", "allreduce", 4)).encode()) is not None
    assert parse_module._scan(PAIR.replace("\n", "\r\n").encode()) is None
    assert parse_module._scan(("<!-- c -->" + PAIR).encode()) is None


def test_plain_reader_agrees_on_the_corpus_and_exported_algorithms(monkeypatch):
    from collspec.models.generators import generate
    from collspec.models.msccl import to_xml
    from collspec.models.msccl.corpus import DATA

    texts = [path.read_text() for path in sorted(DATA.glob("*.xml"))]
    texts += [to_xml(generate(a, c, n)) for a, c, n in (("ring", "allreduce", 8), ("ring", "allgather", 5), ("direct", "alltoall", 4))]
    every_type = [step(k, kind) for k, kind in enumerate(["s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "res", "ra"])] + [nop(10)]
    texts += [program([(0, [(1, 1, 0, every_type), (-1, -1, 0, [])]), (1, [])])]
    # every step with the attributes in another order, and a problem the checks after reading find
    texts += [re.sub(r'srcbuf="(\w)" srcoff="(-?\d+)"', r'srcoff="\2" srcbuf="\1"', PAIR), edit('<step s="1" type="rrc"', '<step s="5" type="rrc"')]
    assert all(parse_module._scan(text.encode()) is not None for text in texts[-4:])
    scanned = [_read(text) for text in texts]
    monkeypatch.setattr(parse_module, "_scan", lambda data: None)
    assert scanned == [_read(text) for text in texts]
