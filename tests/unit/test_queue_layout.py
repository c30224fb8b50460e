"""The segmented queue layout (agents/frontier/queue.py): writes per page, and every crash point
of a batch of the frontier agent."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import msgspec
import pytest

from streamcrawl.agents.frontier import queue
from streamcrawl.agents.frontier.queue import segment_key
from streamcrawl.agents.frontier.records import load_origin, origin_key, queued_entries
from streamcrawl.agents.frontier.store import SEGMENTS, Changes, MemoryStore
from streamcrawl.agents.stream.frontier_agent import FrontierAgent, Where
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.tables import STAGES, TableStore, write_stages
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import CrawlPolicy, OriginState, Outcome, QueueEntry
from tests.unit.test_frontier_batches import Recorder, agent, fetched, links
from tests.unit.test_kafka_frontier import HERE, ORIGIN, Hook, Publisher, View

SMALL = 4  # segment size in these tests: seals and deletions after a few URLs


@pytest.fixture
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue, "SEGMENT", SMALL)


def entry(i: int) -> QueueEntry:
    return QueueEntry(crawl_id="c", url=f"{ORIGIN}/{i}", depth=1)


def urls(store: TableStore | MemoryStore) -> list[str]:
    st = load_origin(store, ORIGIN)
    return [e.url for _, e in queued_entries(store, st, 1000)]


@pytest.mark.usefixtures("small_segments")
def test_segments_are_written_once_and_deleted_once_the_head_passed_them() -> None:
    store = MemoryStore()
    ch, st = Changes(store), OriginState(origin=ORIGIN)
    for i in range(10):
        queue.push(ch, st, st.tail, entry(i))
    assert sorted(k for k in ch.writes if k[:1] == SEGMENTS) == [
        segment_key(ORIGIN, 0),
        segment_key(ORIGIN, 1),
    ]
    assert len(st.inline) == 2  # seqs 8 and 9, in the origin's record
    ch.put(origin_key(ORIGIN), msgspec.msgpack.encode(st))
    ch.commit()
    ch = Changes(store)
    for seq in (1, 2, 0, 3):  # out of order: the head waits for 0
        queue.end(ch, st, seq)
        assert st.head == (4 if seq == 3 else 0 if seq != 0 else 3)
    assert ch.writes == {segment_key(ORIGIN, 0): None}
    assert [queue.entry_at(ch, st, s) for s in range(4, 10)] == [entry(i) for i in range(4, 10)]


@pytest.mark.usefixtures("small_segments")
def test_a_retry_in_a_sealed_segment_is_patched_in_the_record() -> None:
    ch, st = Changes(MemoryStore()), OriginState(origin=ORIGIN)
    for i in range(6):
        queue.push(ch, st, st.tail, entry(i))
    retried = msgspec.structs.replace(entry(1), attempts=1, last_error="timeout")
    queue.replace(ch, st, 1, retried)
    assert st.patched == {1: retried} and queue.entry_at(ch, st, 1) == retried
    queue.replace(ch, st, 5, retried)  # inline: in place
    assert st.inline[1] == retried and not set(st.patched) - {1}
    queue.end(ch, st, 1)
    assert st.patched == {} and st.done == [1]


@pytest.mark.usefixtures("small_segments")
@pytest.mark.parametrize("legacy_end", [-1, 0, 3])
def test_the_queue_is_read_from_its_segments_whatever_legacy_end_holds(legacy_end: int) -> None:
    """``OriginState.legacy_end`` belonged to an unreleased layout (a key per queued seq) and
    is no longer read or written (docs/compatibility.md)."""
    store = MemoryStore()
    ch, st = Changes(store), OriginState(origin=ORIGIN)
    for i in range(6):
        queue.push(ch, st, st.tail, entry(i))
    assert st.legacy_end == -1
    ch.commit()
    st.legacy_end = legacy_end
    assert [e for _, e in queued_entries(store, st, 10)] == [entry(i) for i in range(6)]


def crawl_writes(origins: int, pages: int, batch: int) -> tuple[int, int]:
    """Run a simulated crawl through the agent: ``origins`` origins of ``pages`` pages, each
    page linking the next two of its origin, outcomes applied ``batch`` events at a time.
    Returns (table writes, fetched pages)."""
    roots = [f"http://s{i}.test" for i in range(origins)]
    store = TableStore({}, {}, {})
    rec = Recorder(store)
    policy = CrawlPolicy(crawl_id="c", seeds=tuple(o + "/" for o in roots))
    a = FrontierAgent(
        store=store,
        view=View(policy),  # type: ignore[arg-type]
        publish=Publisher(),
        hook=Hook(),
        metrics=Metrics(),
        partitions=1,
        commit=rec,
    )
    seeds = [(Where("x.frontier", 0, i), links(o, "/")) for i, o in enumerate(roots)]
    asyncio.run(a.handle_batch(seeds))
    offset, done = 100, 0
    while True:
        events = []
        for o in roots:
            st = load_origin(store, o)
            for seq, e in queued_entries(store, st, batch // origins):
                n = int(e.url.rsplit("/", 1)[1] or 0)
                more = [f"/{k}" for k in (2 * n + 1, 2 * n + 2) if k < pages]
                events.append(
                    (Where("x.outcomes", 0, offset), fetched(o, seq, e.url[len(o) :], *more))
                )
                offset += 1
        if not events:
            break
        asyncio.run(a.handle_batch(events))
        done += len(events)
    writes = sum(len(w) for _, parts in rec.batches for w in parts.values())
    return writes, done


def test_a_page_costs_one_seen_mark_and_a_share_of_its_origins_record() -> None:
    """The layout's promise at the table level (bench/probes/kafka_probe.py measures the changelog):
    with up to 8 outcomes of an origin per batch, a page costs ~1.21 writes (1 seen mark, a
    share of its origin's record and of the partition's counters, 2/SEGMENT segment writes),
    where a key per queued URL would cost one more put and one delete per page."""
    writes, fetched_pages = crawl_writes(origins=4, pages=200, batch=32)
    assert fetched_pages == 800
    assert writes / fetched_pages <= 1.5


def batch_events() -> list[tuple[Where, bytes]]:
    """Outcomes ending seqs out of order across a segment boundary (a deletion), links that
    fill and seal a segment, a retry of a URL of a sealed segment, a duplicate."""
    retry = Outcome(
        crawl_id="c",
        origin=ORIGIN,
        kind="page",
        seq=5,
        url=ORIGIN + "/5",
        state="retry",
        error="timeout",
        started_at=9.0,
        finished_at=9.5,
    )
    return [
        (Where("x.outcomes", HERE, 20), fetched(ORIGIN, 1, "/1", "/a", "/b")),
        (Where("x.outcomes", HERE, 21), fetched(ORIGIN, 0, "/", "/c")),
        (Where("x.outcomes", HERE, 22), encode(retry)),
        (Where("x.frontier", HERE, 23), links(ORIGIN, "/d", "/e", "/a")),
        (Where("x.outcomes", HERE, 24), fetched(ORIGIN, 2, "/2", "/f", "/g")),
        (Where("x.outcomes", HERE, 25), fetched(ORIGIN, 3, "/3")),
    ]


def seeded() -> tuple[FrontierAgent, Recorder, TableStore]:
    """An origin with seqs 0-6 queued (one sealed segment of 4, three inline)."""
    a, rec, _, store = agent()
    seeds = ["/", "/1", "/2", "/3", "/4", "/5", "/6"]
    asyncio.run(a.handle_batch([(Where("x.frontier", HERE, 0), links(ORIGIN, *seeds))]))
    return a, rec, store


def crash_points() -> Iterator[tuple[int, tuple[int, ...]]]:
    """(stage, kept writes of that stage) for every crash point of the batch's commit."""
    normal, queue.SEGMENT = queue.SEGMENT, SMALL  # collected outside the fixture
    try:
        a, rec, _ = seeded()
        asyncio.run(a.handle_batch(batch_events()))
        stages = write_stages(rec.batches[-1][1][HERE])
    finally:
        queue.SEGMENT = normal
    for stage in range(STAGES):
        n = len(stages[stage])
        for k in range(n + 1):
            for kept in itertools.combinations(range(n), k):
                if n <= 6 or k in (0, 1, n - 1):
                    yield stage, kept


def statuses(rec: Recorder, last: int = 1) -> list[tuple[str, str]]:
    out = []
    for sends, _ in rec.batches[-last:]:
        out += [
            (s.url, str(s.state)) for s in (decode("status", v) for _, v in sends.get("status", []))
        ]
    return sorted(out)


def drain(a: FrontierAgent, store: TableStore) -> list[tuple[str, str]]:
    """Fetch everything still queued (each URL once), as the scheduler would after recovery."""
    out: list[tuple[str, str]] = []
    offset = 1000
    while True:
        st = load_origin(store, ORIGIN)
        queued = queued_entries(store, st, 1000)
        if not queued:
            return out
        rec = a.commit
        assert isinstance(rec, Recorder)
        for seq, e in queued:
            asyncio.run(
                a.handle(
                    Where("x.outcomes", HERE, offset), fetched(ORIGIN, seq, e.url[len(ORIGIN) :])
                )
            )
            offset += 1
            out += statuses(rec)


@pytest.mark.usefixtures("small_segments")
@pytest.mark.parametrize(("stage", "kept"), list(crash_points()))
def test_every_crash_point_of_a_segmented_batch_ends_each_url_exactly_once(
    stage: int, kept: tuple[int, ...]
) -> None:
    """kill -9 in the staged commit of a batch that seals, deletes, patches and ends seqs out
    of order: the replay sends the same statuses, queues the same URLs (none twice), and once
    the queue is drained every admitted URL has exactly one terminal status."""
    full_agent, full, full_store = seeded()
    asyncio.run(full_agent.handle_batch(batch_events()))
    expected_queue = urls(full_store)
    stages = write_stages(full.batches[-1][1][HERE])

    a, rec, store = seeded()
    for earlier in stages[:stage]:
        store.write(dict(earlier))
    store.write(dict(stages[stage][i] for i in kept))
    asyncio.run(a.handle_batch(batch_events()))  # the replay
    assert statuses(rec) == statuses(full)
    assert urls(store) == expected_queue
    ended = statuses(rec) + drain(a, store)
    admitted = {f"{ORIGIN}{p}" for p in ("/", "/1", "/2", "/3", "/4", "/5", "/6")}
    admitted |= {f"{ORIGIN}/{c}" for c in "abcdefg"}
    assert sorted(u for u, _ in ended) == sorted(admitted)  # each exactly once
    assert not [k for k in store._tables[SEGMENTS[0]] if k[:1] == SEGMENTS]  # nothing left
