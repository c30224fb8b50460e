"""Kafka's default partitioner, each key hashed once.

aiokafka's ``DefaultPartitioner`` runs its pure-Python murmur2 over the key of every message
sent, a visible share of a saturated worker's profile (docs/performance.md, "Table reads and
the partitioner"), for keys that repeat all the time (every message of an origin is keyed by
that origin). ``key_partition`` gives exactly what ``DefaultPartitioner`` gives (Java's client
and librdkafka's ``murmur2_random`` agree on a non-empty key), remembering the last ``KEYS``
keys' hashes; ``agents.stream.tables.partition_for`` (the frontier agent's routing check of
every event) uses the same ``key_hash``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

from aiokafka.partitioner import murmur2

KEYS: Final = 16_384  # ~2.5 MB at most: keys are origins, a few hundred at a time


@lru_cache(maxsize=KEYS)
def key_hash(key: bytes) -> int:
    """Kafka's murmur2 of ``key``, made positive (``DefaultPartitioner``'s index before the
    modulo); remembered for the last ``KEYS`` keys."""
    hashed: int = murmur2(key)
    return hashed & 0x7FFFFFFF


def key_partition(
    key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]
) -> int:
    """The partition of ``key`` among ``all_partitions`` (sorted); a random available one
    (else any) for no key, as ``DefaultPartitioner``."""
    if key is None:
        return random.choice(available or all_partitions)
    return all_partitions[key_hash(bytes(key)) % len(all_partitions)]
