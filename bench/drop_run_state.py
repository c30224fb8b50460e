"""Delete one bench run's topics (names starting with the run's topic prefix) and its
keyspace, on the services its settings name (``STREAMCRAWL_*``, as the workers read them, with
their credentials and TLS). Kept, they made every later run on the same services dearer: a
session of runs left the shared broker 3,162 partitions, and the same code measured 5.27, 6.68
and 8.94 ms/page within an hour as they grew. Run by ``bench.kafka_topology`` in the streamcrawl
venv once a run's workers stopped: ``python -m bench.drop_run_state``."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from streamcrawl.agents.sinks.cassandra.driver import connect
from streamcrawl.topology.admin.config import librdkafka_config
from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.admin.topics import existing_partitions
from streamcrawl.topology.settings import Settings, load_settings


def drop_topics(settings: Settings) -> None:
    """Delete every topic whose name starts with the settings' prefix."""
    errors = ConnectionErrors()
    admin = AdminClient(librdkafka_config(settings) | errors.config())
    topics = [
        t
        for t in existing_partitions(admin, settings, errors)
        if t.startswith(settings.topic_prefix)
    ]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=60).values():
            future.result()


def drop_keyspace(settings: Settings) -> None:
    """Drop the settings' keyspace if it exists."""
    cluster, session = connect(settings.cassandra_config())
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {settings.cassandra_keyspace}", timeout=120)
    finally:
        cluster.shutdown()


def main() -> None:
    settings = load_settings()
    drop_topics(settings)
    drop_keyspace(settings)


if __name__ == "__main__":
    main()
