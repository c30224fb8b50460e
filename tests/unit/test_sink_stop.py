"""A sink consumer stopped mid-batch ends quietly: ``on_stop`` closes the aiokafka consumer
while ``_run`` may be inside a poll or the window's sleep (a worker stopped by SIGTERM exited 1
with ``ConsumerStoppedError``); the same error while not stopping still crashes the service."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import ConsumerStoppedError

from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.sink_agent import SinkConsumer


class Closed:
    """The consumer ``on_stop`` closes while a poll waits: ``stopping`` first, as
    ``Service.stop`` marks the service stopped before it calls ``on_stop``."""

    def __init__(self, stopping: Any) -> None:
        self.stopping = stopping

    async def getmany(self, **_: Any) -> Any:
        self.stopping()
        raise ConsumerStoppedError()


def consumer(stop: bool) -> SinkConsumer:
    async def open_sink() -> Any:
        return object()

    conn: Any = {"bootstrap_servers": "k:9092", "security_protocol": "PLAINTEXT"}
    sink = SinkConsumer(conn, 1024, ["x.pages"], "g", open_sink, Metrics())
    sink._consumer = Closed(sink._stopped.set if stop else lambda: None)  # type: ignore[assignment]
    return sink


def test_a_consumer_closed_by_stop_ends_the_loop_quietly() -> None:
    asyncio.run(consumer(stop=True)._run())


def test_a_consumer_closed_otherwise_still_crashes_the_service() -> None:
    with pytest.raises(ConsumerStoppedError):
        asyncio.run(consumer(stop=False)._run())
