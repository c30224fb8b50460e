"""Per-partition terminal-state counts: kept in the frontier agent's table, replay-safe,
published to the ``counts`` partition of the same number."""

from __future__ import annotations

import asyncio

from streamcrawl.agents.frontier.store import Changes, MemoryStore
from streamcrawl.agents.stream.counts import count, counts_key, decode_counts, message_key
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
