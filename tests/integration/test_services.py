"""Smoke tests of the real services and of the client settings the project relies on.

The key -> partition agreement between confluent-kafka (seeds) and aiokafka (Faust workers) is
docs/architecture.md: both must place an origin key on the same partition.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import murmur2
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from streamcrawl.topology.admin.config import librdkafka_producer_config
from streamcrawl.topology.settings import load_settings

pytestmark = pytest.mark.integration

PARTITIONS = 12
ORIGINS = [
    b"https://example.com",
    b"http://a.test:8080",
    b"https://xn--bcher-kva.example",
    b"http://127.0.0.1:8000",
    b"https://a.b.c.example.org",
]


def random_keys(count: int, seed: int = 20260930) -> list[bytes]:
    rng = random.Random(seed)
    origins = [
        f"{rng.choice(['http', 'https'])}://h{rng.randrange(10**6)}.test:{rng.randrange(1, 65536)}"
        for _ in range(count // 2)
    ]
    return [o.encode() for o in origins] + [rng.randbytes(rng.randrange(1, 40)) for _ in origins]


KEYS = ORIGINS + random_keys(400)


def expected_partition(key: bytes, partitions: int = PARTITIONS) -> int:
    """Kafka's default partitioner (Java, aiokafka): positive murmur2 of the key bytes."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def create_topic(
    kafka_admin: AdminClient, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
    kafka_admin.create_topics([topic], operation_timeout=30)[name].result(timeout=60)
    # The controller has committed the topic; the broker's metadata may lag a moment behind.
    deadline = time.monotonic() + 30
    while kafka_admin.list_topics(name, timeout=10).topics[name].error is not None:
        assert time.monotonic() < deadline, f"topic {name} not in the metadata after 30 s"
        time.sleep(0.1)


def confluent_partitions(config: dict[str, Any], topic: str, keys: list[bytes]) -> dict[bytes, int]:
    placed: dict[bytes, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        placed[msg.key()] = msg.partition()

    producer = Producer(config)
    for key in keys:
        producer.produce(topic, key=key, value=b"", on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0, "messages left undelivered"
    return placed


async def aiokafka_partitions(bootstrap: str, topic: str, keys: list[bytes]) -> dict[bytes, int]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        sent = [await producer.send(topic, b"", key=key) for key in keys]
        return {
            key: meta.partition for key, meta in zip(keys, await asyncio.gather(*sent), strict=True)
        }
    finally:
        await producer.stop()


# -- Kafka -----------------------------------------------------------------------------------


@pytest.mark.kafka
def test_confluent_round_trip(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_prefix: str, consumer_group: str
) -> None:
    topic = f"{topic_prefix}.smoke"
    create_topic(kafka_admin, topic, 1)
    assert confluent_partitions(producer_config(kafka_bootstrap), topic, [b"k"]) == {b"k": 0}

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": consumer_group,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(1)
        assert msg is not None, "nothing consumed within 60 s"
        assert msg.error() is None, msg.error()
        assert (msg.key(), msg.value()) == (b"k", b"")
    finally:
        consumer.close()


@pytest.mark.kafka
async def test_aiokafka_round_trip(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_prefix: str, consumer_group: str
) -> None:
    topic = f"{topic_prefix}.smoke"
    create_topic(kafka_admin, topic, 1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"hello", key=b"https://example.com")
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=consumer_group,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        msg = await asyncio.wait_for(consumer.getone(), timeout=60)
    finally:
        await consumer.stop()
    assert (msg.key, msg.value) == (b"https://example.com", b"hello")


@pytest.mark.kafka
async def test_both_clients_put_an_origin_on_the_same_partition(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.keys"
    create_topic(kafka_admin, topic, PARTITIONS)
    by_confluent = confluent_partitions(producer_config(kafka_bootstrap), topic, KEYS)
    by_aiokafka = await aiokafka_partitions(kafka_bootstrap, topic, KEYS)
    assert by_confluent == by_aiokafka
    assert by_aiokafka == {key: expected_partition(key) for key in KEYS}


@pytest.mark.kafka
def test_librdkafka_default_partitioner_would_disagree(
    kafka_bootstrap: str, kafka_admin: AdminClient, topic_prefix: str
) -> None:
    # Why librdkafka_producer_config sets the partitioner: without it (CRC32) keys go elsewhere.
    topic = f"{topic_prefix}.keys"
    create_topic(kafka_admin, topic, PARTITIONS)
    by_default = confluent_partitions({"bootstrap.servers": kafka_bootstrap}, topic, ORIGINS)
    assert any(by_default[key] != expected_partition(key) for key in ORIGINS)


@pytest.mark.kafka
def test_topic_with_partition_count_and_configs(
    kafka_admin: AdminClient, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.pages"
    configs = {"compression.type": "zstd", "max.message.bytes": str(4 * 1024 * 1024)}
    create_topic(kafka_admin, topic, 6, configs)

    metadata = kafka_admin.list_topics(topic, timeout=30).topics[topic]
    assert metadata.error is None
    assert len(metadata.partitions) == 6

    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = kafka_admin.describe_configs([resource])[resource].result(timeout=30)
    assert {name: described[name].value for name in configs} == configs


# -- Cassandra -------------------------------------------------------------------------------


@pytest.mark.cassandra
def test_cassandra_round_trip(cassandra_session: Any, cassandra_keyspace: str) -> None:
    assert cassandra_session.keyspace == cassandra_keyspace
    release = cassandra_session.execute("SELECT release_version FROM system.local").one()
    assert release.release_version

    cassandra_session.execute(
        "CREATE TABLE pages (origin text, url text, status int, title text,"
        " PRIMARY KEY ((origin), url))"
    )
    insert = cassandra_session.prepare(
        "INSERT INTO pages (origin, url, status, title) VALUES (?, ?, ?, ?)"
    )
    cassandra_session.execute(insert, ("https://example.com", "https://example.com/", 200, "Hi"))
    row = cassandra_session.execute(
        "SELECT url, status, title FROM pages WHERE origin = %s", ("https://example.com",)
    ).one()
    assert (row.url, row.status, row.title) == ("https://example.com/", 200, "Hi")


def producer_config(bootstrap: str) -> dict[str, Any]:
    """The project's confluent-kafka producer settings for ``bootstrap``."""
    return librdkafka_producer_config(load_settings(kafka_bootstrap=bootstrap))
