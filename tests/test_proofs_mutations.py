"""No proof passes vacuously: swap a deliberately wrong function into the
code the ring is generated from, and the proofs about that code must fail
with a counterexample. The counterexample must then show the bug concretely
too: the generator, using the same wrong function, builds ring schedules
that the checker flags at the counterexample's N (an error, or for a
correct but wasteful schedule the not-bandwidth-optimal warning)."""

from __future__ import annotations

import dataclasses

import pytest

from collspec.models import indexing as ix
from collspec.models.checker import check
from collspec.models.generators import generate
from collspec.models.generators import ring as ring_gen
from collspec.models.schedule import REDUCE
from collspec.proofs import ring
from collspec.proofs.solver import FAILED


def off_by_one_send(owner, r, s, n):
    """Sends the all-gather's chunk in the reduce-scatter: one chunk too far."""
    return (owner(r, n) + n - s) % n


def double_step_send(owner, r, s, n):
    """Moves two chunks per hop: for even N it comes back to a chunk after N/2 hops."""
    return (owner(r, n) + n - 1 - 2 * s) % n


def skip_a_rank(r, n):
    """Wrong neighbour: sends to the rank after next."""
    return (r + 2) % n


def adds_into_next_chunk(owner, r, s, n):
    """The receiver adds into the chunk after the one that was sent."""
    chunk = ix.rs_send(owner, r, s, n)
    return ix.ring_next(r, n), chunk, (chunk + 1) % n


def one_hop_too_many(n):
    return n


#: (label, what to replace, replacement, proofs that must fail)
MUTATIONS = [
    ("off by one in the send chunk", (ix, "rs_send"), off_by_one_send, {"forwarding", "contributors"}),
    ("two chunks per hop", (ix, "rs_send"), double_step_send, {"link-once", "forwarding", "contributors"}),
    ("wrong neighbour", (ix, "ring_next"), skip_a_rank, {"links-busy", "forwarding", "contributors"}),
    ("all-gather reducing instead of copying", (ring_gen, "ALL_GATHER_OP"), REDUCE, {"all-gather", "identical-bits"}),
    ("adds into another chunk index", (ix, "rs_transfer"), adds_into_next_chunk, {"same-index"}),
    ("one hop too many", (ix, "ring_hops"), one_hop_too_many, {"links-busy", "contributors", "traffic"}),
]


@pytest.mark.parametrize("label, target, replacement, must_fail", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_wrong_function_makes_the_proofs_fail_with_a_counterexample(monkeypatch, label, target, replacement, must_fail):
    module, name = target
    monkeypatch.setattr(module, name, replacement)
    for proof in sorted(must_fail):
        outcome = ring.prove("ring", proof)
        assert outcome.status == FAILED, f"{label}: {proof} should fail, got {outcome.status}"
        example = outcome.counterexample
        assert example, f"{label}: {proof} failed without a counterexample: {outcome.message}"
        assert "fails for " in outcome.message
        ranks = [max(int(example["N"]), 2)] if "N" in example else [2, 3, 4]
        for n in ranks:
            findings = [v.kind for c in ("allreduce", "reduce_scatter", "allgather") for v in check(generate("ring", c, n)).violations]
            assert findings, f"{label}: the checker finds nothing wrong with the generated rings at N={n}"


def test_the_unmutated_code_still_proves_after_the_mutations_are_undone():
    assert all(ring.prove("ring", name).ok for name in ("forwarding", "same-index"))


def test_mutations_can_also_be_passed_as_parameters():
    """The proofs take the code as a value, so a variant can be checked
    without touching models/: a ring that owns chunk 2r is not a ring."""
    code = ring.RingCode.of("ring")
    doubled = dataclasses.replace(code, owner=lambda r, n: (2 * r) % n)
    outcome = ring.prove("ring", "contributors", doubled)
    assert outcome.status == FAILED and "N" in outcome.counterexample
    not_onto = ring.run_queries([q for q in ring.contributors(doubled) if callable(q) and not isinstance(q, ring.Query)])
    assert not_onto.status == FAILED and not_onto.counterexample["N"] % 2 == 0  # 2r mod N misses odd chunks


def test_reducing_all_gather_program_passed_as_parameter_fails_identical_bits_with_values():
    base = ring_gen.allreduce_program("ring-seed")

    def every_hop_reduces(n, s, r, j):
        return dataclasses.replace(base.transfer(n, s, r, j), op=REDUCE)

    code = dataclasses.replace(ring.RingCode.of("ring-seed"), program=dataclasses.replace(base, transfer=every_hop_reduces))
    outcome = ring.prove("ring-seed", "identical-bits", code)
    assert outcome.status == FAILED
    assert {"before", "incoming", "N", "s"} <= set(outcome.counterexample)  # the values and the hop
