"""Is the worker's broker and database reachable? Probes behind ``/readyz`` and the metrics.

``Health`` runs each probe every ``interval`` seconds (each bounded by ``timeout``). A service
whose probe has failed for longer than ``unready_after`` seconds makes ``unready()`` name it,
and ``/readyz`` answers 503 until a probe succeeds again. Each return to reachable is counted
(``streamcrawl_health_reconnects_total{dependency}``): the broker or Cassandra came back and the
worker's clients reconnect to it. A short blip (under ``unready_after``) is counted but leaves
the worker ready: its clients retry on their own.

The probes: Kafka, one metadata request for one topic from a client of our own
(``kafka_probe``); Cassandra, one single-partition read through the sink (``sink_probe``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.metadata import MetadataRequest
from mode import Service

from streamcrawl.agents.sinks.contract import Sink
from streamcrawl.agents.stream.connection import KafkaConnection
from streamcrawl.agents.stream.metrics import Metrics

log = logging.getLogger(__name__)

Probe = Callable[[], Awaitable[None]]  # returns if the service answered, raises if not
PROBE_SPEC = "\x00health"  # a crawl id no crawl has: its read touches one empty partition


class Health(Service):
    """Probes ``probes`` (name -> probe) and says which has been down for too long."""

    def __init__(
        self,
        probes: Mapping[str, Probe],
        metrics: Metrics,
        *,
        unready_after: float,
        interval: float = 2.0,
        timeout: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.probes = dict(probes)
        self.metrics = metrics
        self.unready_after = unready_after
        self.interval = interval
        self.timeout = timeout
        self.down_since: dict[str, float] = {}  # service -> when its probes started failing

    async def on_start(self) -> None:
        self.add_future(self._run())

    async def _run(self) -> None:
        while not self.should_stop:
            await self.check()
            await asyncio.sleep(self.interval)

    async def check(self) -> None:
        """Run every probe once and record the result."""
        for name, probe in self.probes.items():
            try:
                await asyncio.wait_for(probe(), self.timeout)
            except Exception as exc:
                self._down(name, exc)
            else:
                self._up(name)

    def _down(self, name: str, exc: Exception) -> None:
        if name not in self.down_since:
            self.down_since[name] = time.monotonic()
            log.warning("%s unreachable: %r", name, exc, extra={"service": name})
        self.metrics.health_up.labels(name).set(0)

    def _up(self, name: str) -> None:
        since = self.down_since.pop(name, None)
        if since is not None:
            self.metrics.health_reconnects.labels(name).inc()
            log.info(
                "%s reachable again after %.0f s", name, time.monotonic() - since,
                extra={"service": name},
            )  # fmt: skip
        self.metrics.health_up.labels(name).set(1)

    def unready(self) -> str | None:
        """Why the worker is not ready: a service down for longer than ``unready_after``."""
        now = time.monotonic()
        for name, since in self.down_since.items():
            if now - since > self.unready_after:
                return f"{name} unreachable for {now - since:.0f} s"
        return None


def kafka_probe(
    connection: KafkaConnection, topic: str
) -> tuple[Probe, Callable[[], Awaitable[None]]]:
    """A probe that asks a broker for the metadata of ``topic``, and the coroutine that closes
    it. One topic, not all: on a broker holding thousands of topics the metadata of all of them
    was an idle worker's largest cost (docs/performance.md, "An idle worker")."""
    client: AIOKafkaClient | None = None

    async def probe() -> None:
        nonlocal client
        if client is None:
            fresh = AIOKafkaClient(**connection, request_timeout_ms=5000)
            try:
                await fresh.bootstrap()
            except Exception:
                await fresh.close()
                raise
            client = fresh
        node = client.get_random_node()
        if node is None:
            raise KafkaConnectionError("no broker known")
        await client.send(node, MetadataRequest([topic], allow_auto_topic_creation=False))

    async def close() -> None:
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    return probe, close


def sink_probe(current: Callable[[], Sink | None]) -> Probe:
    """A probe that reads one (empty) partition through the sink ``current()`` returns."""

    async def probe() -> None:
        sink = current()
        if sink is None:
            raise ConnectionError("the sink is not connected yet")
        await sink.get_spec(PROBE_SPEC)

    return probe
