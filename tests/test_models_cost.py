"""The cost model reproduces the reference texts' tables from the schedules."""

from __future__ import annotations

import pytest

from collspec.models.cost import cost
from collspec.models.generators import generate


@pytest.mark.parametrize("n, direct_p, ring_p", [(4, 3, 1.5), (8, 7, 1.75), (32, 31, 1.9375)])
def test_per_card_traffic_direct_versus_ring(n, direct_p, ring_p):
    P = 60e9
    direct = cost(generate("direct", "allreduce", n), P)
    ring = cost(generate("ring", "allreduce", n), P)
    assert direct.sent == direct_p * P  # (N-1) P: grows with N
    assert ring.sent == ring_p * P  # 2(N-1)/N P: below 2P for every N
    assert ring.sent <= 2 * P == 120e9
    assert ring.sent == ring.lower_bound_bytes


def test_the_hub_handles_2n_units_for_n_workers():
    for workers, units in ((4, 8), (100, 200)):
        c = cost(generate("hub", "allreduce", workers + 1, root=workers), 1)
        assert c.busiest_rank == workers and c.busiest_rank_in_out == units


@pytest.mark.parametrize("n, per_worker", [(4, 1.5), (100, 1.98)])
def test_ring_units_per_worker(n, per_worker):
    assert cost(generate("ring", "allreduce", n), 1).sent == pytest.approx(per_worker, abs=1e-12)


def test_alpha_beta_time_counts_steps_and_the_busiest_port():
    ring = cost(generate("ring", "allreduce", 4), 4e6, alpha=1e-5, bandwidth=1e9)
    assert ring.steps == 6
    assert ring.seconds == pytest.approx(6 * (1e-5 + 1e6 / 1e9))
    direct = cost(generate("direct", "allreduce", 4), 4e6, alpha=1e-5, bandwidth=1e9)
    assert direct.seconds == pytest.approx(1e-5 + 3 * 4e6 / 1e9)
    assert ring.lower_bound_seconds == pytest.approx(1e-5 + 1.5 * 4e6 / 1e9)
