"""/readyz's probes: a service down for longer than ``unready_after`` makes the worker
unready, until a probe succeeds again; each return is counted as a reconnect."""

from __future__ import annotations

import time

import pytest

from streamcrawl.agents.stream.health import Health, sink_probe
from streamcrawl.agents.stream.metrics import Metrics


class Switch:
    def __init__(self) -> None:
        self.up = True

    async def __call__(self) -> None:
        if not self.up:
            raise ConnectionError("refused")


def sample(metrics: Metrics, name: str, service: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"dependency": service})


async def test_unready_only_after_the_grace_and_ready_again_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kafka, cassandra = Switch(), Switch()
    metrics = Metrics()
    health = Health({"kafka": kafka, "cassandra": cassandra}, metrics, unready_after=30.0)
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    await health.check()
    assert health.unready() is None and sample(metrics, "streamcrawl_health_up", "kafka") == 1
    kafka.up = False
    await health.check()
    now[0] += 29
    await health.check()
    assert health.unready() is None  # a blip: the clients retry on their own
    assert sample(metrics, "streamcrawl_health_up", "kafka") == 0
    now[0] += 2
    assert health.unready() == "kafka unreachable for 31 s"
    kafka.up = True
    await health.check()
    assert health.unready() is None
    assert sample(metrics, "streamcrawl_health_reconnects_total", "kafka") == 1
    assert sample(metrics, "streamcrawl_health_reconnects_total", "cassandra") is None


async def test_a_probe_that_hangs_counts_as_down() -> None:
    async def hang() -> None:
        import asyncio

        await asyncio.sleep(60)

    health = Health({"cassandra": hang}, Metrics(), unready_after=0.0, timeout=0.05)
    await health.check()
    assert "cassandra" in health.down_since


async def test_the_sink_probe_needs_an_open_sink() -> None:
    from streamcrawl.agents.sinks.memory import MemorySink

    sink = None
    probe = sink_probe(lambda: sink)
    with pytest.raises(ConnectionError):
        await probe()
    sink = MemorySink()
    await probe()
