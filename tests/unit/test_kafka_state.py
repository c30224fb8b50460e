"""TableStore (the frontier's Store over Faust tables) and the origin -> partition mapping,
without Kafka: the tables are dicts, which is all TableStore asks of a Faust table."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.queue import SEGMENT, segment_key
from streamcrawl.agents.frontier.records import load_origin, origin_key, queued_entries
from streamcrawl.agents.frontier.store import (
    META,
    ORIGINS,
    PENDING,
    SEEN,
    SEGMENTS,
    Changes,
    MemoryStore,
)
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.tables import TableStore, partition_for, write_order
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Outcome, UrlRef

ORIGIN = "http://a.test"


class Recording(dict[bytes, bytes]):
    """A dict that logs writes, in order, into a shared journal."""

    def __init__(self, journal: list[tuple[str, bytes]]) -> None:
        super().__init__()
        self.journal = journal

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.journal.append(("put", key))
        super().__setitem__(key, value)

    def __delitem__(self, key: bytes) -> None:
        self.journal.append(("del", key))
        super().__delitem__(key)


def tables() -> tuple[TableStore, dict[str, Recording], list[tuple[str, bytes]]]:
    journal: list[tuple[str, bytes]] = []
    t = {name: Recording(journal) for name in ("seen", "pending", "origins")}
    return TableStore(t["seen"], t["pending"], t["origins"]), t, journal


def rules() -> CrawlRules:
    return CrawlRules.from_policy(CrawlPolicy(crawl_id="c", seeds=(ORIGIN + "/",), delay=0.0))


def batch(*paths: str) -> FrontierBatch:
    return FrontierBatch(
        crawl_id="c", origin=ORIGIN, urls=tuple(UrlRef(ORIGIN + p, 1) for p in paths)
    )


def test_namespaces_map_to_their_tables() -> None:
    store, t, _ = tables()
    store.write({SEEN + b"x": b"1", PENDING + b"y": b"2", ORIGINS + b"z": b"3", META + b"m": b"4"})
    assert set(t["seen"]) == {SEEN + b"x"}
    assert set(t["pending"]) == {PENDING + b"y"}
    assert set(t["origins"]) == {ORIGINS + b"z", META + b"m"}  # META moves with the partition
    assert store.get(PENDING + b"y") == b"2" and store.get(SEEN + b"nope") is None
    store.write({PENDING + b"y": None, PENDING + b"absent": None})  # deleting nothing is fine
    assert store.get(PENDING + b"y") is None
    assert list(store.scan(ORIGINS)) == [(ORIGINS + b"z", b"3")]


def test_unknown_namespace_is_an_error() -> None:
    store, _, _ = tables()
    with pytest.raises(ValueError, match="namespace"):
        store.get(b"zzz")


def test_write_order_queues_before_marking_seen_and_deletes_last() -> None:
    store, _, journal = tables()
    f = Frontier(clock=lambda: 10.0)
    ch = Changes(store)
    paths = [f"/{i}" for i in range(SEGMENT + 2)]
    f.admit(ch, batch(*paths), rules(), budget=None)
    ch.commit()
    kinds = [key[:1] for _, key in journal]
    # the sealed segment first, the seen marks, the origin (open segment inline), the counter
    assert kinds == [SEGMENTS] + [SEEN] * len(paths) + [ORIGINS, META]
    journal.clear()
    ch = Changes(store)
    for seq, path in enumerate(paths[:SEGMENT]):
        out = Outcome(
            crawl_id="c",
            origin=ORIGIN,
            kind="page",
            seq=seq,
            url=ORIGIN + path,
            state="fetched",
            started_at=11.0,
            finished_at=11.1,
        )
        f.apply(ch, out, rules())
    ch.commit()
    assert journal == [("put", origin_key(ORIGIN)), ("del", segment_key(ORIGIN, 0))]


def test_write_order_is_stable_within_a_namespace() -> None:
    changes: dict[bytes, bytes | None] = {
        SEEN + b"1": b"",
        PENDING + b"2": b"",
        PENDING + b"1": b"",
    }
    assert [k for k, _ in write_order(changes)] == [PENDING + b"2", PENDING + b"1", SEEN + b"1"]


@pytest.mark.parametrize("cut", range(SEGMENT + 6))
def test_a_crash_after_any_prefix_of_an_admit_loses_no_url(cut: int) -> None:
    """Apply only the first ``cut`` writes of a commit (kill -9 mid-commit), then replay the
    event (as the frontier agent does: with its position as ``source``) over that state:
    every URL ends queued exactly once, never lost, never twice."""
    f = Frontier(clock=lambda: 10.0)
    full = Changes(MemoryStore())
    paths = [f"/{i}" for i in range(SEGMENT + 2)]  # one sealed segment, two inline
    f.admit(full, batch(*paths), rules(), budget=None, source=b"t/0@5")
    prefix = dict(write_order(full.writes)[:cut])
    store, _, _ = tables()
    store.write(prefix)
    ch = Changes(store)
    f.admit(ch, batch(*paths), rules(), budget=None, source=b"t/0@5")
    ch.commit()
    st = load_origin(store, ORIGIN)
    urls = [e.url for _, e in queued_entries(store, st, 100)]
    assert urls == [ORIGIN + p for p in paths]


def test_frontier_over_tables_matches_the_memory_store() -> None:
    results: list[Any] = []
    for store in (tables()[0], MemoryStore()):
        f = Frontier(clock=lambda: 10.0, jitter=lambda: 0.5)
        ch = Changes(store)
        adm = f.admit(ch, batch("/a", "/b", "/a"), rules(), budget=1)
        ch.commit()
        results.append(
            (
                [e.url for _, e in adm.queued],
                [s.state for s in adm.statuses],
                adm.duplicates,
                load_origin(store, ORIGIN),
            )
        )
    assert results[0] == results[1]


@pytest.mark.parametrize("partitions", [1, 3, 6, 12, 100])
def test_partition_for_matches_the_aiokafka_default_partitioner(partitions: int) -> None:
    partitioner = DefaultPartitioner()
    parts = list(range(partitions))
    for i in range(200):
        origin = f"http://host{i}.example:{8000 + i}"
        assert partition_for(origin, partitions) == partitioner(origin.encode(), parts, parts)


def test_partition_for_uses_kafka_murmur2() -> None:
    # Test vectors of org.apache.kafka.common.utils.UtilsTest#testMurmur2 (Java, signed).
    assert partition_for("21", 2**31 - 1) == (-973932308 & 0x7FFFFFFF) % (2**31 - 1)
    assert partition_for("foobar", 1000) == (-790332482 & 0x7FFFFFFF) % 1000
