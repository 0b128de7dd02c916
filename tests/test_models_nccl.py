"""NCCL's own algorithms as models: nccl-ring (channels, loops, ring orders)."""

from __future__ import annotations

import numpy as np
import pytest

from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.layout import ScheduleError

RING_COLLECTIVES = ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce")


def _sent(schedule, step):
    """{sender: sorted cells it sends} at one step."""
    s = schedule.steps[step]
    out: dict[int, list[int]] = {}
    for src, cell in zip(s.src.tolist(), s.src_chunk.tolist()):
        out.setdefault(src, []).append(cell)
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("collective", RING_COLLECTIVES)
def test_nccl_ring_passes_the_checker_over_a_sample_of_ranks_and_channels(collective):
    # bench/nccl_verify.py runs every N = 2..64 with 1..4 channels
    counts = {"allreduce": 37, "broadcast": 37, "reduce": 37, "reduce_scatter": 7, "allgather": 7}
    failures = {}
    for n in (2, 3, 7, 16, 33):
        for channels in (1, 2, 3, 4):
            schedule = generate("nccl-ring", collective, n, channels=channels, chunk=2, count=counts[collective])
            result = check(schedule)
            if not result.ok:
                failures[(n, channels)] = [str(v) for v in result.violations if v.is_error][:2]
    assert not failures


def test_allreduce_step_t_sends_chunk_ring_index_minus_t_minus_1():
    n, chunk = 5, 3
    schedule = generate("nccl-ring", "allreduce", n, channels=1, chunk=chunk, count=n * chunk)
    assert len(schedule.steps) == 2 * (n - 1)
    for t in range(2 * (n - 1)):
        expected = {i: [((i - t - 1) % n) * chunk + e for e in range(chunk)] for i in range(n)}
        assert _sent(schedule, t) == expected, t
        assert set(schedule.steps[t].op.tolist()) == {1 if t < n - 1 else 0}


def test_allreduce_step_names_are_nccls_primitives():
    schedule = generate("nccl-ring", "allreduce", 4, channels=1, chunk=1, count=4)
    assert [s.name for s in schedule.steps] == [
        "loop 0 step 0: send -> recvReduceSend",
        "loop 0 step 1: recvReduceSend -> recvReduceSend",
        "loop 0 step 2: recvReduceSend -> recvReduceCopySend",
        "loop 0 step 3: recvReduceCopySend -> recvCopySend",
        "loop 0 step 4: recvCopySend -> recvCopySend",
        "loop 0 step 5: recvCopySend -> recv",
    ]


def test_last_partial_loop_rounds_the_chunk_and_leaves_empty_chunks():
    # one channel, 4 ranks, chunk 4: a loop is 16 elements; 22 = one full loop and
    # a partial one of 6, whose chunkCount is alignUp(divUp(6, 4), 2) = 2: chunks
    # of 2, 2, 2 and 0 elements (chunk 3 empty).
    schedule = generate("nccl-ring", "allreduce", 4, channels=1, chunk=4, align=2, count=22)
    assert len(schedule.steps) == 2 * 2 * 3
    second = schedule.steps[6:]
    assert sorted({c for s in second for c in s.src_chunk.tolist()}) == list(range(16, 22))
    # at the first step of the partial loop the rank at ring index 0 sends chunk 3: empty
    assert 0 not in _sent(schedule, 6)
    assert _sent(schedule, 6)[1] == [16, 17]
    assert check(schedule).ok


def test_channels_get_contiguous_parts_and_run_at_once():
    # reduce-scatter of 1100 float32 per rank on 16 ranks and 4 channels: NCCL's
    # cells are 2 KiB (32 KiB of traffic over 16 ranks), 512 elements; the traffic
    # per channel (70,400 / 4 bytes) is under one cell's 32 KiB, so channels get
    # one cell each, the third the remainder: 512, 512, 76; channel 3 stays idle
    schedule = generate("nccl-ring", "reduce_scatter", 16, channels=4, count=1100)
    assert len(schedule.steps) == 15
    step = schedule.steps[0]
    block = 15 * 1100  # rank 0 first sends the block of rank 15
    assert sorted(step.src_chunk[step.src == 0].tolist()) == list(range(block, block + 1100))
    assert schedule.link_capacity == 1100
    assert check(schedule).ok


def test_each_channel_follows_its_own_ring():
    # all-gather of 1025 float64 per rank on 4 ranks: NCCL moves it as 8,200
    # bytes per rank in cells of 8 KiB (32 KiB of traffic over 4 ranks), so
    # channel 0 carries the first 1024 elements of each block, channel 1 the last
    rings = [[0, 1, 2, 3], [0, 2, 1, 3]]
    schedule = generate("nccl-ring", "allgather", 4, channels=2, count=1025, dtype="float64", rings=rings)
    step = schedule.steps[0]
    links = {(int(a), int(b), int(c) % 1025 // 1024) for a, b, c in zip(step.src, step.dst, step.src_chunk)}
    # channel 0 goes 0->1->2->3->0, channel 1 goes 0->2->1->3->0
    assert links == {(0, 1, 0), (1, 2, 0), (2, 3, 0), (3, 0, 0), (0, 2, 1), (2, 1, 1), (1, 3, 1), (3, 0, 1)}
    assert check(schedule).ok
    rng = np.random.default_rng(7)
    for collective in RING_COLLECTIVES:
        rings = [rng.permutation(9).tolist() for _ in range(3)]
        assert check(generate("nccl-ring", collective, 9, channels=3, chunk=2, rings=rings)).ok, collective


def test_broadcast_and_reduce_follow_the_ring_from_the_root():
    schedule = generate("nccl-ring", "broadcast", 4, channels=1, chunk=1, count=2, root=2)
    assert [(int(s.src[0]), int(s.dst[0])) for s in schedule.steps[:1]] == [(2, 3)]
    assert check(schedule).ok
    assert check(generate("nccl-ring", "reduce", 6, channels=2, root=5, rings=[[5, 4, 3, 2, 1, 0]])).ok


@pytest.mark.parametrize(
    "options, message",
    [
        ({"channels": 0}, "nccl-ring: option channels must be an integer from 1 to 64, got 0"),
        ({"channels": 65}, "nccl-ring: option channels must be an integer from 1 to 64, got 65"),
        ({"chunk": 3, "align": 2}, "nccl-ring: option chunk (3) must be a multiple of align (2)"),
        ({"rings": [[0, 1, 1, 3]]}, "nccl-ring: option rings: ring 0 [0, 1, 1, 3] is not a permutation of the ranks 0..3"),
        ({"rings": [[0, 1, 2, 3], [0, 1, 2]]}, "nccl-ring: option rings: ring 1 [0, 1, 2] is not a permutation of the ranks 0..3"),
    ],
)
def test_bad_options_name_the_option(options, message):
    with pytest.raises(ScheduleError) as error:
        generate("nccl-ring", "allreduce", 4, **options)
    assert str(error.value) == message


# -- nccl-tree: the double binary tree ---------------------------------------------------------

from collspec.models.generators import nccl_tree  # noqa: E402


def _btree_parent(n: int, r: int) -> int:
    """Tree 0's parent of rank r, from the bit-pattern rule stated in the
    comment above ``ncclGetBtree`` (src/graph/trees.cc, NCCL v2.30), written
    here as arithmetic: with b the lowest set bit of r, a rank whose bit 2b
    is clear (``xx01[0]``) hangs below r + b, or below r - b when r + b is
    out of range; a rank whose bit 2b is set (``xx11[0]``) hangs below r - b.
    Rank 0 is the root."""
    if r == 0:
        return -1
    b = r & -r
    if r & (2 * b) == 0 and r + b < n:
        return r + b
    return r - b


def _reference_trees(n: int) -> list[list[tuple[int, int, int]]]:
    """(parent, child 0, child 1) per rank for both trees, children found by
    inverting the parent relation (a child is child 0 when its label is below
    its parent's, else child 1, as ``down0``/``down1`` are): an independent
    reading of the documented rule, not the model's formulas.
    Tree 1 relabels tree 0 as the comment above ``ncclGetDtree`` says: the
    mirror r -> N-1-r for even N, the shift r -> r+1 for odd N."""
    parent0 = [_btree_parent(n, r) for r in range(n)]
    relabel = [n - 1 - r for r in range(n)] if n % 2 == 0 else [(r + 1) % n for r in range(n)]
    trees = []
    inverse = [0] * n
    for x, r in enumerate(relabel):
        inverse[r] = x
    for label_of in (list(range(n)), inverse):  # rank -> its label in tree 0's numbering
        rank_of = [0] * n
        for r, x in enumerate(label_of):
            rank_of[x] = r
        parent = [-1 if parent0[label_of[r]] == -1 else rank_of[parent0[label_of[r]]] for r in range(n)]
        slots = [[-1, -1] for _ in range(n)]
        for c, p in enumerate(parent):  # child slot: is the child's label below its parent's
            if p != -1:
                slots[p][0 if label_of[c] < label_of[p] else 1] = c
        trees.append([(parent[r], *slots[r]) for r in range(n)])
    return trees


#: the three illustrations in src/graph/trees.cc (NCCL v2.30), as parent lists
ILLUSTRATED = {
    # ncclGetBtree, 14 ranks
    (14, 0): [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12],
    # ncclGetDtree, 12 ranks: the btree and its mirror (root 11)
    (12, 0): [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 8, 10],
    (12, 1): [1, 3, 1, 11, 5, 7, 5, 3, 9, 7, 9, -1],
    # ncclGetDtree, 13 ranks: the btree and its shift by one (root 1)
    (13, 0): [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8],
    (13, 1): [9, -1, 3, 5, 3, 9, 7, 5, 7, 1, 11, 0, 11],
}


@pytest.mark.parametrize("n, tree", sorted(ILLUSTRATED))
def test_the_trees_match_ncclS_own_illustrations(n, tree):
    assert nccl_tree.parents(n)[tree] == ILLUSTRATED[(n, tree)]
    assert [row[0] for row in _reference_trees(n)[tree]] == ILLUSTRATED[(n, tree)]


@pytest.mark.parametrize("n", [*range(1, 70), 127, 128, 129, 255, 256, 257, 1000, 4097])
def test_the_closed_form_trees_are_ncclGetDtrees(n):
    ranks = np.arange(n, dtype=np.int64)
    ref = _reference_trees(n)
    want = [[ref[t][r] for t in (0, 1)] for r in range(n)]
    assert nccl_tree.parents(n) == [[want[r][t][0] for r in range(n)] for t in (0, 1)]
    for tree in (0, 1):
        x = nccl_tree.to_label(ranks, n, tree)
        for w in (0, 1):
            got = nccl_tree.to_rank(nccl_tree.btree_child(x, n, w), n, tree)
            assert got.tolist() == [want[r][tree][1 + w] for r in range(n)], (tree, w)


def test_both_trees_span_and_only_rank_0_of_odd_n_forwards_in_both():
    # proofs/nccl_trees.py proves this for every N <= 65536; here numpy checks a sample
    for n in [*range(1, 400), 4095, 4096, 65535, 65536]:
        facts = nccl_tree.tree_facts(n)
        assert facts["interior_in_both"] == ([0] if n % 2 == 1 and n >= 3 else []), n


def test_tree_facts_reject_a_broken_tree(monkeypatch):
    monkeypatch.setattr(nccl_tree, "btree_parent", lambda x, n: x - nccl_tree.ix.lowest_set_bit(x))
    with pytest.raises(ValueError, match="N=6 tree 0: a child's parent is not the rank that lists it"):
        nccl_tree.tree_facts(6)


def test_the_double_binary_tree_is_proved_for_every_n_up_to_65536():
    from collspec.proofs import nccl_trees

    outcome = nccl_trees.prove()
    assert outcome.status == "proved", (outcome.message, outcome.counterexample)
    assert len(outcome.queries) == 8


def test_nccl_tree_passes_the_checker_over_a_sample_and_at_512_ranks():
    # bench/nccl_verify.py runs every N = 2..64 with 1..4 channels
    failures = {}
    for n in (2, 3, 6, 13, 64):
        for channels in (1, 2, 3, 4):
            parts = [23 // channels + (c < 23 % channels) for c in range(channels)]
            for options in ({"chunk": 2, "count": 23}, {"chunk": 2, "parts": parts}):
                result = check(generate("nccl-tree", "allreduce", n, channels=channels, **options))
                if not result.ok:
                    failures[(n, channels, str(options))] = [str(v) for v in result.violations if v.is_error][:2]
    for n in (2, 5, 8):  # NCCL's split: 3 of 4 channels (tree 0, 0, 1); LL128: a chunk term of N, one channel empty
        for options in ({"count": 10_000, "channels": 4, "chunk": 700}, {"count": 20_000, "channels": 4, "protocol": "ll128", "dtype": "float16"}):
            if not check(generate("nccl-tree", "allreduce", n, **options)).ok:
                failures[(n, str(options))] = "failed"
    assert not failures
    assert check(generate("nccl-tree", "allreduce", 512)).ok


def test_reduces_go_to_the_parent_and_copies_to_the_children_of_each_channels_tree():
    n, channels = 10, 2
    schedule = generate("nccl-tree", "allreduce", n, channels=channels, chunk=1, parts=[2, 2])
    trees = nccl_tree.parents(n)
    per = 2  # channel c holds cells 2c, 2c + 1 and runs on tree c
    assert len(schedule.steps) == 2 + 2 * 4 - 1  # 2 chunks, root level ceil(log2 10) = 4
    for step in schedule.steps:
        for src, dst, cell, op in zip(step.src.tolist(), step.dst.tolist(), step.src_chunk.tolist(), step.op.tolist()):
            parent = trees[cell // per]
            assert (parent[src] == dst) if op == 1 else (parent[dst] == src)


def test_explain_json_carries_both_trees_and_the_text_draws_them(tmp_path):
    import json
    import subprocess
    import sys

    path = tmp_path / "tree.json"
    result = subprocess.run([sys.executable, "-m", "collspec", "explain", "nccl-tree", "--ranks", "6", "--json", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert [t["parent"] for t in json.loads(path.read_text())["trees"]] == [[-1, 2, 4, 2, 0, 4], [1, 5, 3, 1, 3, -1]]
    assert "Tree 1\n  5\n  └── 1\n      ├── 0\n      └── 3\n          ├── 2\n          └── 4\n" in result.stdout


# -- nccl-tree: NCCL 2.30's host split and the tree's chunk --------------------------------------

from collspec.models.generators import nccl_host as host  # noqa: E402

#: (count, dtype, protocol, channels, N) -> the elements of each channel NCCL uses and NCCL's
#: chunkCount there, read from NCCL 2.30.7's src/enqueue.cc for NCCL_ALGO_TREE: the split is
#: scheduleCollTasksToPlan's, the same as any all-reduce's (cells of 16 KiB of traffic, 4 KiB
#: for LL; fewer channels for small vectors; the remainder off the last part); the chunk is
#: calcCollChunking's, the protocol's step buffer without the ring's chunk steps (Simple
#: 4 MiB / 8 = 512 KiB, LL 64 KiB / 2 = 32 KiB), LL128 576,000 bytes halved for parts of a few
#: MiB (every part the model takes ends at 18,000, rounded down to 17,280 bytes)
TREE_SPLITS = [
    ((10_000, "float32", "simple", 4, 4), [4096, 4096, 1808], 131072),  # 3 cells of 4096 on 3 of 4 channels
    ((1000, "float32", "simple", 4, 4), [1000], 131072),  # under one cell: channel 0 (tree 0) alone
    ((100_000, "float16", "simple", 8, 16), [16384] * 6 + [1696], 262144),  # 2 cells a channel, 13 cells: 7 channels
    ((513, "float64", "ll", 2, 2), [512, 1], 4096),  # LL: 4 KiB cells
    ((100_000, "float32", "ll128", 2, 4), [53248, 46752], 4320),  # 13 + 12 cells; 17,280-byte chunks
    ((131_072, "float64", "ll128", 1, 64), [131072], 2160),  # 1 MiB on one channel: still 17,280 bytes
    ((10_000, "int8", "ll128", 4, 8), [10_000], 17280),
]


@pytest.mark.parametrize("args, parts, chunk", TREE_SPLITS)
def test_tree_channel_split_and_chunk_are_nccls(args, parts, chunk):
    count, dtype, protocol, channels, n = args
    layout = nccl_tree.layout_of(channels=channels, count=count, dtype=dtype, protocol=protocol)
    assert [p for p in layout.parts() if p] == parts and layout.parts()[len(parts):] == [0] * (channels - len(parts))
    size = host.element_size(dtype)
    assert [host.tree_chunk_bytes(protocol, p * size, n) // size for p in parts] == [chunk] * len(parts)
    assert layout.chunks(n)[: len(parts)] == [min(chunk, p) for p in parts]  # a chunk past the part sends the part
    trees = [int(nccl_tree.tree_of(c, channels)) for c in range(len(parts))]
    assert nccl_tree.channel_table(n, channels=channels, count=count, dtype=dtype, protocol=protocol) == [
        {"tree": t, "count": p} for t, p in zip(trees, parts)]


#: (protocol, part bytes, N) -> calcCollChunking's tree chunk in bytes (NCCL 2.30.7, one rank per
#: node: nNodes = N, ppn = 1, nstepsLL128 = 1 + log2i(N) + 0.1); LL128 halves while
#: bytes / chunk < 64 nsteps and the chunk is above 128 KiB, then while below 16 nsteps and above 32 KiB
TREE_CHUNKS = [
    (("simple", 48, 4), 524288),  # the ring's ALLREDUCE_CHUNKSTEPS (4) do not apply to the tree
    (("simple", 1 << 30, 1024), 524288),
    (("ll", 48, 4), 32768),
    (("ll128", 4 << 30, 4), 576000),  # 4,800 KiB / 8 x 15/16: no halving for large parts
    (("ll128", 100 << 20, 2), 576000),  # 100 MiB / 576,000 = 182 >= 64 x 2.1 = 134.4
    (("ll128", 100 << 20, 4), 288000),  # 182 < 64 x 3.1 = 198.4: halved once
    (("ll128", 100 << 20, 1024), 144000),  # 182, 364 < 64 x 11.1 = 710.4; 728 is not
    (("ll128", 40 << 20, 1024), 71040),  # 72,000 (not above 128 KiB), rounded down to the 1,920-byte grain
    (("ll128", 1 << 20, 4), 17280),  # then 36,000 and 18,000 (not above 32 KiB), rounded down
]


@pytest.mark.parametrize("args, chunk", TREE_CHUNKS)
def test_tree_chunk_is_nccls(args, chunk):
    assert host.tree_chunk_bytes(*args) == chunk


def test_tree_chunk_on_a_symbolic_n_is_the_same_function():
    import z3

    from collspec.models.program import BITVEC_WIDTH

    n = z3.BitVec("N", BITVEC_WIDTH)
    for part, size in ((20_000, 4), (131_072, 8), (50_000, 1)):
        term = host.tree_chunk_elements(size, "ll128", part, n)
        for value in (2, 3, 4, 64, 1000, 65536):
            got = z3.simplify(z3.substitute(term, (n, z3.BitVecVal(value, BITVEC_WIDTH)))).as_long()
            assert got == min(part, host.tree_chunk_bytes("ll128", part * size, value) // size)


def test_tree_schedule_sends_nccls_parts_in_nccls_chunks():
    # 100,000 float32, LL128, 2 channels, 4 ranks: channel 0 (tree 0) cells 0..53247, channel 1
    # (tree 1, the mirror) from 53248; chunks of 4,320: 13 on channel 0, the last one 1,408
    schedule = generate("nccl-tree", "allreduce", 4, channels=2, count=100_000, protocol="ll128")
    assert len(schedule.steps) == 13 + 2 * 2 - 1
    sent = _sent(schedule, 0)  # the leaves send chunk 0 up: rank 1 in tree 0, rank 0 (label 3) in tree 1
    assert sent[1] == list(range(4320)) and sent[0] == list(range(53248, 53248 + 4320))
    last = [cell for cell in _sent(schedule, 12)[1] if cell < 53248]  # rank 1 is a leaf of tree 0 only
    assert last == list(range(12 * 4320, 53248))
    assert schedule.meta["channel_table"] == [{"tree": 0, "count": 53248}, {"tree": 1, "count": 46752}]
    assert check(schedule).ok


def test_tree_parts_and_chunk_override_nccls():
    assert nccl_tree.layout_of(channels=2, parts=[3, 1]).parts() == [3, 1]
    assert nccl_tree.layout_of(channels=3, parts=[3, 1]).parts() == [3, 1, 0]
    assert nccl_tree.layout_of(count=10_000, channels=4, chunk=700).chunks(4) == [700] * 4
    schedule = generate("nccl-tree", "allreduce", 6, channels=2, chunk=1, parts=[3, 1])
    assert schedule.meta["channel_table"] == [{"tree": 0, "count": 3}, {"tree": 1, "count": 1}]
    assert check(schedule).ok


def test_tree_transfer_that_uses_k_only_where_it_names_a_chunk_is_the_same_schedule(monkeypatch):
    """Where k x chunkCount could pass the bit-vectors the transfer clamps k
    (:meth:`TreeLayout.wide`); forced on small options it builds the same schedule."""
    cases = [(6, {"channels": 2, "chunk": 2, "parts": [5, 3]}), (5, {"channels": 4, "count": 10_000, "chunk": 1500}), (3, {"count": 7})]
    plain = [_plain_steps(generate("nccl-tree", "allreduce", n, **options)) for n, options in cases]
    monkeypatch.setattr(nccl_tree.TreeLayout, "wide", lambda self, n: True)
    assert [_plain_steps(generate("nccl-tree", "allreduce", n, **options)) for n, options in cases] == plain


def _plain_steps(schedule):
    return [tuple(getattr(step, f).tolist() for f in ("src", "dst", "src_chunk", "dst_chunk", "op")) for step in schedule.steps]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"dtype": "float33"}, "nccl-tree: option dtype must be one of int8, .*, got 'float33'"),
        ({"protocol": "tcp"}, "nccl-tree: option protocol must be one of simple, ll, ll128, got 'tcp'"),
        ({"channels": 2, "parts": [1, 2, 3]}, r"nccl-tree: option parts must list 1 to 2 channel parts \(one per channel\), got \[1, 2, 3\]"),
        ({"count": 5, "parts": [3, 1]}, r"nccl-tree: option parts must add up to count \(5\), got 3\+1 = 4"),
        ({"chunk": 0}, "nccl-tree: option chunk must be an integer from 1 to 131072, got 0"),
    ],
)
def test_tree_bad_options_name_the_option(options, message):
    with pytest.raises(ScheduleError, match=message):
        generate("nccl-tree", "allreduce", 4, **options)


# -- nccl-pat: Parallel Aggregated Trees -------------------------------------------------------

from collspec.models.generators import nccl_pat  # noqa: E402


def _distances(schedule, n):
    """Per step: the set of (dst - src) mod N over its transfers."""
    return [sorted({(int(d) - int(s)) % n for s, d in zip(step.src, step.dst)}) for step in schedule.steps]


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_nccl_pat_passes_the_checker_for_every_aggregation(collective):
    # bench/nccl_verify.py runs every N = 2..64 and N = 512
    failures = {}
    for n in (2, 3, 6, 8, 13, 16):
        most = int(nccl_pat.max_aggregation(n))
        for aggregation in [1 << k for k in range(most.bit_length())]:
            result = check(generate("nccl-pat", collective, n, aggregation=aggregation, chunk=2, count=3))
            if not result.ok:
                failures[(n, aggregation)] = [str(v) for v in result.violations if v.is_error][:2]
    assert not failures


def test_without_aggregation_the_peer_distance_is_the_offsets_lowest_bit():
    n = 8
    schedule = generate("nccl-pat", "reduce_scatter", n, aggregation=1, count=1)
    assert _distances(schedule, n) == [[1], [2], [1], [4], [1], [2], [1]]  # offsets 7, 6, ..., 1
    first = schedule.steps[0]
    # offset 7: rank r sends its partial for the block of rank r + 7 to rank r + 1
    assert [(int(s), int(d), int(c)) for s, d, c in zip(first.src, first.dst, first.src_chunk)] == [(r, (r + 1) % 8, (r + 7) % 8) for r in range(8)]


def test_full_aggregation_takes_log2_steps_and_skips_offsets_past_n():
    # aggregation 256 with postFreq 256 (a chunk of 256 elements): one message a step
    schedule = generate("nccl-pat", "reduce_scatter", 512, chunk=256, count=1)
    assert len(schedule.steps) == 9 and _distances(schedule, 512) == [[1], [2], [4], [8], [16], [32], [64], [128], [256]]
    # 6 ranks, no aggregation: P = 8, so offsets 7 and 6 do not exist and their steps send nothing
    six = generate("nccl-pat", "reduce_scatter", 6, aggregation=1, count=1)
    assert len(six.steps) == 7 and [len(s) for s in six.steps] == [0, 0, 6, 6, 6, 6, 6]
    # aggregated (N = 6, A = 2, delta = 4): the offsets i * 4 + as travel together: as = 3 carries 3 (7 is
    # past N), as = 2 carries 2 (6 is past N), as = 1 carries 1 and 5 in one message; then offset 4
    agg = generate("nccl-pat", "reduce_scatter", 6, aggregation=2, count=1)
    sent = [sorted(step.src_chunk[step.src == 0].tolist()) for step in agg.steps]
    assert sent == [[3], [2], [1, 5], [4]] and [len(s) for s in agg.steps] == [6, 6, 12, 6]


def test_pat_allgather_is_the_reduce_scatter_tree_backwards():
    # the same links and blocks in all (each copy runs a reduce backwards), in another order
    n = 12
    rs = generate("nccl-pat", "reduce_scatter", n, aggregation=2, count=1)
    ag = generate("nccl-pat", "allgather", n, aggregation=2, count=1)
    backwards = sorted((d, s_, c) for st in rs.steps for s_, d, c in zip(st.src.tolist(), st.dst.tolist(), st.src_chunk.tolist()))
    forwards = sorted((s_, d, c) for st in ag.steps for s_, d, c in zip(st.src.tolist(), st.dst.tolist(), st.src_chunk.tolist()))
    assert len(backwards) == len(forwards) == n * (n - 1)
    assert {op for st in ag.steps for op in st.op.tolist()} == {0} and {op for st in rs.steps for op in st.op.tolist()} == {1}


#: PatAGAlgorithm::nextAs (src/include/collectives.h, NCCL 2.30.7): the order of the
#: all-gather's steps ``as`` after its scale steps, for aggDelta 2, 4, 8, 16
NEXT_AS = {2: [1], 4: [2, 3, 1], 8: [4, 6, 7, 5, 2, 3, 1], 16: [8, 12, 14, 15, 13, 10, 11, 9, 4, 6, 7, 5, 2, 3, 1]}


@pytest.mark.parametrize("delta", sorted(NEXT_AS))
def test_pat_allgather_walks_nccls_next_as_order(delta):
    assert [int(nccl_pat.next_as(np.int64(p), delta)) for p in range(delta - 1)] == NEXT_AS[delta]


def _sends(schedule, src, dst):
    """Blocks (count 1) src sends to dst, one list per message (step), in order."""
    return [sorted(st.src_chunk[(st.src == src) & (st.dst == dst)].tolist()) for st in schedule.steps if ((st.src == src) & (st.dst == dst)).any()]


def test_pat_allgather_n9_rank_0_sends_blocks_2_and_6_to_rank_8_before_0_and_4():
    # aggregation 4, aggDelta 4: after the scale steps, as = 2, 3, 1; as 3 carries offsets 3 and 7
    # (blocks 0 + 3 - 1 = 2 and 6), as 1 offsets 1 and 5 (blocks 0 and 4); postFreq 1: one block a message
    ag = generate("nccl-pat", "allgather", 9, count=1, chunk=1)
    assert _sends(ag, 0, 8) == [[2], [6], [0], [4]]


#: (N, count, chunk) -> (aggFactor, postFreq), from the PAT constructors (NCCL 2.30.7): postFreq
#: doubles while chunk / (count x postFreq) >= 2 and below N/2; aggFactor is postFreq doubled
#: through the NCCL_STEPS (8) loop, still below N/2: min(8, max) .. max, 1 only for N <= 3
AGGREGATION = [
    ((3, 1, 1), (1, 1)), ((4, 1, 1), (2, 1)), ((9, 1, 1), (4, 1)), ((17, 1, 1), (8, 1)), ((64, 1, 1), (8, 1)),
    ((64, 1, 2), (16, 2)), ((64, 1, 4), (32, 4)), ((64, 1, 1024), (32, 32)), ((64, 3, 2), (8, 1)), ((512, 1, 64), (256, 64)),
]


@pytest.mark.parametrize("args, expected", AGGREGATION)
def test_pat_aggregation_and_post_frequency_are_nccls(args, expected):
    n, count, chunk = args
    post = int(nccl_pat.post_frequency(n, chunk, count))
    assert (int(nccl_pat.nccl_aggregation(n, post)), post) == expected


#: (collective, N, count, dtype) -> PAT's chunk in elements, from calcCollChunking (src/enqueue.cc,
#: NCCL 2.30.7): 512 KiB (one Simple step, 4 MiB / NCCL_STEPS), halved while above 64 KiB and
#: chunk x 1 channel x 16 (reduce-scatter) or 32 (all-gather) > N x count x sizeof(T); over sizeof(T)
PAT_CHUNK = [
    (("reduce_scatter", 8, 2, "float32"), 16384),  # 64 B: the 64 KiB floor
    (("reduce_scatter", 8, 65535, "float32"), 16384),  # 2 MiB - 32 B: 128 KiB x 16 > bytes
    (("reduce_scatter", 8, 65536, "float32"), 32768),  # 2 MiB: 128 KiB
    (("reduce_scatter", 16, 131072, "float16"), 131072),  # 4 MiB: 256 KiB of 2-byte elements
    (("reduce_scatter", 64, 32768, "float32"), 131072),  # 8 MiB: 512 KiB
    (("reduce_scatter", 64, 1 << 18, "float64"), 65536),  # 128 MiB: never above 512 KiB
    (("reduce_scatter", 4096, 1, "int8"), 65536),
    (("allgather", 8, 65536, "float32"), 16384),  # 2 MiB: all-gather halves while chunk x 32 > bytes
    (("allgather", 32, 65536, "float32"), 65536),  # 8 MiB: 256 KiB
    (("allgather", 64, 65536, "float64"), 65536),  # 32 MiB: 512 KiB of 8-byte elements
    (("allgather", 128, 16384, "bfloat16"), 65536),  # 4 MiB: 128 KiB
]


@pytest.mark.parametrize("args, expected", PAT_CHUNK)
def test_pat_chunk_is_nccls_for_the_bytes(args, expected):
    from collspec.models.generators import nccl_host

    collective, n, count, dtype = args
    assert int(nccl_host.pat_chunk_elements(collective, n, count, nccl_host.element_size(dtype))) == expected
    made = nccl_pat.pat_program(collective, count=count, dtype=dtype)
    assert f"chunk {expected}, {count} elements per rank" in made.describe(n)


def test_pat_default_chunk_sets_post_frequency_and_loops():
    # 4 ranks, 65536 float32 a rank (1 MiB): the 64 KiB chunk (16384 elements) is 4 loops, postFreq 1
    # (the chunk holds less than twice a rank's data), aggregation 2 (N/2)
    made = nccl_pat.pat_program("reduce_scatter", count=65536)
    assert int(made.steps(4)) == 4 * int(nccl_pat.steps_per_loop(4, 2, 1)) and "aggregation 2, postFreq 1, chunk 16384" in made.describe(4)
    # the defaults (count 2): the chunk holds every block many times over, so postFreq is the most
    # aggregation, one message a step; an explicit chunk still overrides (chunk 2: postFreq 1)
    assert "aggregation 32, postFreq 32, chunk 16384" in nccl_pat.pat_program("allgather").describe(64)
    assert "aggregation 8, postFreq 1, chunk 2" in nccl_pat.pat_program("allgather", chunk=2).describe(64)
    # the schedule (built from the Z3 terms) takes the same chunk: 8 ranks of 32768 float64 (2 MiB)
    # get 128 KiB, 16384 elements: two loops of 7 messages, the second from element 16384
    s = generate("nccl-pat", "reduce_scatter", 8, count=32768, dtype="float64")
    assert len(s.steps) == 2 * int(nccl_pat.steps_per_loop(8, 4, 1)) == 14
    assert set((s.steps[7].src_chunk % 32768).tolist()) == set(range(16384, 32768)) and set((s.steps[6].src_chunk % 32768).tolist()) == set(range(16384))
    # the element size: 8-byte elements halve the chunk in elements (int8's is 65536)
    assert "chunk 8192" in nccl_pat.pat_program("reduce_scatter", dtype="float64").describe(8)
    assert "chunk 65536" in nccl_pat.pat_program("reduce_scatter", dtype="int8").describe(8)


def test_pat_messages_carry_post_frequency_blocks():
    # N = 64, count 1, chunk 1: postFreq 1, so every block is its own message: 64 x 63
    s = generate("nccl-pat", "reduce_scatter", 64, count=1, chunk=1)
    messages = sum(len({(a, b) for a, b in zip(st.src.tolist(), st.dst.tolist())}) for st in s.steps)
    assert messages == 64 * 63
    # chunk 4: postFreq 4, aggregation 32: messages of up to 4 blocks on each connection
    s = generate("nccl-pat", "allgather", 64, count=1, chunk=4)
    sizes = [int(np.count_nonzero(st.src == 0)) for st in s.steps if np.count_nonzero(st.src == 0)]
    assert max(sizes) == 4 and sum(sizes) == 63 and check(s).ok


def _slots(schedule, src, dst):
    """Blocks (count 1) of each message from src to dst, in their places in the message."""
    return [st.src_chunk[(st.src == src) & (st.dst == dst)].tolist() for st in schedule.steps if ((st.src == src) & (st.dst == dst)).any()]


def test_pat_reduce_scatter_slots_hold_nccls_blocks_in_nccls_places():
    # N = 128, count 1, chunk 4 (PatRSAlgorithm, NCCL 2.30.7): postFreq 4, aggFactor 32, aggDelta 4.
    # Op a of step as = 3 sends offset mirrorInvert(a, 32) x 4 + 3 to rank + 1 at sendOffset a % 4;
    # postSend every 4th op: slot k holds a = 4k .. 4k + 3 in that order (mirrorInvert(0..3, 32) = 31, 15, 23, 7)
    rs = generate("nccl-pat", "reduce_scatter", 128, count=1, chunk=4)
    assert _slots(rs, 0, 1)[:4] == [[127, 63, 95, 31], [111, 47, 79, 15], [119, 55, 87, 23], [103, 39, 71, 7]]
    # Written ahead: during as = 2 rank 0 writes its partials for offsets mirrorInvert(a, 32) x 4 into
    # slots 0..3 of its connection to rank 4 (stepOffset a / 4), posting none; during as = 1 it adds
    # the partials received from rank 127 at the same places and posts each slot. The receiver reads
    # these four messages:
    assert _slots(rs, 0, 4) == [[124, 60, 92, 28], [108, 44, 76, 12], [116, 52, 84, 20], [100, 36, 68, 4]]
    # the scale steps: offsets (2 mirrorInvert(a, lastA) + 1) x scale x 4; scale 8: lastA 2, one message
    assert _slots(rs, 0, 32) == [[96, 32]] and _slots(rs, 0, 64) == [[64]]
    # the order in which rank 0's connections post (distance per message): as 3, 2, 1 then the scales
    distances = [int(st.dst[st.src == 0][0]) for st in rs.steps]
    assert distances == [1] * 8 + [2] * 8 + [1] * 8 + [4] * 4 + [8] * 2 + [16, 32, 64]
    # all-gather (PatAGAlgorithm): op a of step as sends offset a x 4 + as - lowbit(as) at sendOffset
    # a % 4 to rank - lowbit(as): in a's order; scale 1 sends offsets (2a + 1) x 4 - 4 to rank - 4
    ag = generate("nccl-pat", "allgather", 128, count=1, chunk=4)
    assert _slots(ag, 0, 127)[:3] == [[2, 6, 10, 14], [18, 22, 26, 30], [34, 38, 42, 46]]
    assert _slots(ag, 0, 124)[:3] == [[0, 8, 16, 24], [32, 40, 48, 56], [64, 72, 80, 88]] and _slots(ag, 0, 64) == [[0]]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"aggregation": 3}, "nccl-pat: option aggregation must be a power of two, got 3"),
        ({"aggregation": 8}, "nccl-pat: option aggregation must be at most 4 for 8 ranks (NCCL stops doubling it at N/2), got 8"),
        ({"chunk": 0}, "nccl-pat: option chunk must be an integer from 1 to 262144, got 0"),
        ({"dtype": "float8"}, "nccl-pat: option dtype must be one of int8, uint8, int32, int64, float16, bfloat16, float32, float64, got 'float8'"),
    ],
)
def test_pat_bad_options_name_the_option(options, message):
    with pytest.raises(ScheduleError) as error:
        generate("nccl-pat", "reduce_scatter", 8, **options)
    assert str(error.value) == message


# -- bits: NCCL's ring addition order ----------------------------------------------------------

from collspec.models import bits  # noqa: E402
from collspec.models.algebras import Numbers  # noqa: E402
from collspec.models.interpreter import run as interpret  # noqa: E402


def _ring_sum(values, order, owner_index):
    """((x[k+1] + x[k+2]) + ...) + x[k] along ``order``, k the owner's index, rounding each add."""
    n = len(order)
    total = values[order[(owner_index + 1) % n]]
    for step in range(2, n + 1):
        total = (total + values[order[(owner_index + step) % n]]).astype(values.dtype)
    return total


def test_the_interpreter_adds_in_nccls_ring_order_for_any_channels_and_rings():
    # 8,221 float16 on 2 channels: NCCL's host puts 8,192 (one 16 KiB cell) on
    # channel 0 and 29 on channel 1; chunk 2 (a tuner's) makes many loops
    n, count, chunk, first = 5, 8192 + 29, 2, 8192
    rng = np.random.default_rng(3)
    x = [rng.standard_normal(count).astype(np.float16) * np.float16(100) for _ in range(n)]
    rings = [[0, 1, 2, 3, 4], [3, 0, 4, 2, 1]]
    schedule = generate("nccl-ring", "allreduce", n, channels=2, chunk=chunk, count=count, rings=rings, dtype="float16")
    got = interpret(schedule, Numbers(x, op="sum")).state
    for e in range(count):
        c = int(e >= first)
        local = e - c * first
        part = first if c == 0 else count - first
        loop, within = divmod(local, n * chunk)
        rem = part - loop * n * chunk
        chunk_count = chunk if rem >= n * chunk else -(-rem // n)
        k = within // chunk_count  # the chunk, owned by ring index k: k steps after rank 0 along the ring
        ring = rings[c][rings[c].index(0):] + rings[c][:rings[c].index(0)]
        want = _ring_sum(np.array([v[e] for v in x]), ring, k)
        assert all(got[r][e].tobytes() == want.tobytes() for r in range(n)), e
    # and it is not the rank-order sum everywhere: the order is what the test pins down
    plain = [np.float16(0)] * count
    for e in range(count):
        acc = x[0][e]
        for r in range(1, n):
            acc = np.float16(acc + x[r][e])
        plain[e] = acc
    assert any(got[0][e] != plain[e] for e in range(count))


def test_predict_uses_one_channel_and_16_byte_chunks():
    n, count = 4, 10
    x = [np.arange(count, dtype=np.float32) * (r + 1) for r in range(n)]
    # float32: align 4, chunkCount = alignUp(divUp(10, 4), 4) = 4: chunks [0, 4), [4, 8), [8, 10), empty
    schedule = generate("nccl-ring", "allreduce", n, **bits.schedule_options("nccl-ring", "allreduce", 4, count))
    assert len(schedule.steps) == 2 * (n - 1) and schedule.steps[0].src_chunk[schedule.steps[0].src == 1].tolist() == [0, 1, 2, 3]
    out = bits.predict("nccl-ring", "allreduce", x, "sum")
    assert all(np.array_equal(o, np.arange(count, dtype=np.float32) * 10) for o in out)
    with pytest.raises(ScheduleError, match="bits:ring: no bit-exact model of 'ring'; use one of nccl-ring"):
        bits.predict("ring", "allreduce", x, "sum")


def _conform(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "collspec", "conform", "--world-size", "4", *args], capture_output=True, text=True)


def test_conform_expect_bits_passes_impl_nccl_ring_at_4_ranks():
    ok = _conform("--backend", "nccl-ring", "--expect", "bits:nccl-ring", "--collective", "allreduce,reduce_scatter,reduce",
                  "--dtype", "float16", "--op", "sum", "--sizes", "100")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "conform nccl-ring: ok (0 errors; 14 pass)" in ok.stdout
    bad = _conform("--backend", "ring", "--expect", "bits:ring")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == ["collspec conform: error: --expect bits:ring: no bit-exact model of 'ring'; use one of nccl-ring"]


def _finals(case, n, rings):
    """Every rank's final images after NCCL's ring on ``rings`` ran the case (the interpreter, in the dtype)."""
    from collspec.conformance.buffers import all_inputs, initial_images, inside, layout_of

    schedule = generate("nccl-ring", case.collective, n, rings=rings, **bits.schedule_options("nccl-ring", case.collective, 2, case.count))
    state = interpret(schedule, Numbers([v.copy() for v in all_inputs(case, n)], op=case.op)).state
    finals = []
    for rank in range(n):
        images = initial_images(case, n, rank)
        view = layout_of(case, n, rank).output
        images[view.storage][inside(view, case.dtype)] = state[rank][schedule.layout.outputs[rank]]
        finals.append(images)
    return finals


def test_expect_bits_catches_a_ring_that_adds_in_another_order():
    from collspec.conformance.cases import Case
    from collspec.conformance.checks import judge, judge_bits

    case = Case("allreduce", "float16", "sum", 100, True, None, "rounding")
    assert judge_bits(case, 4, _finals(case, 4, [[0, 1, 2, 3]]), "nccl-ring") == []
    backwards = _finals(case, 4, [[3, 2, 1, 0]])  # the same ring run the other way: every sum in another order
    assert judge(case, 4, backwards) == []  # within the spec's rounding bound: only the bits tell
    found = judge_bits(case, 4, backwards, "nccl-ring")
    assert [(v.kind, v.message) for v in found] == [
        ("wrong-value", f"allreduce/float16/sum/n=100/inplace/rounding/seed=0: rank {r} differs from the nccl-ring model's bits "
                        "in 31 element(s); element 4: got 1.6201171875, the model gives 1.62109375") for r in range(4)]
    assert found[0].details["expect"] == "bits:nccl-ring" and found[0].details["differing"] == 31


def test_conform_expect_bits_forces_nccls_ring_simple_one_channel_on_the_nccl_backend(monkeypatch):
    from collspec.conformance import conform as conform_module
    from collspec.conformance import runner

    seen = []
    monkeypatch.setattr(conform_module, "_check_options", lambda *args: None)  # no GPU here: the launch is what is checked
    monkeypatch.setattr(runner, "run", lambda settings, record: seen.append(settings) or runner.Result([], 0, True, 0.0))
    result = conform_module.conform("nccl", 2, collectives=["allreduce"], dtypes=["float16"], ops=["sum"], sizes=[100], expect="bits:nccl-ring")
    assert [s.variables for s in seen] == [{"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "1"}]
    assert seen[0].expect_bits == "nccl-ring" and result.settings["expect"] == "bits:nccl-ring"


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available() or __import__("torch").cuda.device_count() < 2,
                    reason="needs two CUDA GPUs (NCCL runs one rank per GPU)")
def test_nccl_on_the_gpus_gives_the_nccl_ring_models_bits():
    import torch

    from collspec.conformance.conform import conform

    world = min(4, torch.cuda.device_count())
    result = conform("nccl", world, collectives=["allreduce", "reduce_scatter", "reduce"], dtypes=["float16", "float32"],
                     ops=["sum"], sizes=[100, 4096], expect="bits:nccl-ring")
    assert [v.message for v in result.report().violations if v.is_error] == []


# -- bad input on the command line: exit 2, naming the option -----------------------------------


def test_cli_bad_options_exit_2_naming_the_option():
    import subprocess
    import sys

    cases = [
        (["-a", "nccl-ring", "-n", "4", "--option", "channels=0"], "--option 'channels=0': channels must be at least 1 for 4 ranks"),
        (["-a", "nccl-ring", "-n", "4", "--option", "rings=0,1,1,3"],
         "nccl-ring: option rings: ring 0 [0, 1, 1, 3] is not a permutation of the ranks 0..3"),
        (["-a", "nccl-ring", "-n", "65536"], "nccl-ring: --ranks 65536 is beyond what is enumerated here (206155284480 (step, rank, slot) "
                                             "points, at most 2147483648); use fewer ranks or smaller options"),
        (["-a", "nccl-pat", "-c", "reduce_scatter", "-n", "65536"],
         "nccl-pat: ranks 65536 with count 2 and chunk 16384 is beyond what is enumerated (8589803520 transfers, 1073741824 slots a step; "
         "at most 33554432 and 16777216): use fewer ranks, a smaller count or chunk"),
    ]
    for args, message in cases:
        done = subprocess.run([sys.executable, "-m", "collspec", "check", *args], capture_output=True, text=True)
        assert (done.returncode, done.stderr.strip()) == (2, f"collspec check: error: {message}"), args


def test_pat_past_1024_ranks_refines_against_its_proved_terms():
    # the aggregate's 'used' test once multiplied slot x scale and overflowed the proofs' bit-vectors at 1500 ranks
    schedule = generate("nccl-pat", "allgather", 1500, chunk=1, count=1)
    assert schedule.transfers == 1500 * 1499


# -- NCCL 2.30's ring index, channel split and chunk, as its code states them -------------------

from collspec.models.generators import nccl_host  # noqa: E402
from collspec.models.generators.nccl_ring import channel_table  # noqa: E402


def _messages(schedule):
    """Every step's transfers as a sorted list: (src, dst, cell, op)."""
    return [sorted(zip(s.src.tolist(), s.dst.tolist(), s.src_chunk.tolist(), s.op.tolist())) for s in schedule.steps]


@pytest.mark.parametrize("n", range(3, 9))
def test_a_rotated_ring_list_is_the_same_ring(n):
    # setupChannel (src/init.cc, NCCL 2.30) measures a rank's ring index from rank 0:
    # the lists 1,2,...,0 and 0,1,...,N-1 are one ring, and NCCL runs them alike
    for collective in RING_COLLECTIVES:
        base = generate("nccl-ring", collective, n, channels=1, chunk=1, count=2 * n + 1)
        for shift in range(1, n):
            ring = list(range(shift, n)) + list(range(shift))
            rotated = generate("nccl-ring", collective, n, channels=1, chunk=1, count=2 * n + 1, rings=[ring])
            assert _messages(rotated) == _messages(base), (collective, ring)


def test_ring_index_counts_from_rank_0_not_from_the_list_start():
    # rings=1,2,0 at N=3: rank 0 has ring index 0 and first sends chunk 2 (i - 1 mod 3)
    schedule = generate("nccl-ring", "allreduce", 3, channels=1, chunk=1, count=3, rings=[[1, 2, 0]])
    assert _sent(schedule, 0) == {0: [2], 1: [0], 2: [1]}


#: (collective, N, count, element bytes, protocol, channels) -> elements per channel, from
#: scheduleCollTasksToPlan (src/enqueue.cc, NCCL 2.30.7): cells of 32 KiB of traffic over
#: the traffic per byte (2 all-reduce, N reduce-scatter/all-gather, 1 else; x4 for LL),
#: about trafficBytes / channels per channel in whole cells, the remainder off the last part
SPLITS = [
    (("allreduce", 4, 10_000, 4, "simple", 4), [4096, 4096, 1808]),  # cells of 16 KiB: 3 cells
    (("allreduce", 4, 1000, 4, "simple", 4), [1000]),  # under one cell: one channel
    (("allreduce", 8, 4096, 4, "simple", 2), [4096]),  # exactly one cell
    (("allreduce", 8, 4097, 4, "simple", 2), [4096, 1]),
    (("allreduce", 2, 1 << 20, 2, "simple", 4), [262144] * 4),  # 2 MiB: 128 cells of 8192, 32 each
    # LL: 4 KiB cells, and ncclPrepareTasks multiplies an LL task's trafficBytes by 4, so a
    # channel's share of traffic is 4 x as large and the cells spread as with Simple:
    # 98 cells, ceil(3,200,000 / 4 / 32768) = 25 a channel: 25, 25, 25 and 23 (less 352 elements)
    (("allreduce", 2, 100_000, 4, "ll", 4), [25600, 25600, 25600, 23200]),
    (("allreduce", 4, 10_000, 4, "ll", 4), [3072, 3072, 3072, 784]),  # 10 cells of 1024, 3 a channel
    (("allgather", 4, 3000, 4, "ll", 4), [1024, 1024, 952]),  # as bytes: 2 KiB cells (32 KiB / (4 ranks x 4)), 2 a channel
    (("broadcast", 2, 40_000, 2, "ll", 3), [16384, 16384, 7232]),  # 8 KiB cells, 4 a channel
    (("allreduce", 2, 100_000, 4, "ll128", 4), [28672, 28672, 28672, 13984]),
    (("reduce_scatter", 16, 1100, 4, "simple", 4), [512, 512, 76]),  # 2 KiB cells (32 KiB / 16 ranks)
    (("reduce_scatter", 8, 100_000, 2, "ll", 4), [25088, 25088, 25088, 24736]),  # 1 KiB cells, 49 a channel
    (("allgather", 4, 1025, 8, "simple", 2), [1024, 1]),  # moved as bytes: 8 KiB cells
    (("allgather", 8, 100_000, 4, "simple", 4), [25600, 25600, 25600, 23200]),
    (("broadcast", 4, 3 * 8192 + 5, 4, "simple", 8), [8192, 8192, 8192, 5]),  # 32 KiB cells, 1 byte of traffic per byte
    (("reduce", 4, 20_000, 8, "simple", 2), [12288, 7712]),  # 3 cells of 4096 a channel
    (("allreduce", 4, 100_000, 4, "simple", 1), [100_000]),  # one channel takes everything
]


@pytest.mark.parametrize("args, parts", SPLITS)
def test_channel_split_is_nccls_host_split(args, parts):
    assert nccl_host.channel_split(*args) == parts
    collective, n, count, size, protocol, channels = args
    dtype = {1: "int8", 2: "float16", 4: "float32", 8: "float64"}[size]
    assert [c["count"] for c in channel_table(collective, n, channels=channels, count=count, dtype=dtype, protocol=protocol)] == parts


def test_split_of_10000_float32_on_4_channels_is_what_the_schedule_sends():
    schedule = generate("nccl-ring", "allreduce", 4, channels=4, count=10_000, chunk=64)
    # channel c starts at 4096 c; at step 0 the rank with ring index 1 sends chunk 0 of every channel's first loop
    assert _sent(schedule, 0)[1] == list(range(64)) + list(range(4096, 4096 + 64)) + list(range(8192, 8192 + 64))
    assert check(schedule).ok


#: the ring's chunk (elements) per protocol and element size: calcCollChunking
#: (src/enqueue.cc) on the default buffers of computeBuffSizes (src/init.cc)
CHUNKS = [
    (("allreduce", 4, "simple"), 524288),  # 4 MiB / NCCL_STEPS x ALLREDUCE_CHUNKSTEPS (4) = 2 MiB
    (("allreduce", 2, "simple"), 1048576),
    (("broadcast", 1, "simple"), 524288),  # BROADCAST_CHUNKSTEPS 1: 512 KiB
    (("reduce", 8, "simple"), 65536),
    (("allreduce", 4, "ll"), 8192),  # 512 KiB / 8, halved: 32 KiB
    (("allreduce", 4, "ll128"), 144000),  # 4,800 KiB / 8 x 15/16 = 576,000 bytes
    (("allgather", 1, "ll128"), 576000),
]


@pytest.mark.parametrize("args, chunk", CHUNKS)
def test_ring_chunk_is_nccls(args, chunk):
    assert nccl_host.chunk_elements(*args) == chunk


def test_dtype_and_protocol_change_the_schedule():
    # 2,000 float16 at 4 ranks fit one loop on one channel; as float64 with LL they span two channels
    small = generate("nccl-ring", "allreduce", 4, channels=2, count=2000, dtype="float16")
    large = generate("nccl-ring", "allreduce", 4, channels=2, count=2000, dtype="float64", protocol="ll")
    assert channel_table("allreduce", 4, channels=2, count=2000, dtype="float16") == [{"ring": [0, 1, 2, 3], "count": 2000}]
    assert [c["count"] for c in channel_table("allreduce", 4, channels=2, count=2000, dtype="float64", protocol="ll")] == [1024, 976]
    assert _messages(small) != _messages(large)
    # the last loop's chunk is rounded to 16 bytes: 8 float16, 2 float64
    assert _sent(generate("nccl-ring", "allreduce", 4, channels=1, count=10, dtype="float16"), 0)[1] == list(range(8))
    assert _sent(generate("nccl-ring", "allreduce", 4, channels=1, count=10, dtype="float64"), 0)[1] == [0, 1, 2, 3]


def test_bad_dtype_and_protocol_name_the_option():
    with pytest.raises(ScheduleError, match="nccl-ring: option dtype must be one of int8, .*, got 'float33'"):
        generate("nccl-ring", "allreduce", 4, dtype="float33")
    with pytest.raises(ScheduleError, match="nccl-ring: option protocol must be one of simple, ll, ll128, got 'tcp'"):
        generate("nccl-ring", "allreduce", 4, protocol="tcp")


# -- export --format json ---------------------------------------------------------------------


def _cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "collspec", *args], capture_output=True, text=True)


def test_export_json_writes_nccls_channels_and_reads_back(tmp_path):
    import json

    path = tmp_path / "ring.json"
    done = _cli("export", "-a", "nccl-ring", "-n", "4", "--format", "json", "--option", "count=10000", "--option", "channels=4",
                "--option", "rings=1,2,3,0", "-o", str(path))
    assert done.returncode == 0, done.stderr
    data = json.loads(path.read_text())
    assert data["channels"] == [{"ring": [1, 2, 3, 0], "count": 4096}, {"ring": [1, 2, 3, 0], "count": 4096}, {"ring": [1, 2, 3, 0], "count": 1808}]
    assert data["chunks"] == 10000 and len(data["steps"]) == 6
    assert _cli("check", str(path)).returncode == 0
    # every built-in algorithm's schedule reads back through check
    for algorithm, collective in (("ring", "allreduce"), ("nccl-tree", "allreduce"), ("nccl-pat", "allgather"), ("hub", "broadcast")):
        out = tmp_path / f"{algorithm}.json"
        assert _cli("export", "-a", algorithm, "-c", collective, "-n", "5", "--format", "json", "-o", str(out)).returncode == 0
        assert _cli("check", str(out)).returncode == 0, algorithm
    tree = json.loads((tmp_path / "nccl-tree.json").read_text())
    assert tree["channels"] == [{"tree": 0, "count": 12}]  # 12 float32: one channel in NCCL 2.30
    path = tmp_path / "tree.json"
    done = _cli("export", "-a", "nccl-tree", "-n", "4", "--format", "json", "--option", "count=10000", "--option", "channels=4",
                "--option", "chunk=1000", "-o", str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(path.read_text())["channels"] == [{"tree": 0, "count": 4096}, {"tree": 0, "count": 4096}, {"tree": 1, "count": 1808}]
    assert _cli("check", str(path)).returncode == 0


def test_export_options_are_checked_and_bad_channels_are_exit_2(tmp_path):
    done = _cli("export", "-a", "nccl-ring", "-n", "4", "--format", "json", "--option", "protocol=tcp")
    assert (done.returncode, done.stderr.strip()) == (2, "collspec export: error: nccl-ring: option protocol must be one of simple, ll, ll128, got 'tcp'")
    bad = tmp_path / "bad.json"
    bad.write_text('{"collective": "allreduce", "ranks": 2, "chunks": 1, "channels": [{"ring": [0, 0], "count": 1}], '
                   '"steps": [[{"src": 0, "dst": 1, "chunk": 0, "op": "reduce"}]]}')
    done = _cli("check", str(bad))
    assert done.returncode == 2 and "channel 0: field 'ring' must be a permutation of the ranks 0..1" in done.stderr
