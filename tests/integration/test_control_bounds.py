"""Hostile crawl specs on a real Kafka control topic: the worker's view refuses each with one
logged reason (crawl id, field, why), applies none, keeps the last good spec and reads on."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import MAX_SEEDS, CrawlPolicy
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import Settings, load_settings
from streamcrawl.topology.worker import clients as kafka_clients
from streamcrawl.topology.worker.internals import fetch_in_windows, refresh_metadata

URL = "http://127.0.0.1:9/"


def hostile(crawl_id: str, **fields: object) -> bytes:
    return json.dumps({"v": 2, "crawl_id": crawl_id, "seeds": [URL]} | fields).encode()


def topics(kafka_bootstrap: str, topic_prefix: str) -> tuple[Settings, str]:
    """The worker's topics and a one-partition budget topic; the settings and its name."""
    settings = load_settings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
    admin.create_topics(settings)
    budget = f"{topic_prefix}.budget"
    client = AdminClient(admin_config.librdkafka_config(settings))
    for future in client.create_topics([NewTopic(budget, 1, 1)]).values():
        future.result(30)
    return settings, budget


@pytest.mark.kafka
@pytest.mark.integration
async def test_hostile_specs_on_the_control_topic_are_refused_and_the_worker_reads_on(
    kafka_bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings, budget = topics(kafka_bootstrap, topic_prefix)
    messages = [
        (b"good", encode(CrawlPolicy(crawl_id="good", seeds=(URL,), max_pages=5))),
        (b"good", hostile("good", max_pages=-1)),  # an update outside the bounds
        (b"many", hostile("many", seeds=[URL] * (MAX_SEEDS + 1))),
        (b"long", hostile("long", user_agent="x" * 900_000)),
        (b"slow", hostile("slow", delay=10**9)),
        (b"regex", hostile("regex", include=["("])),
        (b"later", encode(CrawlPolicy(crawl_id="later", seeds=(URL,)))),
    ]
    producer = Producer(admin_config.librdkafka_producer_config(settings))
    for key, value in messages:
        producer.produce(admin.topic_name(settings, "control"), key=key, value=value)
    assert producer.flush(30) == 0

    caplog.set_level(logging.WARNING, "streamcrawl.agents.stream.control")
    connection = kafka_clients.aiokafka_connection(settings)
    view = SharedView(
        connection,
        admin.topic_name(settings, "control"),
        budget,
        Metrics(),
        refresh_metadata=refresh_metadata,
    )
    await view.start()
    try:
        await asyncio.wait_for(view.ready.wait(), 60)
    finally:
        await view.stop()

    assert set(view.policies) == {"good", "later"}
    assert view.policies["good"].max_pages == 5  # the refused update was never applied
    assert view.metrics.bad_messages.labels("control")._value.get() == 5
    refused = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(refused) == 5, refused
    expected = {
        "good": "field max_pages",
        "many": "field seeds",
        "long": "field user_agent",
        "slow": "field delay",
        "regex": "not a valid regex",
    }
    for crawl_id, why in expected.items():  # partitions interleave: one line per crawl
        (line,) = [m for m in refused if m.startswith(f"refusing crawl spec of {crawl_id!r}")]
        assert why in line and len(line) < 1000, line


@pytest.mark.kafka
@pytest.mark.integration
async def test_an_idle_view_is_ready_at_once_sees_a_new_spec_at_once_and_stops_at_once(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    """The reader's long idle waits (a 5 s poll, 1.5 s fetches, aiokafka's fetch routine on a
    1.5 s timer) bound only how often it wakes: empty topics make it ready without waiting a
    poll out, a record ends the wait, and stopping does not wait for the poll either."""
    settings, budget = topics(kafka_bootstrap, topic_prefix)
    view = SharedView(
        kafka_clients.aiokafka_connection(settings),
        admin.topic_name(settings, "control"),
        budget,
        Metrics(),
        tune_consumer=fetch_in_windows,
        refresh_metadata=refresh_metadata,
    )
    loop = asyncio.get_running_loop()
    await view.start()
    try:
        started = loop.time()
        await asyncio.wait_for(view.ready.wait(), 60)
        assert loop.time() - started < 2.0
        await asyncio.sleep(4.0)  # idle: the reader is in its long poll and fetch
        producer = Producer(admin_config.librdkafka_producer_config(settings))
        producer.produce(
            admin.topic_name(settings, "control"),
            key=b"new",
            value=encode(CrawlPolicy(crawl_id="new", seeds=(URL,))),
        )
        assert producer.flush(30) == 0
        sent = loop.time()
        assert await view.wait_rules("new", 10.0) is not None
        assert loop.time() - sent < 1.0
        await asyncio.sleep(1.0)
    finally:
        stopping = loop.time()
        await view.stop()
    assert loop.time() - stopping < 2.0
