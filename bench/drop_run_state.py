"""Delete one bench run's topics (names starting with ``STREAMCRAWL_TOPIC_PREFIX``) and its
keyspace (``STREAMCRAWL_CASSANDRA_KEYSPACE``), on the services the environment names. Kept,
they made every later run on the same services dearer: a session of runs left the shared
broker 3,162 partitions, and the same code measured 5.27, 6.68 and 8.94 ms/page within an hour
as they grew. Run by ``bench.kafka_runner`` in the streamcrawl venv once a run's workers
stopped: ``python -m bench.drop_run_state``."""

from __future__ import annotations

import os

from cassandra.cluster import Cluster
from confluent_kafka.admin import AdminClient


def main() -> None:
    prefix = os.environ["STREAMCRAWL_TOPIC_PREFIX"]
    admin = AdminClient({"bootstrap.servers": os.environ["STREAMCRAWL_KAFKA_BOOTSTRAP"]})
    topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(prefix)]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=60).values():
            future.result()
    host, _, port = os.environ["STREAMCRAWL_CASSANDRA_HOSTS"].split(",")[0].rpartition(":")
    cluster = Cluster([host], port=int(port))
    try:
        keyspace = os.environ["STREAMCRAWL_CASSANDRA_KEYSPACE"]
        cluster.connect().execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
