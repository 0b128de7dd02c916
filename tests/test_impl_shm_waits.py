"""shm's counters: a waiter never sleeps on a value that is already the one
it waits for, every post wakes its sleepers, and a long two-shot run with
fewer cores than ranks finishes without one wait running into its timeout.

The first two are the two lost wake-ups behind the intermittent hang of
``test_impl_gloo`` (a waiter that re-read the counter after checking it,
saw the awaited value and slept on it until the next post or its timeout;
and GATHERED posts that woke nobody)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from collspec.impl import futex, shm

from impl_harness import run_ranks, values

CALLS = 100  # of 64 chunks each; the old lost wake-up showed within a few hundred chunks


class ScriptedWords:
    """Reads of one word, as a sequence of values (the last one repeats)."""

    def __init__(self, script):
        self.script, self.reads = list(script), 0

    def __getitem__(self, index):
        value = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        return value


def _counters(spin: float = 0.0) -> shm.Counters:
    words = np.zeros(3 * 2 * shm.FLAG_BYTES // 4, dtype=np.int32)
    return shm.Counters(words, rank=0, world_size=2, timeout=5.0, spin=spin)


@pytest.mark.parametrize("spin", [0.0, 1e-4])
def test_a_waiter_does_not_sleep_on_the_value_it_waits_for(monkeypatch, spin):
    """The peer's counter moves from 4 to 5 between the waiter's first look
    and its next: the waiter returns without sleeping."""
    sleeps = []
    monkeypatch.setattr(futex, "wait", lambda address, seen, timeout: sleeps.append(seen))
    counters = _counters(spin)
    counters.words = ScriptedWords([4, 5])
    counters.wait(shm.STAGED, 5)
    assert sleeps == []


def test_a_waiter_sleeps_only_on_values_short_of_the_awaited_one(monkeypatch):
    sleeps = []
    monkeypatch.setattr(futex, "wait", lambda address, seen, timeout: sleeps.append(seen))
    counters = _counters()
    counters.words = ScriptedWords([3, 3, 4, 4, 5])
    counters.wait(shm.REDUCED, 5)
    assert sleeps and all(seen in (3, 4) for seen in sleeps)


def test_a_waiter_that_is_never_satisfied_names_the_peer_and_the_counter(monkeypatch):
    monkeypatch.setattr(futex, "wait", lambda address, seen, timeout: None)
    counters = _counters()
    counters.timeout = 0.01
    with pytest.raises(TimeoutError, match="rank 0 waited 0.01 s for rank 1's GATHERED to reach 2; did a rank die"):
        counters.wait(shm.GATHERED, 2)


@pytest.mark.parametrize("counter", range(3), ids=shm.COUNTER_NAMES)
def test_every_post_wakes_the_sleepers_on_its_word(monkeypatch, counter):
    woken = []
    monkeypatch.setattr(futex, "wake", lambda address: woken.append(address))
    counters = _counters()
    counters.post(counter, 7)
    index = counter * 2 * shm.FLAG_BYTES // 4
    assert woken == [counters.address + 4 * index] and counters.words[index] == 7


def _two_shot_under_contention(rank: int, world: int, compiled: bool) -> tuple[int, list[str]]:
    """Many small chunks, back to back, no spinning (sleep at once, as with
    fewer cores than ranks); returns how many waits no post woke (they ran
    into their timeout) and the outputs' digests."""
    expired = []
    sleep = futex.wait
    futex.wait = lambda address, seen, timeout: sleep(address, seen, timeout) or expired.append(seen) or False
    compiled_before = shm._shmkernel.stats()["expired"] if compiled else 0
    backend = shm.SharedMemory(rank, world, mode="two-shot", capacity=4096, spin=0.0, timeout=10.0, compiled=compiled)
    tensors = [torch.arange(1 << 16, dtype=torch.float32) * (rank + 1) + call for call in range(CALLS)]
    for x in tensors:  # back to back: the ranks stay close, where the races are
        backend.all_reduce(x)
    backend.close()
    compiled_expired = shm._shmkernel.stats()["expired"] - compiled_before if compiled else 0
    return len(expired) + compiled_expired, [hashlib.sha256(x.numpy().tobytes()).hexdigest() for x in tensors]


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.skipif(shm._shmkernel is None, reason="the compiled shm kernel is not built"))], ids=["numpy", "compiled"])
def test_two_shot_with_many_chunks_and_no_spinning_finishes_on_every_rank(compiled):
    results = values(run_ranks(4, _two_shot_under_contention, compiled, timeout=120))
    assert [expired for expired, _ in results] == [0] * 4  # every sleeper was woken by a post
    for call in range(CALLS):
        want = hashlib.sha256((np.arange(1 << 16, dtype=np.float32) * 10 + 4 * call).tobytes()).hexdigest()  # sum of (r + 1) * i + call, exact in float32
        assert [digests[call] for _, digests in results] == [want] * 4


def _choose_path(rank: int, world: int) -> list:
    """What SharedMemory does about the compiled path when the module is
    missing (as after an install without a C compiler) and when asked for
    things that cannot go together."""
    out = []
    for built, options in ((True, {}), (True, {"compiled": False}), (False, {}), (False, {"compiled": True}), (True, {"compiled": True, "barrier": "dist"})):
        saved = shm._shmkernel
        shm._shmkernel = saved if built else None
        try:
            backend = shm.SharedMemory(rank, world, **options)
            x = torch.arange(5, dtype=torch.float32)
            backend.all_reduce(x)
            out.append((backend.compiled, type(backend._sync).__name__, x.tolist()))
            backend.close()
        except (RuntimeError, ValueError) as error:
            out.append(str(error))
        finally:
            shm._shmkernel = saved
    return out


@pytest.mark.skipif(shm._shmkernel is None, reason="the compiled shm kernel is not built")
def test_the_path_is_compiled_when_built_numpy_otherwise_and_contradictions_are_refused():
    got = values(run_ranks(1, _choose_path, timeout=120))[0]
    assert got == [
        (True, "CompiledCounters", [0.0, 1.0, 2.0, 3.0, 4.0]),
        (False, "Counters", [0.0, 1.0, 2.0, 3.0, 4.0]),
        (False, "Counters", [0.0, 1.0, 2.0, 3.0, 4.0]),
        "shm: compiled=True but collspec.impl._shmkernel is not built; reinstall with a C compiler (make install)",
        "shm: compiled=True needs barrier='flags' (the compiled path waits on the counters)",
    ]


def _misuse(rank: int, world: int) -> list:
    """Ranks that disagree on settings or on their tensors' layout, and
    calls that cannot work."""
    out = []
    try:  # rank 1 asks for the numpy path, rank 0 does not say
        shm.SharedMemory(rank, world, **({"compiled": False} if rank == 1 else {}))
    except ValueError as error:
        out.append(str(error))
    backend = shm.SharedMemory(rank, world)
    x = torch.arange(10_000, dtype=torch.float32) * (rank + 1)
    if rank == 1:  # the same values, not contiguous: the path and the chunks must not change
        wide = torch.zeros((10_000, 2))
        wide[:, 0] = x
        x = wide[:, 0]
    backend.all_reduce(x)
    out.append(x.tolist() == (torch.arange(10_000, dtype=torch.float32) * 3).tolist())
    for call in (lambda: backend.all_reduce(torch.empty(10, device="meta")), lambda: (backend.close(), backend.all_reduce(torch.ones(3)))):
        try:
            call()
        except (TypeError, RuntimeError) as error:
            out.append(str(error))
    return out


def test_disagreeing_settings_are_refused_and_mixed_layouts_agree():
    for got in values(run_ranks(2, _misuse, timeout=120)):
        assert got == [
            "shm: the ranks disagree on compiled (rank 0: None, rank 1: False); pass the same settings on every rank",
            True,
            "shm: CPU tensors only, not meta",
            "shm: this instance is closed; create a new one",
        ]
