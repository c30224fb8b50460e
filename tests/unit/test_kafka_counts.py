"""Per-partition terminal-state counts: kept in the frontier agent's table, replay-safe,
published to the ``counts`` partition of the same number."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from streamcrawl.agents.frontier.store import Changes, MemoryStore
from streamcrawl.agents.stream.counts import (
    MAX_CRAWL_ERROR_CHARS,
    MAX_CRAWL_ERRORS,
    SLOWEST,
    CrawlCounts,
    Fetch,
    SlowOrigin,
    count,
    counts_key,
    decode_counts,
    message_key,
    note_fetch,
)
from streamcrawl.agents.stream.frontier_agent import Where
from streamcrawl.agents.stream.tables import partition_for
from streamcrawl.schemas.records import TerminalState, UrlStatus
from tests.unit.test_kafka_frontier import HERE, LINKS, PARTITIONS, make, outcome, seed

OUT = TerminalState.OUT_OF_SCOPE


def status(url: str, state: TerminalState, at: float = 10.0, crawl: str = "c") -> UrlStatus:
    return UrlStatus(
        crawl_id=crawl, url=url, origin="http://a.test", state=state, depth=0, updated_at=at
    )


def test_counts_add_up_per_crawl_and_a_replayed_offset_counts_nothing() -> None:
    store = MemoryStore()
    events = [
        ("outcomes", 5, [status("u1", TerminalState.FETCHED, 10.0)]),
        ("outcomes", 6, [status("u2", TerminalState.FETCHED, 14.0)]),
        ("frontier", 2, [status("x", OUT), status("y", TerminalState.CANCELLED, crawl="d")]),
        ("outcomes", 6, [status("u2", TerminalState.FETCHED, 14.0)]),  # replay
        ("frontier", 1, [status("x", OUT)]),  # replay of an older event
    ]  # fmt: skip
    for topic, offset, statuses in events:
        ch = Changes(store)
        assert count(ch, topic, 3, offset, statuses) is not None
        ch.commit()
    ch = Changes(store)
    assert count(ch, "outcomes", 3, 7, []) is None and ch.writes == {}
    raw = store.get(counts_key(3))
    assert raw is not None
    record = decode_counts(raw)
    assert record.partition == 3 and record.offsets == {"outcomes": 6, "frontier": 2}
    assert record.crawls["c"].states == {"fetched": 2, "out_of_scope": 1}
    assert (record.crawls["c"].first_fetched_at, record.crawls["c"].last_fetched_at) == (10, 14)
    assert record.crawls["d"].states == {"cancelled": 1}


def test_message_keys_land_on_their_partition() -> None:
    for partition in range(12):
        assert partition_for(message_key(partition, 12).decode(), 12) == partition


def test_the_agent_counts_each_event_once_and_publishes_the_partition_record() -> None:
    r = make()
    seed(r.agent)
    value = outcome(LINKS)
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), value))
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), value))  # replayed
    sent = [(k, v) for short, k, v in r.publish.attached if short == "counts"]
    assert len(sent) == 2 and sent[0] == sent[1]  # the replay re-sends the same record
    key, raw = sent[-1]
    assert partition_for(key.decode(), PARTITIONS) == HERE
    assert decode_counts(raw).crawls["c"].states == {"fetched": 1}


def test_a_status_that_replaces_another_moves_the_url_between_states() -> None:
    """Continuous crawling: a revisit that finds a URL gone reports ``gone`` replacing
    ``fetched``; the partition's count moves it instead of counting it twice."""
    import msgspec

    ch = Changes(MemoryStore())
    count(ch, "t.outcomes", 0, 1, [status("u1", TerminalState.FETCHED)])
    count(ch, "t.outcomes", 0, 2, [status("u2", TerminalState.FETCHED)])
    gone = msgspec.structs.replace(status("u1", TerminalState.GONE), previous=TerminalState.FETCHED)
    count(ch, "t.outcomes", 0, 3, [gone])
    count(ch, "t.outcomes", 0, 3, [gone])  # replayed: nothing moves twice
    raw = ch.get(counts_key(0))
    assert raw is not None
    assert decode_counts(raw).crawls["c"].states == {"fetched": 1, "gone": 1}


def test_the_agent_counts_refused_urls_and_times_the_fetch_once() -> None:
    """With a budget of 2 pages the outcome of the seed queues /a and refuses /b: the record
    says so (queue depth = admitted - ended + refused = 1) and times the seed's fetch."""
    r = make(max_pages=2)
    seed(r.agent)
    value = outcome(LINKS)  # started at 1.0, finished at 2.0
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), value))
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), value))  # replayed
    raw = [v for short, _, v in r.publish.attached if short == "counts"][-1]
    crawl = decode_counts(raw).crawls["c"]
    assert crawl.states == {"fetched": 1, "cancelled": 1}
    assert (crawl.admitted, crawl.refused) == (2, 1)
    assert crawl.slowest == [SlowOrigin("http://a.test", 1.0, 1)]  # once: the replay adds none


def fetch(origin: str, seconds: float, crawl: str = "c") -> Fetch:
    return (crawl, origin, seconds)


def test_a_measured_fetch_alone_updates_the_record_and_a_replay_does_not() -> None:
    """A retried fetch ends no URL but is timed (a timeout is what makes an origin slow)."""
    ch = Changes(MemoryStore())
    assert count(ch, "t.outcomes", 0, 1, [], fetch=fetch("http://s.test", 4.0)) is not None
    assert count(ch, "t.outcomes", 0, 1, [], fetch=fetch("http://s.test", 4.0)) is not None
    raw = ch.get(counts_key(0))
    assert raw is not None
    assert decode_counts(raw).crawls["c"].slowest == [SlowOrigin("http://s.test", 4.0, 1)]


@pytest.mark.parametrize(
    ("fetches", "expected"),
    [
        # one origin: exponentially smoothed, 0.2 of each new fetch
        ([("o1", 1.0), ("o1", 2.0), ("o1", 2.0)], [("o1", 1.36, 3)]),
        # room left: every origin enters
        ([("o1", 1.0), ("o2", 0.5)], [("o1", 1.0, 1), ("o2", 0.5, 1)]),
        # full: a slower fetch replaces the fastest listed, a faster one is not kept
        ([*((f"o{i}", float(i)) for i in range(1, 11)), ("new", 5.5), ("fast", 0.1)],
         [("new", 5.5, 1), *((f"o{i}", float(i), 1) for i in range(2, 11))]),
        # a negative span (clock step) counts as 0; rounded to the millisecond
        ([("o1", -3.0), ("o2", 0.12345)], [("o1", 0.0, 1), ("o2", 0.123, 1)]),
    ],
)  # fmt: skip
def test_the_slowest_origins_stay_bounded(
    fetches: list[tuple[str, float]], expected: list[tuple[str, float, int]]
) -> None:
    crawl = CrawlCounts()
    for origin, seconds in fetches:
        note_fetch(crawl, origin, seconds)
    assert len(crawl.slowest) <= SLOWEST
    got = sorted((s.origin, s.latency, s.fetches) for s in crawl.slowest)
    assert got == sorted(expected)


class OldCrawlCounts(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``CrawlCounts`` before ``refused`` and ``slowest``."""

    states: dict[str, int] = {}
    admitted: int | None = None


class OldPartitionCounts(msgspec.Struct, kw_only=True):
    v: int = 1
    partition: int
    offsets: dict[str, int] = {}
    crawls: dict[str, OldCrawlCounts] = {}
    updated_at: float = 0.0


def test_old_and_new_records_read_each_other() -> None:
    old = OldPartitionCounts(partition=2, crawls={"c": OldCrawlCounts(states={"fetched": 3})})
    new = decode_counts(msgspec.json.encode(old))  # a record written before the new fields
    assert new.crawls["c"].slowest == [] and new.crawls["c"].refused == 0
    ch = Changes(MemoryStore())
    count(ch, "t.outcomes", 2, 1, [status("u", OUT)], refused=[status("u", OUT)],
          fetch=fetch("http://s.test", 1.5))  # fmt: skip
    raw = ch.get(counts_key(2))
    assert raw is not None and b'"slowest":[["http://s.test",1.5,1]]' in raw
    back = msgspec.json.decode(raw, type=OldPartitionCounts)  # an older `status` reading it
    assert back.crawls["c"].states == {"out_of_scope": 1}


MISSING = "missing_plugin: price is not installed in this worker"


def failed(url: str, error: str, crawl: str = "c") -> UrlStatus:
    return msgspec.structs.replace(
        status(url, TerminalState.FAILED, crawl=crawl), attempts=0, last_error=error
    )


def test_a_crawls_own_errors_are_counted_once_per_event_and_bounded() -> None:
    """A URL that ended failed because of its crawl (a plugin the worker lacks) counts under
    its error; other failures do not; a replayed event counts nothing; at most
    ``MAX_CRAWL_ERRORS`` errors, each at most ``MAX_CRAWL_ERROR_CHARS``, per crawl."""
    store = MemoryStore()
    long = "missing_plugin: " + "x" * 2 * MAX_CRAWL_ERROR_CHARS
    others = [failed(f"o{i}", f"missing_plugin: p{i}") for i in range(MAX_CRAWL_ERRORS)]
    events = [
        (1, [failed("u1", MISSING), failed("u2", "timeout: read"), failed("d", MISSING, "d")]),
        (2, [failed("u3", MISSING), status("u4", TerminalState.FETCHED)]),
        (2, [failed("u3", MISSING)]),  # replay
        (3, [failed("u5", long), *others]),
    ]  # fmt: skip
    for offset, statuses in events:
        ch = Changes(store)
        count(ch, "frontier", 0, offset, statuses)
        ch.commit()
    raw = store.get(counts_key(0))
    assert raw is not None
    record = decode_counts(raw)
    errors = record.crawls["c"].errors
    assert len(errors) == MAX_CRAWL_ERRORS and errors[MISSING] == 2
    assert errors[long[:MAX_CRAWL_ERROR_CHARS]] == 1
    assert "missing_plugin: p7" not in errors and "timeout: read" not in errors  # over the bound
    assert record.crawls["c"].states["failed"] == 3 + 1 + MAX_CRAWL_ERRORS
    assert record.crawls["d"].errors == {MISSING: 1}
    plain = Changes(MemoryStore())  # a crawl without errors: no key in the record
    assert b"errors" not in (count(plain, "frontier", 0, 1, [failed("u", "timeout")]) or b"?")
