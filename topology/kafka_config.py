"""Base configuration of the project's confluent-kafka producers.

Every topic is keyed by origin and partitioned like Faust/aiokafka/Java (murmur2 of the key
bytes, ARCHITECTURE §2). librdkafka's default partitioner is CRC32 (``consistent_random``),
which sends the same key to a different partition: a seed produced with it would land on a
partition whose frontier agent does not own that origin. So every confluent-kafka producer
starts from :func:`producer_config`.
"""

from __future__ import annotations

from typing import Any

PARTITIONER = "murmur2_random"


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """confluent-kafka ``Producer`` settings for ``bootstrap`` with murmur2 key partitioning.

    ``extra`` adds librdkafka settings; dotted names go through a mapping, e.g.
    ``producer_config(bootstrap, acks="all", **{"linger.ms": 5})``. Raises ``ValueError`` if
    ``extra`` asks for another partitioner: that would break key -> partition agreement.
    """
    partitioner = extra.pop("partitioner", PARTITIONER)
    if partitioner != PARTITIONER:
        raise ValueError(
            f"partitioner={partitioner!r} would place origin keys on other partitions than "
            f"Faust/aiokafka; streamcrawl producers must use {PARTITIONER!r}"
        )
    return {"bootstrap.servers": bootstrap, "partitioner": PARTITIONER, **extra}
