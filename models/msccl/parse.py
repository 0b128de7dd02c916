"""Read an MSCCL XML file into a :class:`~.program.Program`, refusing
anything an executor would refuse and anything hostile.

The file is untrusted. It is parsed with defusedxml (document type
declarations, entity declarations and external references are refused,
never expanded), after a size check. Every problem raises
:class:`MscclFormatError` with one line ``FILE:LINE: what is wrong; what to
change``, which the command line turns into exit status 2:

- malformed XML, a DTD or entity declaration, a file over
  :data:`MAX_FILE_BYTES`;
- an element out of place (``<algo>`` holds ``<gpu>``, which holds ``<tb>``,
  which holds ``<step>``) or a missing or non-integer attribute;
- GPU ids that are not 0..ngpus-1, thread block ids that are not 0..n-1 on
  a GPU, step numbers ``s`` that are not 0, 1, 2, ... in order;
- a peer out of range, a thread block sending to or receiving from its own
  GPU, a channel outside 0..nchannels-1, two thread blocks of a GPU on the
  same connection (peer and channel);
- an unknown step type or buffer, an offset range outside the declared
  buffer, a send without a send peer or a receive without a receive peer;
- a dependency on a thread block or step that does not exist, ``hasdep``
  other than 0 or 1, and a chain of ``nop`` dependencies followed by a step
  without a dependency of its own (both executors refuse such a file:
  msccl_parser.cc, "the last reduction must be a part of the first
  immediate instruction").

Files as MSCCLang and collspec write them are read from their bytes by
:mod:`.scan` once expat has checked them; any other file, and any file with
a problem above, is read through expat's element handlers, which report
the problem and its line.
"""

from __future__ import annotations

import os
import re
from itertools import chain

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser
from xml.parsers.expat import ErrorString, ExpatError

from ...spec.collectives import collective_name
from ...spec.errors import SpecError
from ..layout import ScheduleError
from .cells import data_sizes
from .program import BUFFER_CODES, NOP, READS_SRC, RECEIVES, SENDS, TYPE_CODES, WRITES_DST, Program
from . import integers
from .scan import scan

MAX_FILE_BYTES = 64 << 20
MAX_GPUS = 1 << 16
MAX_CHUNKS = 1 << 20
MAX_CHANNELS = 1024
#: steps read, per thread block (64 x the executors' MSCCL_MAX_NUM_STEPS; an exported 2048-rank ring has 4095) and in all (docs/limits.md)
MAX_STEPS_PER_TB = 4096
MAX_STEPS = 1 << 17
#: cells (GPUs x (buffers + received chunks)) the result check can hold, about 330 MB of fingerprints
MAX_CELLS = 1 << 23

#: collectives the verifier knows the postcondition of (spec names)
SUPPORTED = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce")

ALGO_REQUIRED = ("ngpus", "coll", "nchunksperloop", "proto", "nchannels")
ALGO_KNOWN = set(ALGO_REQUIRED) | {"name", "inplace", "outofplace", "minBytes", "maxBytes", "maxcount", "nthreadblocks", "root"}
GPU_REQUIRED = ("id", "i_chunks", "o_chunks", "s_chunks")
TB_REQUIRED = ("id", "send", "recv", "chan")
STEP_REQUIRED = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")
STEP_INTS = ("s", "srcoff", "dstoff", "cnt", "depid", "deps", "hasdep")
PROTOCOLS = ("Simple", "LL", "LL128")
NESTING = ("algo", "gpu", "tb", "step")


class MscclFormatError(ScheduleError):
    """An MSCCL file that cannot be checked as given (exit 2)."""


class _Elements:
    """Records each element's attributes and line. Its ``start``/``end`` are
    the expat element handlers themselves (ElementTree's per-element work
    would double the parse time); defusedxml's refusing handlers stay."""

    def __init__(self, fail):
        self.fail = fail
        self.expat = None  # set once the parser exists
        self.depth = 0
        self.algo: tuple[dict, int] | None = None
        self.gpus: list[tuple[dict, int]] = []
        self.tbs: list[tuple[dict, int]] = []
        self.tb_gpu: list[int] = []
        self.steps: list[dict] = []
        self.step_lines: list[int] = []
        self.step_columns: list[int] = []  # of each <step>'s '<', from 1
        self.tb_first_step: list[int] = []  # per <tb>: how many <step>s came before it
        self.columns: dict[str, np.ndarray] | None = None  # the step columns, when read by scan()

    def start(self, tag, attrs):
        if self.depth == 3 and tag == "step":  # the common element, first and short
            self.depth = 4
            self.steps.append(attrs)
            self.step_lines.append(self.expat.CurrentLineNumber)
            self.step_columns.append(self.expat.CurrentColumnNumber + 1)
            return
        line = self.expat.CurrentLineNumber
        depth = self.depth
        expected = NESTING[depth] if depth < len(NESTING) else None
        if tag != expected:
            where = "at the top level" if depth == 0 else f"inside <{NESTING[depth - 1]}>"
            hint = f"expected <{expected}>" if expected else "<step> holds no elements"
            raise self.fail(line, f"<{tag}> {where}", hint)
        if depth == 0 and self.algo is not None:
            raise self.fail(line, "a second <algo>", "a file holds one algorithm")
        self.depth += 1
        if depth == 2:
            self.tbs.append((attrs, line))
            self.tb_gpu.append(len(self.gpus) - 1)
            self.tb_first_step.append(len(self.steps))
        elif depth == 1:
            self.gpus.append((attrs, line))
        else:
            self.algo = (attrs, line)

    def end(self, tag):
        self.depth -= 1


def load(path: str) -> Program:
    """Parse and validate the MSCCL file at ``path``."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise MscclFormatError(f"{path}:1: {size} bytes is over the {MAX_FILE_BYTES >> 20} MiB limit for MSCCL files; split the algorithm or check a smaller instance")
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise MscclFormatError(f"{path}:0: cannot read: {error.strerror or error}; give a readable .xml file") from None
    return loads(data, path)


def loads(data: bytes | str, source: str = "<xml>") -> Program:
    """Parse and validate MSCCL XML held in memory (``source`` names it in errors)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise MscclFormatError(f"{source}:1: {len(data)} bytes is over the {MAX_FILE_BYTES >> 20} MiB limit for MSCCL files; split the algorithm")

    def fail(line: int, what: str, fix: str) -> MscclFormatError:
        return MscclFormatError(f"{source}:{line}: {what}; {fix}")

    _check_encoding(data, fail)
    elements = _scan(data) or _read(data, fail)
    if elements.algo is None:
        raise fail(1, "no <algo> element", "an MSCCL file is one <algo> holding <gpu> elements")
    return _build(elements, source, fail)


#: the XML declaration's encoding, if it names one
_DECLARED = re.compile(rb"""(?:\xef\xbb\xbf)?<\?xml[ \t\r\n][^>]*?encoding[ \t\r\n]*=[ \t\r\n]*["']([^"']*)["']""")
#: encodings whose bytes the executors' parsers read as written
ENCODINGS = ("utf-8", "utf8", "us-ascii", "ascii")
_BOMS = {b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe\x00\x00": "UTF-32", b"\xfe\xff": "UTF-16", b"\xff\xfe": "UTF-16"}


def _check_encoding(data: bytes, fail) -> None:
    """Refuse a file not in UTF-8 (or ASCII): the executors read the bytes
    as they are, whatever the declaration says."""
    for bom, name in _BOMS.items():
        if data.startswith(bom):
            raise fail(1, f"the file is {name} (byte order mark)", "the executors read MSCCL files as bytes: write it in UTF-8")
    declared = _DECLARED.match(data[:200])
    if declared is not None and declared[1].decode("ascii", "replace").lower() not in ENCODINGS:
        raise fail(1, f"encoding={declared[1].decode('ascii', 'replace')!r} in the XML declaration", "the executors read MSCCL files as bytes: write it in UTF-8 and declare encoding=\"UTF-8\" or none")


def _parser():
    """The defused expat parser (DTDs, entity declarations and external
    references refused) without ElementTree's handlers."""
    parser = DefusedXMLParser(forbid_dtd=True, forbid_entities=True, forbid_external=True)
    expat = parser.parser
    expat.ordered_attributes = False
    expat.StartElementHandler = expat.EndElementHandler = expat.CharacterDataHandler = None
    # ElementTree's default handler is called for every run of whitespace
    # between elements (two calls per <step>; about 8% of the parse); without
    # it expat itself refuses an undefined entity reference, and defusedxml's
    # DTD and entity handlers stay in place.
    expat.DefaultHandlerExpand = None
    return expat


def _scan(data: bytes) -> _Elements | None:
    """The elements of a plain file (:mod:`.scan`), with their step columns
    already read; None where the file is not plain or its columns are not."""

    def well_formed(data: bytes) -> bool:
        try:
            _parser().Parse(data, True)
        except (ExpatError, DefusedXmlException, LookupError, ValueError):
            return False
        return True

    found = scan(data, well_formed, NESTING)
    columns = found and _columns_of_text(found.step_values, len(found.step_lines))
    if columns is None:
        return None
    elements = _Elements(None)
    elements.algo, elements.gpus, elements.tbs = found.algo, found.gpus, found.tbs
    elements.tb_gpu, elements.tb_first_step, elements.step_lines = found.tb_gpu, found.tb_first_step, found.step_lines
    elements.step_columns = found.step_columns
    elements.columns = columns
    return elements


def _read(data: bytes, fail) -> _Elements:
    """The elements of any file, with expat calling :class:`_Elements`."""
    elements = _Elements(fail)
    expat = elements.expat = _parser()
    expat.StartElementHandler = elements.start
    expat.EndElementHandler = elements.end
    try:
        expat.Parse(data, True)
    except ExpatError as error:
        raise fail(error.lineno, f"malformed XML ({ErrorString(error.code)})", "fix the XML syntax") from None
    except DefusedXmlException as error:
        line = expat.CurrentLineNumber
        what = {
            "DTDForbidden": "a document type declaration (<!DOCTYPE ...>)",
            "EntitiesForbidden": f"an entity declaration ({getattr(error, 'name', '?')})",
            "ExternalReferenceForbidden": "an external entity reference",
        }.get(type(error).__name__, type(error).__name__)
        raise fail(line, f"refused {what} [{type(error).__name__}]", "MSCCL files need no DTD or entity declarations; remove them") from None
    except (LookupError, ValueError) as error:  # an encoding expat cannot read
        raise fail(expat.CurrentLineNumber, f"unreadable text ({error})", "write the file in UTF-8") from None
    return elements


# -- validation -------------------------------------------------------------------


def _require(attrs: dict, names, tag: str, line: int, fail) -> None:
    for name in names:
        if name not in attrs:
            raise fail(line, f"<{tag}> has no {name!r} attribute", f"add {name}=\"...\" (every executor requires it)")


def _int(attrs: dict, name: str, tag: str, line: int, fail, low: int | None = None, high: int | None = None, default=None) -> int:
    text = attrs.get(name)
    if text is None:
        if default is not None:
            return default
        raise fail(line, f"<{tag}> has no {name!r} attribute", f"add {name}=\"...\"")
    value = integers.read(text)
    if value is None:
        raise fail(line, f"<{tag}> {name}: {integers.problem(text)}", f"write {name} as a decimal integer")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f"at least {low}"
        raise fail(line, f"<{tag}> {name}={value} is out of range", f"use a value in {bounds}")
    return value


def _build(el: _Elements, source: str, fail) -> Program:
    attrs, algo_line = el.algo
    _require(attrs, ALGO_REQUIRED, "algo", algo_line, fail)
    ngpus = _int(attrs, "ngpus", "algo", algo_line, fail, 1, MAX_GPUS)
    chunks = _int(attrs, "nchunksperloop", "algo", algo_line, fail, 1, MAX_CHUNKS)
    nchannels = _int(attrs, "nchannels", "algo", algo_line, fail, 1, MAX_CHANNELS)
    proto = attrs["proto"]
    if proto not in PROTOCOLS:
        raise fail(algo_line, f"proto={proto!r} is not a protocol the executors know", f"use one of {', '.join(PROTOCOLS)}")
    written = attrs["coll"]
    try:
        collective = collective_name(written)
    except SpecError:
        collective = None
    if collective not in SUPPORTED:
        raise fail(algo_line, f"coll={written!r} is not a collective collspec can check", "use allreduce, allgather, reducescatter, alltoall, broadcast or reduce")
    inplace = _int(attrs, "inplace", "algo", algo_line, fail, 0, 1, default=0)
    outofplace = _int(attrs, "outofplace", "algo", algo_line, fail, 0, 1, default=0 if "outofplace" not in attrs and inplace else 1)
    if not inplace and not outofplace:
        raise fail(algo_line, "the algorithm declares neither inplace=\"1\" nor outofplace=\"1\", so no executor ever selects it", "set at least one of them to 1")
    for name in ("minBytes", "maxBytes", "maxcount", "nthreadblocks"):
        if name in attrs:
            _int(attrs, name, "algo", algo_line, fail, 0)
    root = _int(attrs, "root", "algo", algo_line, fail, 0, ngpus - 1, default=0)
    in_size, out_size = data_sizes(collective, chunks, ngpus, lambda what, fix: fail(algo_line, what, fix))
    unknown = [("algo", name, algo_line) for name in attrs if name not in ALGO_KNOWN]

    # GPUs
    if len(el.gpus) != ngpus:
        line = el.gpus[-1][1] if el.gpus else algo_line
        raise fail(line, f"the file has {len(el.gpus)} <gpu> elements but ngpus={ngpus}", "give one <gpu> per rank, ids 0..ngpus-1")
    gpu_order = np.empty(ngpus, dtype=np.int64)
    sizes = np.zeros((ngpus, 3), dtype=np.int64)
    gpu_line = np.zeros(ngpus, dtype=np.int64)
    seen = np.zeros(ngpus, dtype=bool)
    for index, (gattrs, line) in enumerate(el.gpus):
        _require(gattrs, GPU_REQUIRED, "gpu", line, fail)
        gid = _int(gattrs, "id", "gpu", line, fail, 0, ngpus - 1)
        if seen[gid]:
            raise fail(line, f"GPU id {gid} appears twice", "give each rank exactly one <gpu>")
        seen[gid] = True
        gpu_order[index] = gid
        gpu_line[gid] = line
        for k, name in enumerate(("i_chunks", "o_chunks", "s_chunks")):
            sizes[gid, k] = _int(gattrs, name, "gpu", line, fail, 0, MAX_CHUNKS)
        if sizes[gid, 0] > in_size or sizes[gid, 1] > out_size:
            name, declared, real = ("i_chunks", sizes[gid, 0], in_size) if sizes[gid, 0] > in_size else ("o_chunks", sizes[gid, 1], out_size)
            raise fail(line, f"GPU {gid} declares {name}={declared} but a {collective} with nchunksperloop={chunks} on {ngpus} GPUs has {real}", f"declare at most {real}")
        unknown += [("gpu", name, line) for name in gattrs if name not in GPU_REQUIRED]

    # thread blocks
    ntb = len(el.tbs)
    tb_gpu = gpu_order[np.asarray(el.tb_gpu, dtype=np.int64)] if ntb else np.zeros(0, np.int64)
    tb_cols = np.zeros((4, ntb), dtype=np.int64)  # id, send, recv, chan
    tb_line = np.zeros(ntb, dtype=np.int64)
    for t, (tattrs, line) in enumerate(el.tbs):
        _require(tattrs, TB_REQUIRED, "tb", line, fail)
        g = int(tb_gpu[t])
        tb_line[t] = line
        tb_cols[0, t] = _int(tattrs, "id", "tb", line, fail, 0)
        for k, name in ((1, "send"), (2, "recv")):
            peer = _int(tattrs, name, "tb", line, fail, -1, ngpus - 1)
            if peer == g:
                raise fail(line, f"thread block {tb_cols[0, t]} of GPU {g} has {name}={peer}, its own GPU", f"a thread block {name}s to another GPU; use -1 for none")
            tb_cols[k, t] = peer
        tb_cols[3, t] = _int(tattrs, "chan", "tb", line, fail, 0, nchannels - 1)
        unknown += [("tb", name, line) for name in tattrs if name not in TB_REQUIRED]
    # reorder thread blocks GPU-major by id (files list GPUs and tbs in any order)
    order = np.lexsort((tb_cols[0], tb_gpu)) if ntb else np.zeros(0, np.int64)
    tb_gpu, tb_cols, tb_line = tb_gpu[order], tb_cols[:, order], tb_line[order]
    per_gpu = np.bincount(tb_gpu, minlength=ngpus)[:ngpus]
    base = np.r_[0, np.cumsum(per_gpu)[:-1]]
    expected_ids = np.arange(ntb) - np.repeat(base, per_gpu)
    bad = np.flatnonzero(tb_cols[0] != expected_ids)
    if bad.size:
        t = int(bad[0])
        raise fail(int(tb_line[t]), f"GPU {int(tb_gpu[t])} has thread block id {int(tb_cols[0, t])} where id {int(expected_ids[t])} is missing or repeated", "number each GPU's thread blocks 0, 1, 2, ... once each")
    for k, role in ((1, "sends to"), (2, "receives from")):
        peer = tb_cols[k]
        used = np.flatnonzero(peer >= 0)
        key = (tb_gpu[used] * ngpus + peer[used]) * MAX_CHANNELS + tb_cols[3, used]
        sorted_idx = np.argsort(key, kind="stable")
        dup = np.flatnonzero(key[sorted_idx][1:] == key[sorted_idx][:-1])
        if dup.size:
            a, b = int(used[sorted_idx[dup[0]]]), int(used[sorted_idx[dup[0] + 1]])
            raise fail(int(tb_line[b]), f"thread blocks {int(tb_cols[0, a])} and {int(tb_cols[0, b])} of GPU {int(tb_gpu[b])} both {role} GPU {int(peer[b])} on channel {int(tb_cols[3, b])}", "a connection (peer, channel) belongs to one thread block: move one to another chan")

    # steps: attributes column by column
    nsteps = len(el.step_lines)
    step_lines = np.asarray(el.step_lines, dtype=np.int64)
    step_columns = np.asarray(el.step_columns, dtype=np.int64)
    # every <step> belongs to the <tb> before it
    file_tb = np.repeat(np.arange(ntb, dtype=np.int64), np.diff(np.r_[el.tb_first_step, nsteps]).astype(np.int64)) if ntb else np.zeros(0, np.int64)
    rank_of_file_tb = np.empty(ntb, dtype=np.int64)
    rank_of_file_tb[order] = np.arange(ntb)
    step_tb_global = rank_of_file_tb[file_tb] if nsteps else np.zeros(0, np.int64)
    columns = el.columns if el.columns is not None else _step_columns(el.steps, step_lines, fail)
    # steps in thread-block order, keeping file order inside a thread block
    step_order = np.argsort(step_tb_global, kind="stable")
    step_tb_global = step_tb_global[step_order]
    step_lines = step_lines[step_order]
    step_columns = step_columns[step_order]
    columns = {name: values[step_order] for name, values in columns.items()}
    tb_steps = np.bincount(step_tb_global, minlength=ntb)[:ntb] if ntb else np.zeros(0, np.int64)
    tb_first = np.r_[0, np.cumsum(tb_steps)[:-1]].astype(np.int64) if ntb else np.zeros(0, np.int64)
    pos = np.arange(nsteps) - tb_first[step_tb_global] if nsteps else np.zeros(0, np.int64)
    gpu = tb_gpu[step_tb_global] if nsteps else np.zeros(0, np.int64)

    program = Program(
        path=source, attrs=dict(attrs), algo_line=algo_line, name=attrs.get("name", ""), collective=collective,
        coll_written=written, ngpus=ngpus, chunks=chunks, nchannels=nchannels, proto=proto,
        inplace=bool(inplace), outofplace=bool(outofplace), root=root,
        i_chunks=sizes[:, 0], o_chunks=sizes[:, 1], s_chunks=sizes[:, 2], gpu_line=gpu_line,
        tb_gpu=tb_gpu, tb_id=tb_cols[0], tb_send=tb_cols[1], tb_recv=tb_cols[2], tb_chan=tb_cols[3],
        tb_first=tb_first, tb_steps=tb_steps, tb_line=tb_line,
        gpu=gpu, tb=step_tb_global, pos=pos, type=columns["type"], src_buf=columns["srcbuf"],
        src_off=columns["srcoff"], dst_buf=columns["dstbuf"], dst_off=columns["dstoff"], cnt=columns["cnt"],
        depid=columns["depid"], deps=columns["deps"], hasdep=columns["hasdep"], line=step_lines, column=step_columns,
        unknown_attrs=unknown,
    )
    _check_step_counts(program, fail)
    _check_steps(program, columns["s"], fail)
    _check_size(program, in_size + out_size, fail)
    return program


def _step_columns(steps: list[dict], lines: np.ndarray, fail) -> dict[str, np.ndarray]:
    """Every step attribute as an array; a missing or bad value names its line.

    The usual file (every step has every attribute, all integers and names
    valid) takes one pass in C per table; anything else falls back to the
    attribute-by-attribute pass below, which finds the first problem."""
    fast = _step_columns_fast(steps) if steps else None
    if fast is not None:
        return fast
    return _step_columns_each(steps, lines, fail)


#: a column of plain decimal integers, joined by commas, that int64 holds
#: and strtol reads as decimals (no leading zero)
_DECIMALS = integers.PLAIN_DECIMALS


def _step_columns_fast(steps: list[dict]) -> dict[str, np.ndarray] | None:
    """The columns when every step lists the same attributes in the same
    order and every value is plain (else None). Each step's dict is visited
    twice in C (its names, then its values), not once per attribute: with
    32k steps the dicts no longer fit in cache and each visit costs."""
    names = list(steps[0])
    width, count = len(names), len(steps)
    if set(map(len, steps)) != {width}:
        return None
    every_name = list(chain.from_iterable(steps))
    if any(every_name[k::width].count(name) != count for k, name in enumerate(names)):
        return None
    values = list(chain.from_iterable(map(dict.values, steps)))
    return _columns_of_text({name: ",".join(values[k::width]) for k, name in enumerate(names)}, count)


def _columns_of_text(values: dict[str, str], count: int) -> dict[str, np.ndarray] | None:
    """The columns from every step's value of each attribute, joined by
    commas, when all are plain (one regex and one conversion in C), else None."""
    if not set(STEP_REQUIRED) <= set(values):
        return None
    text = ",".join([values[name] for name in STEP_INTS])
    if not _DECIMALS.fullmatch(text):
        return None
    numbers = np.fromstring(text, dtype=np.int64, sep=",")
    if numbers.size != len(STEP_INTS) * count:  # a value holding a comma
        return None
    numbers = numbers.reshape(len(STEP_INTS), count)
    out: dict[str, np.ndarray] = {}
    for name in STEP_REQUIRED:
        if name in STEP_INTS:
            out[name] = numbers[STEP_INTS.index(name)]
            continue
        codes = list(map((TYPE_CODES if name == "type" else BUFFER_CODES).get, values[name].split(",")))
        if len(codes) != count or None in codes:
            return None
        out[name] = np.array(codes, dtype=np.int64)
    return out


def _step_columns_each(steps: list[dict], lines: np.ndarray, fail) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name in STEP_REQUIRED:
        values = [a.get(name) for a in steps]
        if None in values:
            i = values.index(None)
            raise fail(int(lines[i]), f"<step> has no {name!r} attribute", f"add {name}=\"...\" (every executor requires it)")
        if name in STEP_INTS:
            out[name] = _integer_column(values, name, lines, fail)
            continue
        table = TYPE_CODES if name == "type" else BUFFER_CODES
        codes = np.array([table.get(v, -1) for v in values], dtype=np.int64)
        bad = np.flatnonzero(codes < 0)
        if bad.size:
            i = int(bad[0])
            kinds = "step type" if name == "type" else "buffer"
            raise fail(int(lines[i]), f"<step> {name}={values[i]!r} is not a {kinds} the executors know", f"use one of {', '.join(table)}")
        out[name] = codes
    return out


def _integer_column(values: list[str], name: str, lines: np.ndarray, fail) -> np.ndarray:
    """A step attribute's values as strtol reads them (:mod:`.integers`)."""
    joined = ",".join(values)
    if not values:
        return np.zeros(0, np.int64)
    if _DECIMALS.fullmatch(joined):
        column = np.fromstring(joined, dtype=np.int64, sep=",")
        if column.size == len(values):  # else a value holds a comma
            return column
    column = np.empty(len(values), dtype=np.int64)
    for i, text in enumerate(values):
        value = integers.read(text)
        if value is None:
            raise fail(int(lines[i]), f"<step> {name}: {integers.problem(text)}", f"write {name} as a decimal integer")
        column[i] = value
    return column


def _check_steps(p: Program, numbers: np.ndarray, fail) -> None:
    if p.steps == 0:
        return
    line = p.line

    def first(mask: np.ndarray) -> int | None:
        hits = np.flatnonzero(mask)
        return int(hits[0]) if hits.size else None

    i = first(numbers != p.pos)
    if i is not None:
        raise fail(int(line[i]), f"step s={int(numbers[i])} is step {int(p.pos[i])} of thread block {int(p.tb_id[p.tb[i]])} on GPU {int(p.gpu[i])}", "number each thread block's steps 0, 1, 2, ... in order")
    t = p.type
    nop = t == NOP
    i = first(~nop & (p.cnt < 1) | (p.cnt < 0))
    if i is not None:
        raise fail(int(line[i]), f"{p.describe(i)} has cnt={int(p.cnt[i])}", "a step moves at least one chunk (cnt >= 1)")
    i = first(SENDS[t] & (p.tb_send[p.tb] < 0))
    if i is not None:
        raise fail(int(line[i]), f"{p.describe(i)} sends, but its thread block has send=-1", "set the thread block's send peer or change the step type")
    i = first(RECEIVES[t] & (p.tb_recv[p.tb] < 0))
    if i is not None:
        raise fail(int(line[i]), f"{p.describe(i)} receives, but its thread block has recv=-1", "set the thread block's recv peer or change the step type")
    sizes = np.stack([p.i_chunks, p.o_chunks, p.s_chunks], axis=1)  # [gpu, buffer]
    for role, uses, buf, off in (("source", READS_SRC[t], p.src_buf, p.src_off), ("destination", WRITES_DST[t], p.dst_buf, p.dst_off)):
        limit = sizes[p.gpu, buf]
        i = first(uses & ((off < 0) | (off + p.cnt > limit)))
        if i is not None:
            name = "ios"[int(buf[i])]
            raise fail(
                int(line[i]),
                f"{p.describe(i)}: {role} {name}[{int(off[i])}:{int(off[i] + p.cnt[i])}] is outside buffer {name!r} of {int(limit[i])} chunks",
                f"use offsets with 0 <= off and off + cnt <= {int(limit[i])}, or declare a larger {name}_chunks",
            )
    ntb_of_gpu = np.bincount(p.tb_gpu, minlength=p.ngpus)[: p.ngpus]
    has_dep = p.depid >= 0
    i = first((p.depid < -1) | (p.depid >= ntb_of_gpu[p.gpu]))
    if i is not None:
        raise fail(int(line[i]), f"{p.describe(i)} depends on thread block {int(p.depid[i])}, which GPU {int(p.gpu[i])} does not have", f"use depid -1 (none) or 0..{int(ntb_of_gpu[p.gpu[i]]) - 1}")
    target_tb = p.gpu_tb_base[p.gpu] + np.where(has_dep, p.depid, 0)
    i = first(has_dep & ((p.deps < 0) | (p.deps >= p.tb_steps[target_tb])))
    if i is not None:
        raise fail(int(line[i]), f"{p.describe(i)} depends on step {int(p.deps[i])} of thread block {int(p.depid[i])}, which has {int(p.tb_steps[target_tb[i]])} steps", "point deps at an existing step")
    i = first((p.hasdep != 0) & (p.hasdep != 1))
    if i is not None:
        raise fail(int(line[i]), f"{p.describe(i)} has hasdep={int(p.hasdep[i])}", "hasdep is 0 or 1")
    i = _nop_chain_without_dependency(p)
    if i is not None:
        raise fail(int(line[i]), f"{p.describe(i)} follows nop steps with dependencies but has depid=-1; msccl-executor-nccl and RCCL refuse such a file", "give this step the last dependency of the chain (as MSCCLang does) or remove the nops")


def _check_step_counts(p: Program, fail) -> None:
    """Refuse more steps than collspec checks in bounded time."""
    if p.steps > MAX_STEPS:
        raise fail(p.algo_line, f"the file has {p.steps} steps, more than the {MAX_STEPS} collspec checks", "check a smaller instance (docs/limits.md)")
    long = np.flatnonzero(p.tb_steps > MAX_STEPS_PER_TB)
    if long.size:
        t = int(long[0])
        raise fail(
            int(p.tb_line[t]),
            f"thread block {int(p.tb_id[t])} of GPU {int(p.tb_gpu[t])} has {int(p.tb_steps[t])} steps, more than the {MAX_STEPS_PER_TB} "
            "collspec checks (msccl-executor-nccl and RCCL run at most 64: MSCCL_MAX_NUM_STEPS)",
            "split the work over more thread blocks or channels",
        )


def _check_size(p: Program, data_cells: int, fail) -> None:
    """Refuse a program too big to check before anything large is allocated."""
    from .lower import message_cells

    _, messages = message_cells(p)
    per_gpu = data_cells + int(p.s_chunks.max()) + messages
    if p.ngpus * per_gpu > MAX_CELLS:
        raise fail(
            p.algo_line,
            f"checking needs {p.ngpus} GPUs x {per_gpu} cells (buffers and received chunks), over the {MAX_CELLS} collspec holds",
            "check a smaller instance of the algorithm (fewer GPUs or chunks)",
        )


def _nop_chain_without_dependency(p: Program) -> int | None:
    """The first step that starts a transmission after dependency-carrying
    nops without a dependency of its own (msccl_parser.cc refuses it).
    Fused reduction continuations do not start a transmission."""
    from .executor import transmission_starts

    start = transmission_starts(p)
    nop_dep = (p.type == NOP) & (p.depid >= 0)
    # steps are in thread-block order: a candidate follows a pending chain
    # when the candidate before it, in its thread block, is such a nop
    candidates = np.flatnonzero(nop_dep | start)
    after_nop = np.zeros(candidates.size, dtype=bool)
    after_nop[1:] = nop_dep[candidates[:-1]] & (p.tb[candidates[1:]] == p.tb[candidates[:-1]])
    hits = candidates[after_nop & ~nop_dep[candidates] & (p.depid[candidates] < 0)]
    return int(hits[0]) if hits.size else None
