"""The trace check on traces built by hand: a faithful one passes, and each
kind of deviation is reported with its kind and location."""

from __future__ import annotations

import dataclasses

import pytest

from collspec.impl.cells import cell_bounds
from collspec.impl.trace import Event, RankTrace, check_traces
from collspec.models.generators import generate
from collspec.models.schedule import COPY

ITEM = 4  # bytes per element (float32)


def faithful(schedule, count: int) -> list[RankTrace]:
    """What a correct executor records: for each transfer a send on its
    source rank (slot = its position among the step's transfers on that
    link) and a write on its target rank (order = position among the
    step's writes there)."""
    bounds = cell_bounds(count, schedule.chunks)
    traces = [RankTrace(schedule, r, bounds, ITEM) for r in range(schedule.ranks)]
    for h, step in enumerate(schedule.steps):
        slots: dict[tuple[int, int], int] = {}
        order: dict[int, int] = {}
        for i in range(len(step)):
            s, d, sc, dc, op = (int(a[i]) for a in (step.src, step.dst, step.src_chunk, step.dst_chunk, step.op))
            size = int(bounds[dc + 1] - bounds[dc]) * ITEM
            k = order[d] = order.get(d, -1) + 1
            if s == d:
                traces[d].events.append(Event("local", h, s, d, sc, dc, op, int(bounds[dc]), int(bounds[dc + 1]), size, -1, k))
                continue
            slot = slots[(s, d)] = slots.get((s, d), -1) + 1
            traces[s].events.append(Event("send", h, s, d, sc, -1, -1, int(bounds[sc]), int(bounds[sc + 1]), size, slot))
            traces[d].events.append(Event("recv", h, s, d, -1, dc, op, int(bounds[dc]), int(bounds[dc + 1]), size, slot, k))
    return traces


def edit(traces: list[RankTrace], rank: int, match, **changes) -> None:
    """Change the first event of ``rank`` for which ``match(event)`` holds."""
    events = traces[rank].events
    i = next(k for k, e in enumerate(events) if match(e))
    events[i] = dataclasses.replace(events[i], **changes)


def errors(result) -> list[tuple]:
    return [(v.kind, v.step, v.src, v.dst) for v in result.violations if v.is_error]


@pytest.mark.parametrize("algorithm, collective", [("ring", "allreduce"), ("halving-doubling", "allreduce"), ("direct", "alltoall"), ("binary-tree", "reduce"), ("recursive-doubling", "allgather")])
@pytest.mark.parametrize("ranks", [1, 3, 4])
def test_a_faithful_trace_passes_and_is_the_schedule(algorithm, collective, ranks):
    schedule = generate(algorithm, collective, ranks)
    result = check_traces(faithful(schedule, 12 * ranks))
    assert result.ok, [str(v) for v in result.violations]
    for planned, traced in zip(schedule.steps, result.traced.steps):
        assert sorted(zip(planned.src, planned.dst, planned.src_chunk, planned.dst_chunk)) == sorted(zip(traced.src, traced.dst, traced.src_chunk, traced.dst_chunk))


def test_a_wrong_chunk_on_one_hop_is_named_and_is_a_wrong_column():
    ring = generate("ring", "allreduce", 4)
    traces = faithful(ring, 40)
    # rank 3 sends its chunk 0 where the schedule says chunk 1 (step 1)
    edit(traces, 3, lambda e: e.kind == "send" and e.step == 1, src_chunk=0, start=0, stop=10)
    result = check_traces(traces)
    first = next(v for v in result.violations if v.kind == "postcondition")
    assert (first.step, first.src, first.dst) == (1, 3, 0)
    assert "reduce-scatter hop 2 (step 1): rank 0's chunk 1 should get reduce of rank 3's chunk 1 but got reduce of rank 3's chunk 0" in first.message
    assert first.details["planned"] == [{"src": 3, "src_chunk": 1, "op": "reduce"}]
    assert ("wrong-column", 1, 3, 0) in errors(result)


def test_a_send_nobody_received_is_unmatched():
    traces = faithful(generate("ring", "allgather", 3), 9)
    traces[2].events = [e for e in traces[2].events if not (e.kind == "recv" and e.step == 0)]
    result = check_traces(traces)
    assert ("unmatched", 0, 1, 2) in errors(result)
    assert any("rank 1 sent its chunk 1 to rank 2, which never received it" in v.message for v in result.violations)


def test_a_chunk_crossing_a_link_twice_in_a_phase_is_a_link_repeat():
    ring = generate("ring", "allreduce", 3)
    traces = faithful(ring, 9)
    # a second copy of rank 0's chunk 2 to rank 1 in step 3 (its first crossing in the all-gather was step 2)
    traces[0].events.append(Event("send", 3, 0, 1, 2, -1, -1, 6, 9, 12, 1))
    traces[1].events.append(Event("recv", 3, 0, 1, -1, 2, COPY, 6, 9, 12, 1, 5))
    kinds = errors(check_traces(traces))
    assert ("postcondition", 3, 0, 1) in kinds  # differs from the plan
    assert ("link-repeat", 3, 0, 1) in kinds


def test_the_order_of_two_reduces_into_one_cell_is_checked():
    direct = generate("direct", "allreduce", 3)  # rank 0 reduces rank 1's vector, then rank 2's
    traces = faithful(direct, 5)
    recvs = [e for e in traces[0].events if e.kind == "recv"]
    swapped = {id(recvs[0]): recvs[1].order, id(recvs[1]): recvs[0].order}
    traces[0].events = [dataclasses.replace(e, order=swapped[id(e)]) if id(e) in swapped else e for e in traces[0].events]
    result = check_traces(traces)
    first = next(v for v in result.violations if v.kind == "postcondition")
    assert (first.step, first.dst) == (0, 0) and "should get reduce of rank 1's chunk 0 but got reduce of rank 2's chunk 0" in first.message


@pytest.mark.parametrize(
    "change, message",
    [
        ({"start": 3}, "hop 0: rank 1 wrote elements [3, 40) as chunk 3, whose elements are [30, 40)"),
        ({"nbytes": 8}, "rank 0 sent chunk 3 as 40 bytes but rank 1 took 8 bytes into its chunk 3"),
    ],
)
def test_rows_and_bytes_must_be_the_chunks(change, message):
    ring = generate("ring", "allreduce", 4)
    traces = faithful(ring, 40)
    edit(traces, 1, lambda e: e.kind == "recv" and e.step == 0, **change)
    result = check_traces(traces)
    assert any(message in v.message and v.kind == "postcondition" and v.step == 0 for v in result.violations), [str(v) for v in result.violations]


def test_a_slot_written_twice_is_reported():
    traces = faithful(generate("ring", "allreduce", 2), 20)
    write = next(e for e in traces[1].events if e.kind == "recv" and e.step == 0)
    traces[1].events.append(write)
    result = check_traces(traces)
    assert any(v.kind == "postcondition" and v.step == 0 and "wrote slot 0 of a message from rank 0 a second time" in v.message for v in result.violations)


def test_every_rank_must_report():
    traces = faithful(generate("ring", "allreduce", 3), 9)
    result = check_traces(traces[:2])
    assert errors(result) == [("postcondition", None, None, None)] and "got ranks [0, 1]" in result.violations[0].message

