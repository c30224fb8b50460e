"""The worker's consumers fetch in short windows while records come and wait long while none
do, and their fetch routines do not wake on a 200 ms timer
(``topology.worker.internals.fetch_in_windows``): Faust's own consumer, which has no setting for
it, the sink's and the shared view's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streamcrawl.agents.stream.sink_agent import SINK_WINDOW
from streamcrawl.topology.settings import load_settings
from streamcrawl.topology.worker import app as app_module
from streamcrawl.topology.worker.internals import (
    FETCH_MAX_WAIT_MS,
    FETCH_MIN_BYTES,
    FETCHER_TIMEOUT_S,
    IDLE_FETCH_MAX_WAIT_MS,
    SINK_FETCH_MAX_WAIT_MS,
    SINK_FETCH_MIN_BYTES,
    fetch_in_windows,
    sink_fetch_in_windows,
)


class Fetcher:
    """aiokafka's fetcher as far as the switch uses it: its two settings, and the fetch that
    says whether it brought records."""

    def __init__(self, answers: list[bool], max_wait_ms: int = 500) -> None:
        self._fetch_min_bytes, self._fetch_max_wait_ms = 1, max_wait_ms  # aiokafka's defaults
        self._fetcher_timeout = 0.2  # aiokafka's consumer_timeout_ms
        self.answers = answers
        self.asked: list[tuple[int, int]] = []  # the settings each fetch was built with

    async def _proc_fetch_request(self, *_: Any) -> bool:
        self.asked.append((self._fetch_min_bytes, self._fetch_max_wait_ms))
        return self.answers.pop(0)


class Consumer:
    def __init__(self, fetcher: Fetcher) -> None:
        self._fetcher = fetcher


def test_fetches_wait_for_more_after_records_and_as_configured_after_none() -> None:
    fetcher = Fetcher([False, True, True, False, True])
    fetch_in_windows(Consumer(fetcher))  # type: ignore[arg-type]

    async def fetch_all() -> list[bool]:
        return [await fetcher._proc_fetch_request(None, 0, None) for _ in range(5)]

    assert asyncio.run(fetch_all()) == [False, True, True, False, True]
    idle, busy = (1, IDLE_FETCH_MAX_WAIT_MS), (FETCH_MIN_BYTES, FETCH_MAX_WAIT_MS)
    assert IDLE_FETCH_MAX_WAIT_MS == 1500 and FETCH_MAX_WAIT_MS < IDLE_FETCH_MAX_WAIT_MS
    assert fetcher.asked == [idle, idle, busy, busy, idle]
    assert (fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms) == busy


def test_the_fetch_routine_wakes_on_its_events_not_five_times_a_second() -> None:
    fetcher = Fetcher([])
    fetch_in_windows(Consumer(fetcher))  # type: ignore[arg-type]
    assert fetcher._fetcher_timeout == FETCHER_TIMEOUT_S >= 1.0


def test_a_longer_configured_wait_is_kept() -> None:
    fetcher = Fetcher([False], max_wait_ms=4000)
    fetcher._fetcher_timeout = 3.0
    fetch_in_windows(Consumer(fetcher))  # type: ignore[arg-type]
    assert asyncio.run(fetcher._proc_fetch_request(None, 0, None)) is False
    assert fetcher.asked == [(1, 4000)]
    assert fetcher._fetcher_timeout == 3.0


def test_fausts_worker_consumer_switches_once_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from faust.transport.drivers import aiokafka as driver

    fetcher = Fetcher([True])

    async def started(self: Any) -> None:  # Faust's on_start, without a broker
        self._consumer = Consumer(fetcher)

    monkeypatch.setattr(driver.AIOKafkaConsumerThread, "on_start", started)
    app = app_module.create_app(load_settings(state_dir=tmp_path))

    async def start_and_fetch() -> None:
        thread = app.consumer._thread  # type: ignore[attr-defined]
        await thread.on_start()
        await fetcher._proc_fetch_request(None, 0, None)

    asyncio.run(start_and_fetch())
    assert (fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms) == (
        FETCH_MIN_BYTES,
        FETCH_MAX_WAIT_MS,
    )


@pytest.mark.parametrize(
    ("service", "tune"), [("SinkConsumer", sink_fetch_in_windows), ("SharedView", fetch_in_windows)]
)
def test_the_sink_and_shared_view_consumers_are_tuned_once_started(
    service: str, tune: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tunes: list[Any] = []

    class Recording(getattr(app_module, service)):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            tunes.append(kwargs["tune_consumer"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(app_module, service, Recording)
    app_module.create_app(load_settings(state_dir=tmp_path))
    assert tunes == [tune]


def test_the_sinks_busy_window_is_its_write_window() -> None:
    # It writes once a SINK_WINDOW whatever its fetches bring: fetching more often than that
    # costs the broker requests and the sink wake-ups for nothing.
    fetcher = Fetcher([True, True, False])
    sink_fetch_in_windows(Consumer(fetcher))  # type: ignore[arg-type]

    async def fetch_all() -> None:
        for _ in range(3):
            await fetcher._proc_fetch_request(None, 0, None)

    asyncio.run(fetch_all())
    busy = (SINK_FETCH_MIN_BYTES, SINK_FETCH_MAX_WAIT_MS)
    assert fetcher.asked == [(1, IDLE_FETCH_MAX_WAIT_MS), busy, busy]
    assert SINK_FETCH_MAX_WAIT_MS == SINK_WINDOW * 1000 > FETCH_MAX_WAIT_MS


def test_fausts_livelock_check_looks_at_every_partition_without_a_task_each(
    tmp_path: Path,
) -> None:
    from faust.types import TP

    app = app_module.create_app(load_settings(state_dir=tmp_path))
    consumer = app.consumer
    tps = {TP("t", p) for p in range(60)}
    checked: list[TP] = []
    consumer.assignment = lambda: tps  # type: ignore[method-assign]
    consumer.verify_event_path = lambda now, tp: checked.append(tp)  # type: ignore[method-assign]

    async def check() -> int:
        loop = asyncio.get_running_loop()
        before = len(asyncio.all_tasks(loop))
        created = []
        factory = loop.get_task_factory()

        def count(loop: Any, coro: Any, **kwargs: Any) -> Any:
            created.append(coro)
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(count)
        try:
            await consumer.verify_all_partitions_active()
        finally:
            loop.set_task_factory(factory)
        assert len(asyncio.all_tasks(loop)) == before
        return len(created)

    assert asyncio.run(check()) == 0
    assert set(checked) == tps
