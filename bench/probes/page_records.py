"""Bytes per page record of finished bench runs: the ``pages`` topic and Cassandra's ``pages`` rows.

For every ``<prefix>.pages`` topic on the broker whose prefix starts with ``--match`` (the bench
runners name theirs ``bench-<tag>``), reads every value once from the beginning and prints one
JSON line: the messages, the value bytes (uncompressed JSON, what a consumer decodes: median and
mean), the bytes of its ``links`` array (mean), the topic's bytes on the broker's disk (zstd
record batches: the ``*.log`` files under ``--kafka-data``, when given) and, with
``--cassandra``, the mean length of the ``links`` cell of the run's keyspace (``bench_<tag>``).

    source .services/env                  # the services the runs used (scripts/services.sh)
    .venv/bin/python -m bench.probes.page_records --kafka-data .services/kafka/data --cassandra

Informs: what the link list adds to a page record on the broker and in Cassandra
(docs/performance.md, "Outlinks in the page record"); bench/probes/storage_bytes.py and
bench/probes/warc_broker_bytes.py reuse its readers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec


class _Links(msgspec.Struct):
    links: msgspec.Raw = msgspec.Raw(b"[]")


def topic_messages(bootstrap: str, topic: str) -> Iterator[Any]:
    """Every message of ``topic``, read once from each partition's start to its end offset as
    the read began (streamed: the ``pages`` topic holds the bodies)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-read-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": 16 * 1024 * 1024,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in meta.partitions
        }
        consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in ends.items()])
        left = sum(hi - lo for lo, hi in ends.values())
        while left > 0:
            msg = consumer.poll(5.0)
            if msg is None:
                break
            if msg.error():
                continue
            yield msg
            left -= 1
    finally:
        consumer.close()


def topic_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of ``topic`` (``topic_messages``)."""
    return [msg.value() or b"" for msg in topic_messages(bootstrap, topic)]


def disk_bytes(data: Path, topic: str) -> int:
    """Bytes of the topic's log segments in a broker's data directory."""
    return sum(
        f.stat().st_size for d in data.glob(f"{topic}-*") if d.is_dir() for f in d.glob("*.log")
    )


def cassandra_links(hosts: str, keyspace: str) -> float | None:
    """Mean length of the ``links`` cell of the keyspace's pages (None: no such column)."""
    from streamcrawl.agents.sinks.cassandra.driver import connect
    from streamcrawl.topology.settings import load_settings

    config = load_settings(cassandra_hosts=hosts, cassandra_keyspace=keyspace).cassandra_config()
    cluster, session = connect(config)
    try:
        table = cluster.metadata.keyspaces.get(keyspace)
        if table is None or "links" not in table.tables["pages"].columns:
            return None
        cells = [len(r.links or "") for r in session.execute(f"SELECT links FROM {keyspace}.pages")]
        return round(statistics.mean(cells), 1) if cells else None
    finally:
        cluster.shutdown()


def report(topic: str, args: argparse.Namespace) -> dict[str, Any]:
    values = topic_values(os.environ["STREAMCRAWL_KAFKA_BOOTSTRAP"], topic)
    sizes = [len(v) for v in values]
    links = [len(msgspec.json.decode(v, type=_Links).links) for v in values]
    prefix = topic.removesuffix(".pages")
    out: dict[str, Any] = {
        "topic": topic,
        "messages": len(values),
        "value_bytes_median": statistics.median(sizes) if sizes else None,
        "value_bytes_mean": round(statistics.mean(sizes), 1) if sizes else None,
        "links_bytes_mean": round(statistics.mean(links), 1) if links else None,
    }
    if args.kafka_data:
        on_disk = disk_bytes(Path(args.kafka_data), topic)
        out["disk_bytes_per_message"] = round(on_disk / max(len(values), 1), 1)
    if args.cassandra:
        keyspace = prefix.replace("-", "_")
        hosts = os.environ["STREAMCRAWL_CASSANDRA_HOSTS"]
        out["cassandra_links_cell_mean"] = cassandra_links(hosts, keyspace)
    return out


def main(argv: list[str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient

    ap = argparse.ArgumentParser(prog="python -m bench.probes.page_records", description=__doc__)
    ap.add_argument("--match", default="bench-", help="topic prefix to report (default bench-)")
    ap.add_argument("--kafka-data", help="the broker's data directory, for bytes on disk")
    ap.add_argument("--cassandra", action="store_true", help="also the keyspaces' links cells")
    args = ap.parse_args(argv)
    client = AdminClient({"bootstrap.servers": os.environ["STREAMCRAWL_KAFKA_BOOTSTRAP"]})
    topics = client.list_topics(timeout=10).topics
    for topic in sorted(t for t in topics if t.startswith(args.match) and t.endswith(".pages")):
        print(json.dumps(report(topic, args)), flush=True)


if __name__ == "__main__":
    main()
