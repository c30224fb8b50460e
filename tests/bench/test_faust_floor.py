"""bench/probes/faust_floor.py: its counting frontier keeps ``run_batches``' contract (it returns
the indices it refused: none), so every event of the measured stream is acknowledged and the
run ends at its last event instead of the agent crashing at its first batch."""

from __future__ import annotations

import asyncio

from bench.probes.faust_floor import CountingFrontier, _Counter
from tests.fake_stream import Event, Stream, run_for


def test_every_event_is_acked_and_the_run_ends_at_the_last() -> None:
    stream = Stream([Event(i % 4, i) for i in range(25)])
    ended: list[int] = []
    frontier = CountingFrontier(_Counter(25), lambda counter: ended.append(counter.seen))
    asyncio.run(run_for(stream, frontier, 0.5, max_events=10, within=0.05))
    assert ended == [25]
    assert stream.acked == [(i % 4, i) for i in range(25)]
    assert frontier.counter.batches >= 3  # batches of at most 10
