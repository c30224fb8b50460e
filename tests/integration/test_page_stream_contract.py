"""The ``pages`` topic is readable by any consumer from the published files alone.

Pages are produced the way the workers produce them (``streamcrawl.schemas.codec`` + the project's
producer config); the consumer half uses nothing but confluent-kafka, ``json``, ``jsonschema`` and
the pages schema file that ``schemas/json/index.json`` names. Then the ``pages`` and ``status``
commands run as subprocesses against the same services.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamcrawl.agents.sinks.cassandra.driver import create_schema
from streamcrawl.agents.sinks.cassandra.sink import CassandraSink
from streamcrawl.agents.stream.counts import CrawlCounts, PartitionCounts
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import SCHEMA_VERSION, Outlink, Page, TerminalState, UrlStatus
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas" / "json"
# As a consumer in another language would: the index names the topic's current schema file.
PAGES_SCHEMA = (
    SCHEMAS / json.loads((SCHEMAS / "index.json").read_text("utf-8"))["topics"]["pages"]["schema"]
)
STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")
PARTITIONS = 3
ORIGINS = ("https://example.org", "http://b.example:8080", "https://xn--bcher-kva.example")


# --- the foreign consumer: only the published schema file ------------------------------------


def validators() -> dict[int, jsonschema.Draft202012Validator]:
    """Schema version -> validator of its pages schema file, for every version the index says
    readers accept (a producer not yet upgraded still sends an earlier one)."""
    index = json.loads((SCHEMAS / "index.json").read_text("utf-8"))
    return {
        v: jsonschema.Draft202012Validator(
            json.loads((SCHEMAS / f"pages.v{v}.schema.json").read_text("utf-8"))
        )
        for v in index["accepted_versions"]
    }


def read_with_schema_only(
    bootstrap: str, topic: str, group: str, count: int
) -> list[tuple[bytes, int, dict[str, Any]]]:
    """(key, partition, value) of the first ``count`` messages, each validated by the schema
    file of its version ``v``."""
    by_version = validators()
    assert SCHEMAS / f"pages.v{max(by_version)}.schema.json" == PAGES_SCHEMA
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    found: list[tuple[bytes, int, dict[str, Any]]] = []
    deadline = time.monotonic() + 60
    try:
        while len(found) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            key, partition, data = msg.key(), msg.partition(), msg.value()
            assert key is not None and partition is not None and data is not None
            value = json.loads(data.decode("utf-8"))
            by_version[value["v"]].validate(value)
            found.append((key, partition, value))
    finally:
        consumer.close()
    return found


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (Java ``Utils.murmur2``), the one Faust/aiokafka use."""
    m, h = 0x5BD1E995, 0x9747B28C ^ len(key)
    for i in range(0, len(key) - len(key) % 4, 4):
        k = (int.from_bytes(key[i : i + 4], "little") * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[len(key) - len(key) % 4 :]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


# --- producing like a worker -----------------------------------------------------------------


def make_page(crawl_id: str, origin: str, i: int, body: str | None = None) -> Page:
    url = f"{origin}/p/{i}"
    links = (
        Outlink(f"{origin}/p/{i + 1}", f"next: «{i + 1}»", ("next",)),
        Outlink("https://elsewhere.example/", tag="iframe", in_scope=False, scope_rule="host"),
    )[: i % 3]
    return Page(
        crawl_id=crawl_id, url=url, final_url=url, origin=origin, status=200,
        headers={"content-type": "text/html; charset=utf-8"}, content_type="text/html",
        charset="utf-8", title=f"Page {i}: été", depth=i % 3, fetched_at=1_780_000_000.0 + i,
        elapsed_ms=5.0, body_sha256=f"{i:064x}", body_bytes=100 + i, outlinks=i, body=body,
        links=links, links_total=len(links) + i % 2, links_truncated=i % 2 == 1,
    )  # fmt: skip


def as_version_2(page: Page) -> Page:
    """The page as a producer of schema v2 sends it (and as it decodes): no links fields."""
    return msgspec.structs.replace(page, v=2, links=(), links_total=None, links_truncated=False)


def value_of(page: Page) -> bytes:
    if page.v != 2:
        return encode(page)
    fields = msgspec.json.decode(encode(page))
    for name in ("links", "links_total", "links_truncated"):  # not in the v2 schema
        del fields[name]
    return msgspec.json.encode(fields)


def produce(bootstrap: str, prefix: str, pages: list[Page]) -> None:
    settings = load_settings(kafka_bootstrap=bootstrap, topic_prefix=prefix)
    # zstd like the workers' producer: a foreign consumer decompresses it transparently
    conf = admin_config.librdkafka_producer_config(settings) | {"compression.type": "zstd"}
    producer = Producer(conf)
    for page in pages:
        producer.produce(f"{prefix}.pages", key=page.origin.encode(), value=value_of(page))
    assert producer.flush(30) == 0


@pytest.fixture
def pages_topic(kafka_bootstrap: str, topic_prefix: str) -> list[Page]:
    """Topics created, 12 pages of one crawl (one with a body) and 2 of another, produced."""
    settings = load_settings(
        kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, partitions=PARTITIONS
    )
    admin.create_topics(settings)
    pages = [make_page("crawl-a", ORIGINS[i % 3], i) for i in range(12)]
    pages[4] = make_page("crawl-a", ORIGINS[1], 4, body="<html><p>é</p></html>")
    pages[7] = as_version_2(pages[7])
    pages += [make_page("crawl-b", ORIGINS[0], 100 + i) for i in range(2)]
    produce(kafka_bootstrap, topic_prefix, pages)
    return pages


def test_murmur2_matches_kafka_reference_values() -> None:
    # Expected values from Kafka's UtilsTest.testMurmur2 (signed 32-bit, before masking).
    reference = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"abc": 479470107,
    }
    for key, signed in reference.items():
        assert murmur2_partition(key, 2**31) == (signed & 0x7FFFFFFF) % 2**31


@pytest.mark.kafka
@pytest.mark.integration
def test_foreign_consumer_reads_pages_with_the_schema_file_only(
    pages_topic: list[Page], kafka_bootstrap: str, topic_prefix: str, consumer_group: str
) -> None:
    found = read_with_schema_only(
        kafka_bootstrap, f"{topic_prefix}.pages", consumer_group, len(pages_topic)
    )
    assert len(found) == len(pages_topic)
    by_url = {value["url"]: (key, partition, value) for key, partition, value in found}
    for page in pages_topic:
        key, partition, value = by_url[page.url]
        assert key == page.origin.encode("utf-8")
        assert partition == murmur2_partition(key, PARTITIONS), "not murmur2 (docs/architecture.md)"
        assert value["v"] == page.v and value["crawl_id"] == page.crawl_id
        assert value["title"] == page.title and value["body"] == page.body
        assert value["headers"] == page.headers and value["fetched_at"] == page.fetched_at
        assert value.get("links", []) == json.loads(msgspec.json.encode(page.links))
        assert value.get("links_total") == page.links_total
    assert {value["v"] for _, _, value in found} == {2, SCHEMA_VERSION}


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STREAMCRAWL, *argv], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.kafka
@pytest.mark.integration
def test_pages_command(pages_topic: list[Page], kafka_bootstrap: str, topic_prefix: str) -> None:
    flags = ("--kafka-bootstrap", kafka_bootstrap, "--topic-prefix", topic_prefix)
    everything = run_cli("pages", "--from-beginning", *flags)
    assert everything.returncode == 0, everything.stderr
    lines = [json.loads(line) for line in everything.stdout.splitlines()]
    assert sorted(p["url"] for p in lines) == sorted(p.url for p in pages_topic)
    by_url = {p["url"]: p for p in lines}
    for page in pages_topic:  # a v2 record is printed as it decodes: no links, not counted
        printed = by_url[page.url]
        assert printed["v"] == page.v and printed["links"] == json.loads(
            msgspec.json.encode(page.links)
        )
        assert printed["links_total"] == page.links_total
    with_body = [p for p in lines if "body" in p]
    assert [p["url"] for p in with_body] == [pages_topic[4].url]
    assert with_body[0]["body"] == "<html><p>é</p></html>"

    only_b = run_cli("pages", "--from-beginning", "--crawl-id", "crawl-b", *flags)
    assert [json.loads(line)["crawl_id"] for line in only_b.stdout.splitlines()] == ["crawl-b"] * 2
    assert run_cli("pages", *flags).stdout == ""  # starts at the end, stops when caught up


@pytest.mark.kafka
@pytest.mark.integration
def test_pages_follow(pages_topic: list[Page], kafka_bootstrap: str, topic_prefix: str) -> None:
    argv = [STREAMCRAWL, "pages", "--follow", "--from-beginning", "--crawl-id", "crawl-b"]
    argv += ["--kafka-bootstrap", kafka_bootstrap, "--topic-prefix", topic_prefix]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            seen = [json.loads(proc.stdout.readline())["url"] for _ in range(2)]
            later = make_page("crawl-b", ORIGINS[2], 999)
            produce(kafka_bootstrap, topic_prefix, [later])
            seen.append(json.loads(proc.stdout.readline())["url"])
            assert seen[-1] == later.url and proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(30)


@pytest.mark.cassandra
@pytest.mark.integration
async def test_status_command(cassandra_hosts: str, cassandra_keyspace: str) -> None:
    settings = load_settings(cassandra_hosts=cassandra_hosts, cassandra_keyspace=cassandra_keyspace)
    create_schema(settings.cassandra_config())
    crawl_id = "s-" + uuid.uuid4().hex[:8]
    statuses = [
        UrlStatus(
            crawl_id=crawl_id, url=f"https://example.org/{i}", origin="https://example.org",
            state=TerminalState.FETCHED if i < 5 else TerminalState.ROBOTS_DENIED, depth=0,
            updated_at=1_780_000_000.0 + i / 2,
        )
        for i in range(7)
    ]  # fmt: skip
    sink = CassandraSink(settings.cassandra_config())
    await sink.start()
    await sink.write([], statuses)
    await sink.stop()

    flags = ("--exact", "--cassandra-hosts", cassandra_hosts, "--cassandra-keyspace",
             cassandra_keyspace)  # fmt: skip
    result = run_cli("status", "--json", "--crawl-id", crawl_id, *flags)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == {
        "crawl_id": crawl_id,
        "states": {s.value: {"fetched": 5, "robots_denied": 2}.get(s.value, 0) for s in
                   TerminalState},
        "pages_per_s": 2.5,  # 5 pages fetched over 2 seconds
        "source": "cassandra",
    }  # fmt: skip
    overall = json.loads(run_cli("status", "--json", *flags).stdout)
    assert overall["crawl_id"] is None and overall["crawls"][crawl_id]["states"]["fetched"] == 5
    assert overall["states"]["robots_denied"] == 2
    text = run_cli("status", "--crawl-id", crawl_id, *flags).stdout
    assert f"crawl {crawl_id}" in text and "robots_denied" in text and "2.50 pages/s" in text

    dead = run_cli("status", "--exact", "--cassandra-hosts", "127.0.0.1:1")
    assert dead.returncode == 1
    assert dead.stderr.startswith("streamcrawl: cannot reach Cassandra at 127.0.0.1:1")
    assert dead.stderr.count("\n") == 1


@pytest.mark.kafka
@pytest.mark.integration
def test_status_reads_one_counts_message_per_partition(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    """1 M synthetic URL states over 12 partitions; older messages of a partition are not read
    (its last message is its whole count), and the sink's lag is what it has not committed."""
    partitions = 12
    settings = load_settings(
        kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, partitions=partitions
    )
    admin.create_topics(settings)
    producer = Producer(admin_config.librdkafka_producer_config(settings))
    counts_topic = f"{topic_prefix}.counts"
    for p in range(partitions):
        stale = PartitionCounts(partition=p, crawls={"big": CrawlCounts(states={"fetched": 7})})
        final = PartitionCounts(
            partition=p,
            offsets={"outcomes": 10**6},
            crawls={
                "big": CrawlCounts(
                    states={"fetched": 80_000, "out_of_scope": 3_000, "cancelled": 333 + (p < 4)},
                    first_fetched_at=1_000.0 + p, last_fetched_at=2_000.0 - p,
                ),
                "small": CrawlCounts(states={"failed": 1}),
            },
        )  # fmt: skip
        for record in (stale, final):
            producer.produce(counts_topic, key=b"k", value=msgspec.json.encode(record), partition=p)
    for i in range(5):
        page = make_page("big", ORIGINS[0], i)
        producer.produce(f"{topic_prefix}.pages", key=page.origin.encode(), value=encode(page))
    assert producer.flush(30) == 0
    group = {"group.id": admin.sink_group(settings)}
    sink = Consumer(admin_config.librdkafka_config(settings) | group)
    pages_partition = murmur2_partition(ORIGINS[0].encode(), partitions)
    sink.commit(offsets=[TopicPartition(f"{topic_prefix}.pages", pages_partition, 2)],
                asynchronous=False)  # fmt: skip
    sink.close()

    flags = ("--kafka-bootstrap", kafka_bootstrap, "--topic-prefix", topic_prefix)
    result = run_cli("status", "--json", "--crawl-id", "big", *flags)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    states = report["states"]
    assert (states["fetched"], states["out_of_scope"], states["cancelled"]) == (
        960_000, 36_000, 4_000,
    )  # fmt: skip
    assert sum(states.values()) == 1_000_000 and states["failed"] == 0
    assert report["pages_per_s"] == 960.0  # over 1000 s: the earliest first, the latest last
    assert report["source"] == "counts" and report["sink_lag"] == 3  # 5 pages, 2 written
    everything = json.loads(run_cli("status", "--json", *flags).stdout)
    assert everything["crawls"]["small"]["states"]["failed"] == partitions
    text = run_cli("status", "--crawl-id", "big", *flags).stdout
    assert "sink lag: 3 messages" in text and "crawl big" in text and "pages/s" in text
