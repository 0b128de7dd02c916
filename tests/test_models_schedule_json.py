"""The JSON schedule format: round trips, and every malformed file refused
with the file, the step, the transfer and the field."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from collspec.models.checker import check
from collspec.models.generators import ALGORITHMS, generate
from collspec.models.schedule_json import ScheduleFormatError, dumps, load, loads

GOOD = {"collective": "allreduce", "ranks": 2, "chunks": 1, "steps": [[{"src": 0, "dst": 1, "chunk": 0, "op": "reduce"}], [{"src": 1, "dst": 0, "chunk": 0, "op": "copy"}]]}


def doc(**changes):
    d = json.loads(json.dumps(GOOD))
    d.update(changes)
    return json.dumps(d)


@pytest.mark.parametrize("algorithm, collective", [(a, c) for a, t in ALGORITHMS.items() for c in t])
def test_every_generator_round_trips(algorithm, collective):
    schedule = generate(algorithm, collective, 5)
    again = loads(dumps(schedule))
    assert [v.kind for v in check(again).violations] == [v.kind for v in check(schedule).violations]
    assert again.transfers == schedule.transfers and again.link_capacity == schedule.link_capacity


def test_the_contract_example_loads():
    text = json.dumps({"collective": "allreduce", "ranks": 4, "chunks": 4, "steps": [
        [{"src": 0, "dst": 1, "src_chunk": 0, "dst_chunk": 0, "op": "reduce"}, {"src": 1, "dst": 2, "src_chunk": 1, "dst_chunk": 1, "op": "reduce"}],
        [{"src": 0, "dst": 1, "src_chunk": 3, "dst_chunk": 3, "op": "copy"}]]})
    assert loads(text).transfers == 3


def test_steps_may_be_objects_with_name_and_phase():
    text = doc(steps=[{"name": "hop 1", "phase": "reduce-scatter", "transfers": GOOD["steps"][0]}])
    step = loads(text).steps[0]
    assert (step.name, step.phase, len(step)) == ("hop 1", "reduce-scatter", 1)


MALFORMED = [
    ("{", "f.json: not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
    ("[]", "f.json: the top level must be an object, got list"),
    (doc(collective="allreduse"), "f.json: unknown collective 'allreduse'; use one of allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "chunks"}), "f.json: missing field 'chunks'"),
    (doc(ranks=0), "f.json: field 'ranks' = 0 is out of range 1..65536"),
    (doc(ranks=True), "f.json: field 'ranks' must be an integer, got true"),
    (doc(chunks=-3), "f.json: field 'chunks' = -3 is out of range 1..1048576"),
    (doc(chunks=10**12), "f.json: field 'chunks' = 1000000000000 is out of range 1..1048576"),
    (doc(stepz=[]), "f.json: unknown field 'stepz'; expected channels, chunks, collective, link_capacity, name, owner, ranks, root, steps"),
    (doc(steps={}), "f.json: field 'steps' must be a list of steps, got dict"),
    (doc(steps=[[{"src": 0, "dst": 1, "chunk": 0}]]), "f.json: step 0, transfer 0: missing field 'op'"),
    (doc(steps=[[], [{"src": 0, "dst": 1, "chunk": 1, "op": "reduce"}]]), "f.json: step 1, transfer 0: field 'chunk' = 1 is out of range 0..0"),
    (doc(steps=[[{"src": 0, "dst": 1, "src_chunk": 0, "op": "copy"}]]), "f.json: step 0, transfer 0: missing field 'dst_chunk' (or 'chunk')"),
    (doc(steps=[[{"src": -1, "dst": 1, "chunk": 0, "op": "copy"}]]), "f.json: step 0, transfer 0: field 'src' = -1 is out of range 0..1"),
    (doc(steps=[[{"src": 0, "dst": 1, "chunk": 0, "op": "add"}]]), "f.json: step 0, transfer 0: field 'op' = 'add'; use 'reduce' or 'copy'"),
    (doc(steps=[[{"src": 0, "dts": 1, "chunk": 0, "op": "copy"}]]), "f.json: step 0, transfer 0: unknown field 'dts'; expected src, dst, chunk (or src_chunk and dst_chunk), op"),
    (doc(steps=[[{"src": 0.5, "dst": 1, "chunk": 0, "op": "copy"}]]), "f.json: step 0, transfer 0: field 'src' must be an integer, got 0.5"),
    (doc(steps=[[7]]), "f.json: step 0, transfer 0: a transfer must be an object, got int"),
    (doc(channels=[[0, 1]]), "f.json: channel 0: a channel must be an object, got list"),
    (doc(channels=[{"count": 1, "rings": [0, 1]}]), "f.json: channel 0: unknown field 'rings'; expected ring or tree, count"),
    (doc(channels=[{"ring": [0, 1]}]), "f.json: channel 0: missing field 'count'"),
    (doc(steps=[7]), "f.json: step 0: a step must be a list of transfers or an object with 'transfers', got int"),
    (doc(owner=[0, 1]), "f.json: field 'owner' applies to reduce_scatter only, not allreduce"),
    (doc(collective="reduce_scatter", chunks=3), "f.json: a reduce_scatter schedule needs chunks divisible by ranks (got 3 chunks for 2 ranks) or an explicit \"owner\""),
    (doc(collective="reduce_scatter", owner=[0]), "f.json: field 'owner' must list one chunk (or a list of chunks) per rank: 2 entries"),
    (doc(collective="reduce", root=2), "f.json: field 'root' = 2 is out of range 0..1"),
    # a reduce_scatter's owners must give every chunk to exactly one rank, one block each
    (doc(collective="reduce_scatter", chunks=2, owner=[[], []]), "f.json: field 'owner' must give every chunk to exactly one rank: chunks 0, 1 to no rank"),
    (doc(collective="reduce_scatter", chunks=2, owner=[0, 0]), "f.json: field 'owner' must give every chunk to exactly one rank: chunk 0 goes to ranks 0, 1; chunk 1 to no rank"),
    (doc(collective="reduce_scatter", chunks=2, owner=[[0, 1], [1]]), "f.json: field 'owner' must give every chunk to exactly one rank: chunk 1 goes to ranks 0, 1"),
    (doc(collective="reduce_scatter", ranks=3, chunks=3, owner=[[0, 2], [1], []]), "f.json: field 'owner': rank 0's chunks 0, 2 are not one block of consecutive chunks in increasing order"),
    (doc(collective="reduce_scatter", ranks=3, chunks=3, owner=[[2, 1], [0], []]), "f.json: field 'owner': rank 0's chunks 2, 1 are not one block of consecutive chunks in increasing order"),
]


@pytest.mark.parametrize("text, message", MALFORMED, ids=[m[1][8:60] for m in MALFORMED])
def test_malformed_files_are_refused_with_the_location(text, message):
    with pytest.raises(ScheduleFormatError) as caught:
        loads(text, "f.json")
    assert str(caught.value) == message


def test_unreadable_file(tmp_path):
    with pytest.raises(ScheduleFormatError, match="cannot read: No such file or directory"):
        load(str(tmp_path / "missing.json"))
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe")
    with pytest.raises(ScheduleFormatError, match="not UTF-8 text"):
        load(str(tmp_path / "bin.json"))


# Declared owners the spec allows: block r (the default), renamed ranks (ring-seed's rotation),
# blocks of different sizes and empty blocks (reduce_scatter_v's counts may differ and be 0).
VALID_OWNERS = [
    (2, 2, [0, 1]),
    (3, 3, [[1], [2], [0]]),
    (2, 5, [[0, 1, 2], [3, 4]]),
    (3, 4, [[2, 3], [], [0, 1]]),
]


@pytest.mark.parametrize("ranks, chunks, owner", VALID_OWNERS)
def test_owners_that_partition_the_chunks_into_blocks_load(ranks, chunks, owner):
    schedule = loads(json.dumps({"collective": "reduce_scatter", "ranks": ranks, "chunks": chunks, "owner": owner, "steps": []}))
    assert [list(o) for o in schedule.owner] == [o if isinstance(o, list) else [o] for o in owner]


def test_a_schedule_built_in_code_with_a_bad_owner_is_refused_where_it_is_used():
    from collspec.models.layout import ScheduleError

    schedule = replace(generate("ring", "reduce_scatter", 3), owner=((0,), (0,), (0,)))
    with pytest.raises(ScheduleError, match=r"field 'owner' must give every chunk to exactly one rank: chunk 0 goes to ranks 0, 1, 2; chunks 1, 2 to no rank$"):
        check(schedule)


BAD_OWNER_FILES = [
    ([[], [], []], "field 'owner' must give every chunk to exactly one rank: chunks 0, 1, 2 to no rank"),
    ([0, 0, 0], "field 'owner' must give every chunk to exactly one rank: chunk 0 goes to ranks 0, 1, 2; chunks 1, 2 to no rank"),
]


@pytest.mark.parametrize("owner, message", BAD_OWNER_FILES, ids=["no-owners", "all-own-chunk-0"])
@pytest.mark.parametrize("command", [["check"], ["prove", "--schedule"]])
def test_check_and_prove_refuse_owners_that_do_not_partition_with_exit_2(tmp_path, command, owner, message):
    path = tmp_path / "rs.json"
    # chunk 0 reduced onto every rank: with owner [0, 0, 0] this used to pass
    steps = [[{"src": 1, "dst": 0, "chunk": 0, "op": "reduce"}], [{"src": 2, "dst": 0, "chunk": 0, "op": "reduce"}],
             [{"src": 0, "dst": 1, "chunk": 0, "op": "copy"}, {"src": 0, "dst": 2, "chunk": 0, "op": "copy"}]]
    path.write_text(json.dumps({"collective": "reduce_scatter", "ranks": 3, "chunks": 3, "owner": owner, "steps": steps}))
    result = subprocess.run([sys.executable, "-m", "collspec", *command, str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"collspec {command[0]}: error: {path}: {message}"]
    assert result.stdout == ""
