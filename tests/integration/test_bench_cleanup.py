"""A bench run deletes its own topics and keyspace when it ends, and nothing else."""

from __future__ import annotations

import sys
import time
from typing import Any

from confluent_kafka.admin import NewTopic

from bench import kafka_topology


def test_drop_run_state_deletes_the_runs_topics_and_keyspace(
    kafka_admin: Any,
    kafka_bootstrap: str,
    cassandra_hosts: str,
    _cassandra_admin: Any,
    cassandra_keyspace: str,
    topic_prefix: str,
) -> None:
    run, other = f"bench-{topic_prefix}", f"other-{topic_prefix}"
    names = [f"{run}-frontier", f"{run}-crawl-frontier-changelog", f"{other}-frontier"]
    for future in kafka_admin.create_topics([NewTopic(n, 2, 1) for n in names]).values():
        future.result()
    env = {
        "STREAMCRAWL_TOPIC_PREFIX": run,
        "STREAMCRAWL_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "STREAMCRAWL_CASSANDRA_HOSTS": cassandra_hosts,
        "STREAMCRAWL_CASSANDRA_KEYSPACE": cassandra_keyspace,
    }
    try:
        kafka_topology._drop_run_state(sys.executable, env)
        deadline = time.monotonic() + 10  # a deleted topic may stay in metadata a moment
        while True:
            left = {t for t in kafka_admin.list_topics(timeout=30).topics if topic_prefix in t}
            if len(left) == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        keyspaces = {
            r.keyspace_name
            for r in _cassandra_admin.execute("SELECT keyspace_name FROM system_schema.keyspaces")
        }
        assert left == {f"{other}-frontier"}
        assert cassandra_keyspace not in keyspaces
    finally:
        kafka_admin.delete_topics([f"{other}-frontier"])
