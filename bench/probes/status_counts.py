"""``status`` on a synthetic crawl of 1 M URL states: how long and how many messages it reads.

``python -m bench.probes.status_counts [--partitions 12] [--states 1000000] [--runs 5]`` creates
topics under a fresh prefix on ``STREAMCRAWL_KAFKA_BOOTSTRAP``, writes for every partition 20
superseded counts messages and then its final one (the frontier agents' ``counts`` records,
summing to ``--states``), and times ``kafka_status.read_status`` in-process (wall and this
process's CPU) and the ``streamcrawl status --json`` command (wall, interpreter start
included). Prints one JSON line per run and the medians. No crawl, no Cassandra.

Informs: whether ``streamcrawl status`` can read a crawl's counts from the ``counts`` topic
rather than from Cassandra's rows, at 1 M URL states (docs/performance.md, "status on 1 M URL
states").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import msgspec


def main(partitions: int, states: int, runs: int) -> None:
    from confluent_kafka import Producer

    from streamcrawl.agents.stream.counts import CrawlCounts, PartitionCounts
    from streamcrawl.topology.admin import config as admin_config
    from streamcrawl.topology.admin import status as kafka_status
    from streamcrawl.topology.admin import topics as admin
    from streamcrawl.topology.settings import load_settings

    prefix = "bench-status-" + uuid.uuid4().hex[:8]
    settings = load_settings(topic_prefix=prefix, partitions=partitions)
    admin.create_topics(settings)
    producer = Producer(admin_config.librdkafka_producer_config(settings))
    share = states // partitions
    for p in range(partitions):
        n = share + (states - share * partitions if p == 0 else 0)
        for i in range(21):
            fetched = n if i == 20 else i
            record = PartitionCounts(
                partition=p, crawls={"big": CrawlCounts(states={"fetched": fetched})}
            )
            producer.produce(
                f"{prefix}.counts", key=b"k", value=msgspec.json.encode(record), partition=p
            )
    assert producer.flush(30) == 0
    cli = str(Path(sys.executable).parent / "streamcrawl")
    rows = []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        stats, _lag, _revisits = kafka_status.read_status(settings)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert stats["big"].states["fetched"] == states, stats
        t0 = time.perf_counter()
        out = subprocess.run(
            [cli, "status", "--json", "--crawl-id", "big"],
            env={**os.environ, "STREAMCRAWL_TOPIC_PREFIX": prefix},
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        cli_wall = time.perf_counter() - t0
        assert json.loads(out.stdout)["states"]["fetched"] == states
        row = {"read_wall_s": wall, "read_cpu_s": cpu, "cli_wall_s": cli_wall}
        rows.append(row)
        print(json.dumps(row))
    medians = {k: round(statistics.median(r[k] for r in rows), 4) for k in rows[0]}
    print(json.dumps({"partitions": partitions, "states": states, "median": medians}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    main(a.partitions, a.states, a.runs)
