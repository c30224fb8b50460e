"""bench/faust_floor.py: its counting frontier keeps ``run_batches``' contract (it returns
the indices it refused: none), so every event of the measured stream is acknowledged and the
run ends at its last event instead of the agent crashing at its first batch."""

from __future__ import annotations

import asyncio

from bench.faust_floor import CountingFrontier, _Counter
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.topology.worker.batching import run_batches
from tests.fake_stream import Event, Stream


def test_every_event_is_acked_and_the_run_ends_at_the_last() -> None:
    stream, finished = Stream([Event(i % 4, i) for i in range(25)]), asyncio.Event()
    ended: list[int] = []

    def done(counter: _Counter) -> None:
        ended.append(counter.seen)
        finished.set()

    frontier = CountingFrontier(_Counter(25), done)

    async def run() -> None:
        task = asyncio.ensure_future(
            run_batches(stream, frontier, Metrics(), untrack=lambda e: None, max_events=10)  # type: ignore[arg-type]
        )
        waiter = asyncio.ensure_future(finished.wait())
        await asyncio.wait({task, waiter}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # run_batches failed: its error is the test's
        assert finished.is_set(), "the run never saw its last event"
        while len(stream.acked) < 25:  # the last batch is acked after ``done`` returned
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(run())
    assert ended == [25]
    assert stream.acked == [(i % 4, i) for i in range(25)]
    assert frontier.counter.batches >= 3  # batches of at most 10
