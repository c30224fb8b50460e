"""The worker's Kafka health probe against a real broker: it answers while the broker serves,
fails when nothing listens, and asks for the metadata of its one topic (never creating it),
never for all the topics of the cluster (on a shared broker's thousands of topics that was an
idle worker's largest cost)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from aiokafka.protocol.metadata import MetadataRequest

from streamcrawl.agents.stream import health
from streamcrawl.agents.stream.health import kafka_probe

pytestmark = [pytest.mark.kafka, pytest.mark.integration]


async def test_the_probe_asks_for_its_one_topic(
    kafka_bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[Any, Any]] = []

    class Recorded(MetadataRequest):
        def __init__(self, topics: Any = None, allow_auto_topic_creation: Any = None) -> None:
            asked.append((topics, allow_auto_topic_creation))
            super().__init__(topics, allow_auto_topic_creation)

    monkeypatch.setattr(health, "MetadataRequest", Recorded)
    topic = f"{topic_prefix}.frontier"
    probe, close = kafka_probe(
        {"bootstrap_servers": kafka_bootstrap, "security_protocol": "PLAINTEXT"}, topic
    )
    try:
        await probe()
        await probe()
    finally:
        await close()
    assert asked == [([topic], False), ([topic], False)]


async def test_the_probe_fails_when_no_broker_listens() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    probe, close = kafka_probe(
        {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "PLAINTEXT"}, "t.frontier"
    )
    try:
        with pytest.raises(Exception, match=r"(?i)connect|bootstrap"):
            await probe()
    finally:
        await close()
