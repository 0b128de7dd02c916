"""impl/_shmkernel.c, the compiled hot path of shm, in one process: threads
play the ranks over a segment laid out as shm.SharedMemory lays it out (the
module releases the GIL while it waits). Every type, op and mode gives the
bits of numpy's rank-order fold, signed zeros and infinities included (a
NaN's payload aside), identical on every rank; a missing peer
times out with shm's message; a post wakes a sleeper that announced itself."""

from __future__ import annotations

import signal
import threading

import numpy as np
import pytest

from collspec.impl import shm

kernel = pytest.importorskip("collspec.impl._shmkernel", reason="the compiled shm kernel is not built (no C compiler at install)")

DEPTH = 3
UFUNCS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


class Segment:
    """A process-local segment with shm's layout, for ``world`` thread-ranks."""

    def __init__(self, world: int, capacity: int, timeout: float = 30.0, spin: float = 0.0):
        header = 3 * world * shm.FLAG_BYTES
        self.memory = np.zeros(header + world * DEPTH * capacity + DEPTH * capacity, dtype=np.uint8)
        staging_at, result_at = header, header + world * DEPTH * capacity
        self.layouts = [(self.memory.ctypes.data, r, world, DEPTH, capacity, staging_at, result_at, int(spin * 1e9), shm.YIELDS, int(timeout * 1e9)) for r in range(world)]
        self.seq = [0] * world

    def all_reduce(self, arrays: list[np.ndarray], op: str, mode: int) -> None:
        """Every rank's in-place all-reduce, each in a thread of its own."""
        type_index, op_index = kernel.TYPES.index(arrays[0].dtype.name), kernel.OPS.index(op)
        errors = []

        def rank(r):
            try:
                self.seq[r] = kernel.all_reduce(self.layouts[r], self.seq[r], arrays[r].ctypes.data, arrays[r].size, type_index, op_index, mode)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(arrays))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal bits, but where numpy's result is a NaN any NaN will do: which
    NaN an operation on two NaNs returns is the compiler's choice of operand
    order (IEEE 754 leaves it open), in numpy as in the kernel."""
    if got.dtype.kind != "f":
        return got.tobytes() == want.tobytes()
    nan = np.isnan(want)
    return bool(np.array_equal(np.isnan(got), nan)) and got[~nan].tobytes() == want[~nan].tobytes()


def numpy_fold(xs: list[np.ndarray], op: str) -> np.ndarray:
    acc = xs[0].copy()
    for x in xs[1:]:
        UFUNCS[op](acc, x, out=acc)
    return acc


def inputs(dtype: str, world: int, count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        specials = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0], dtype=dtype)
        xs = [(rng.standard_normal(count) * 100).astype(dtype) for _ in range(world)]
        for x in xs:  # signed zeros, infinities and NaNs of both signs in some places
            at = rng.integers(0, max(count, 1), size=min(count, 8))
            x[at] = rng.choice(specials, size=at.size)
        return xs
    info = np.iinfo(dtype)
    return [rng.integers(info.min, info.max, size=count, endpoint=True, dtype=np.int64).astype(dtype) for _ in range(world)]


@pytest.mark.parametrize("mode", [0, 1], ids=["one-shot", "two-shot"])
@pytest.mark.parametrize("op", list(UFUNCS))
@pytest.mark.parametrize("dtype", list(kernel.TYPES))
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf and friends in numpy's fold
def test_every_type_and_op_gives_numpys_rank_order_bits(dtype, op, mode):
    for world in (1, 2, 3, 4):
        segment = Segment(world, capacity=max(256, 16 * world))  # many chunks per call
        for count in (0, 1, 7, 1000, 2500):  # 2500: folds cross blocks of 1024
            xs = inputs(dtype, world, count, seed=count * 10 + world)
            want = numpy_fold(xs, op)
            outs = [x.copy() for x in xs]
            segment.all_reduce(outs, op, mode)
            assert len({o.tobytes() for o in outs}) <= 1, (dtype, op, mode, world, count)  # the ranks agree bit for bit
            assert same_bits(outs[0], want), (dtype, op, mode, world, count)


SPECIALS = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 1e-45, 3.0e38]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("mode", [0, 1], ids=["one-shot", "two-shot"])
@pytest.mark.parametrize("op", list(UFUNCS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_special_values_meet_in_every_order(dtype, op, mode):
    """Every ordered triple of special values (signed zeros, infinities,
    NaNs, the smallest subnormal, near-overflow) at one index of 3 ranks."""
    grid = np.array(np.meshgrid(SPECIALS, SPECIALS, SPECIALS, indexing="ij")).reshape(3, -1).astype(dtype)
    xs = [grid[r].copy() for r in range(3)]
    outs = [x.copy() for x in xs]
    Segment(3, capacity=256).all_reduce(outs, op, mode)
    assert len({o.tobytes() for o in outs}) == 1
    assert same_bits(outs[0], numpy_fold(xs, op))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the special values in numpy's fold
def test_calls_of_both_modes_and_types_share_one_chunk_sequence():
    segment = Segment(3, capacity=128)
    for mode, dtype, count in [(0, "float32", 100), (1, "int64", 50), (1, "float64", 3), (0, "uint8", 1000), (1, "float32", 999)]:
        xs = inputs(dtype, 3, count, seed=count)
        outs = [x.copy() for x in xs]
        segment.all_reduce(outs, "sum", mode)
        assert all(same_bits(o, numpy_fold(xs, "sum")) for o in outs)
    assert len(set(segment.seq)) == 1 and segment.seq[0] > 5


def test_two_shot_cuts_a_message_of_one_buffer_into_pipeline_chunks():
    """300 000 float32 (1.2 MB) fit in one 2 MiB buffer but flow as 4
    chunks of 75 000; 10 000 elements (40 KB) stay one chunk (64 KiB least)."""
    segment = Segment(3, capacity=2 << 20)
    for count, chunks in ((300_000, 4), (10_000, 1)):
        before = segment.seq[0]
        xs = inputs("float32", 3, count, seed=count)
        outs = [x.copy() for x in xs]
        segment.all_reduce(outs, "sum", 1)
        assert segment.seq == [before + chunks] * 3
        assert all(same_bits(o, numpy_fold(xs, "sum")) for o in outs)


def test_a_missing_peer_times_out_naming_it_and_the_counter():
    segment = Segment(2, capacity=256, timeout=0.05)
    x = np.ones(10, dtype=np.float32)
    with pytest.raises(TimeoutError, match=r"^shm: rank 0 waited 0.05 s for rank 1's STAGED to reach 1; did a rank die\?$"):
        kernel.all_reduce(segment.layouts[0], 0, x.ctypes.data, x.size, 0, 0, 0)


def test_bad_arguments_are_refused():
    segment = Segment(2, capacity=256)
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="bad arguments"):
        kernel.all_reduce(segment.layouts[0], 0, x.ctypes.data, x.size, 99, 0, 0)
    with pytest.raises(TypeError, match="10-tuple"):
        kernel.all_reduce(segment.layouts[0][:3], 0, x.ctypes.data, x.size, 0, 0, 0)


def test_wait_returns_at_once_on_a_reached_value_and_false_on_a_timeout():
    words = np.zeros(32, dtype=np.int32)
    words[0] = 5
    assert kernel.wait(words.ctypes.data, 5, 0, 0, 1_000_000_000)
    assert kernel.wait(words.ctypes.data, 4, 0, 0, 1_000_000_000)
    assert kernel.wait(words.ctypes.data, 5 - 2**32, 0, 0, 1_000_000_000)  # modulo 2**32
    before = kernel.stats()["expired"]
    assert not kernel.wait(words.ctypes.data, 6, 1000, 3, 10_000_000)
    assert kernel.stats()["expired"] == before + 1
    assert words[1] == 0  # the sleeper count is back to zero


def test_a_post_wakes_a_sleeper_that_announced_itself():
    words = np.zeros(32, dtype=np.int32)
    before = kernel.stats()
    done = []
    sleeper = threading.Thread(target=lambda: done.append(kernel.wait(words.ctypes.data, 1, 0, 0, 30_000_000_000)))
    sleeper.start()
    while words[1] == 0:  # the sleeper has announced itself
        pass
    kernel.post(words.ctypes.data, 1)
    sleeper.join(60)
    after = kernel.stats()
    assert done == [True] and words[0] == 1 and words[1] == 0
    assert after["sleeps"] >= before["sleeps"] + 1 and after["expired"] == before["expired"]  # woken, not timed out


class Interrupted(Exception):
    pass


def test_a_signal_handler_that_raises_interrupts_a_sleeping_wait():
    """Ctrl-C (here SIGALRM with a raising handler) ends a compiled wait at
    once, not after its timeout: the sleep ends without running out."""
    words = np.zeros(32, dtype=np.int32)

    def handler(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, handler)
    before = kernel.stats()["expired"]
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(Interrupted):
            kernel.wait(words.ctypes.data, 1, 0, 0, 30_000_000_000)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert kernel.stats()["expired"] == before and words[1] == 0  # woken by the signal; the sleeper count is back to zero


def test_out_of_range_layouts_are_refused():
    segment = Segment(2, capacity=256)
    x = np.ones(4, dtype=np.float32)
    for position, value in ((1, 2), (2, 0), (3, 2), (8, -1)):  # rank >= world, no ranks, depth < 3, negative yields
        layout = list(segment.layouts[0])
        layout[position] = value
        with pytest.raises(ValueError, match="bad arguments"):
            kernel.all_reduce(tuple(layout), 0, x.ctypes.data, x.size, 0, 0, 0)
