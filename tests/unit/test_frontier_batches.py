"""The frontier agent in batches, without Kafka: one overlay per partition, each key written
once, a marker commits what came before it, and a crash anywhere in the staged commit of a
batch (every stage whole before it, any subset of its own) loses no URL and no status."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from streamcrawl.agents.frontier.records import load_origin, origin_key, queued_entries
from streamcrawl.agents.frontier.store import Value
from streamcrawl.agents.stream.frontier_agent import MARKER, Enter, FrontierAgent, Where
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.tables import STAGES, TableStore, partition_for, write_stages
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Outcome, UrlRef
from tests.unit.test_kafka_frontier import HERE, ORIGIN, PARTITIONS, Hook, Publisher, View

OTHER = next(
    f"http://o{i}.test"
    for i in range(100)
    if partition_for(f"http://o{i}.test", PARTITIONS) != HERE
)
THERE = partition_for(OTHER, PARTITIONS)


class Recorder:
    """A committer that keeps every batch it was given and writes it through."""

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self.batches: list[tuple[dict[str, list[tuple[bytes, bytes]]], dict[int, Any]]] = []
        self.entered: list[int] = []

    async def __call__(
        self,
        sends: Mapping[str, Sequence[tuple[bytes, bytes]]],
        writes: Mapping[int, Mapping[bytes, Value]],
        enter: Enter,
    ) -> None:
        self.batches.append(
            ({k: list(v) for k, v in sends.items()}, {p: dict(w) for p, w in writes.items()})
        )
        for partition, changes in writes.items():
            enter(partition)
            self.store.write(changes)


def agent(max_pages: int | None = None) -> tuple[FrontierAgent, Recorder, Hook, TableStore]:
    store = TableStore({}, {}, {})
    policy = CrawlPolicy(crawl_id="c", seeds=(ORIGIN + "/",), max_pages=max_pages)
    hook, recorder = Hook(), Recorder(store)
    a = FrontierAgent(
        store=store,
        view=View(policy),  # type: ignore[arg-type]
        publish=Publisher(),
        hook=hook,
        metrics=Metrics(),
        partitions=PARTITIONS,
        commit=recorder,
    )
    return a, recorder, hook, store


def links(origin: str, *paths: str) -> bytes:
    urls = tuple(UrlRef(origin + p, 1, origin + "/") for p in paths)
    return encode(FrontierBatch(crawl_id="c", origin=origin, urls=urls))


def fetched(origin: str, seq: int, path: str, *more: str) -> bytes:
    return encode(
        Outcome(
            crawl_id="c",
            origin=origin,
            kind="page",
            seq=seq,
            url=origin + path,
            state="fetched",
            status=200,
            started_at=1.0 + seq,
            finished_at=1.5 + seq,
            links=tuple(UrlRef(origin + p, 1, origin + path) for p in more),
        )
    )


def statuses(sends: Mapping[str, Sequence[tuple[bytes, bytes]]]) -> list[tuple[str, str]]:
    return sorted(
        (s.url, str(s.state)) for s in (decode("status", v) for _, v in sends.get("status", []))
    )


def test_a_batch_is_one_overlay_per_partition_and_writes_each_key_once() -> None:
    a, rec, hook, store = agent()
    asyncio.run(
        a.handle_batch(
            [
                (Where("x.frontier", HERE, 0), links(ORIGIN, "/", "/a")),
                (Where("x.frontier", HERE, 1), links(ORIGIN, "/b", "/a")),
                (Where("x.frontier", THERE, 0), links(OTHER, "/")),
            ]
        )
    )
    assert len(rec.batches) == 1  # one commit for the three events
    sends, writes = rec.batches[0]
    assert set(writes) == {HERE, THERE}
    assert statuses(sends) == [(OTHER + "/", "out_of_scope")]  # not a host of the crawl
    # The origin state was changed by two events but is written once, with both changes.
    assert origin_key(ORIGIN) in writes[HERE]
    state = load_origin(store, ORIGIN)
    assert (state.head, state.tail) == (0, 3)
    assert [e.url for _, e in queued_entries(store, state, 10)] == [
        ORIGIN + p for p in ("/", "/a", "/b")
    ]
    assert [name for name, _ in hook.calls] == ["admitted", "admitted"]  # in event order


def test_a_marker_inside_a_batch_commits_what_came_before_it_first() -> None:
    a, rec, hook, store = agent()
    seen_at_marker: list[int] = []
    hook.caught_up = lambda p, t: seen_at_marker.append(load_origin(store, ORIGIN).tail)  # type: ignore[method-assign]
    asyncio.run(
        a.handle_batch(
            [
                (Where("x.frontier", HERE, 0), links(ORIGIN, "/", "/a")),
                (Where("x.outcomes", HERE, 0), MARKER + b"token"),
                (Where("x.frontier", HERE, 1), links(ORIGIN, "/b")),
            ]
        )
    )
    assert seen_at_marker == [2]  # the scheduler indexes the partition with /, /a applied
    assert len(rec.batches) == 2


def test_the_scheduler_and_the_budget_see_each_partition_entered() -> None:
    a, rec, _, _ = agent(max_pages=10)
    entered: list[int] = []
    asyncio.run(
        a.handle_batch(
            [
                (Where("x.frontier", HERE, 0), links(ORIGIN, "/")),
                (Where("x.frontier", THERE, 0), links(OTHER, "/")),
            ],
            entered.append,
        )
    )
    # Each event, each budget count, each write and each scheduler call runs in its partition.
    assert set(entered) == {HERE, THERE}
    sends, _ = rec.batches[0]
    assert [v for _, v in sends["budget"]] == [b"1"]  # OTHER queued nothing (out of scope)


def batch_events() -> list[tuple[Where, bytes]]:
    """A batch as the agent sees it under load: links of several events, then outcomes."""
    return [
        (Where("x.outcomes", HERE, 10), fetched(ORIGIN, 0, "/", "/a", "/b")),
        (Where("x.frontier", HERE, 11), links(ORIGIN, "/c", "/a")),
        (Where("x.outcomes", HERE, 12), fetched(ORIGIN, 1, "/a", "/d")),
    ]


def seeded() -> tuple[FrontierAgent, Recorder, TableStore]:
    a, rec, _, store = agent(max_pages=5)
    asyncio.run(a.handle_batch([(Where("x.frontier", HERE, 0), links(ORIGIN, "/"))]))
    return a, rec, store


def crashes() -> list[tuple[int, tuple[int, ...]]]:
    """(stage, kept writes of that stage) for every crash point of the batch's staged commit."""
    a, rec, _ = seeded()
    asyncio.run(a.handle_batch(batch_events()))
    stages = write_stages(rec.batches[-1][1][HERE])
    out = []
    for stage in range(STAGES):
        n = len(stages[stage])
        subsets = itertools.chain.from_iterable(
            itertools.combinations(range(n), k) for k in range(n + 1)
        )
        out += [(stage, kept) for kept in subsets if n <= 6 or len(kept) in (0, 1, n - 1)]
    return out


@pytest.mark.parametrize(("stage", "kept"), crashes())
def test_a_crash_anywhere_in_a_staged_commit_loses_nothing(
    stage: int, kept: tuple[int, ...]
) -> None:
    """kill -9 during the commit of a batch: every earlier stage durable, any subset of the
    current one, no status delivered, no offset committed. The replay of the same events over
    that state queues every URL (a refetch at worst) and sends every terminal status again."""
    full_agent, full, _ = seeded()
    asyncio.run(full_agent.handle_batch(batch_events()))
    full_sends, full_writes = full.batches[-1]
    stages = write_stages(full_writes[HERE])

    a, rec, store = seeded()
    for earlier in stages[:stage]:
        store.write(dict(earlier))
    store.write(dict(stages[stage][i] for i in kept))
    asyncio.run(a.handle_batch(batch_events()))  # the replay
    sends, _ = rec.batches[-1]
    assert statuses(sends) == statuses(full_sends)
    state = load_origin(store, ORIGIN)
    entries = [e.url for _, e in queued_entries(store, state, 100)]
    assert sorted(entries) == [ORIGIN + p for p in ("/b", "/c", "/d")]  # none lost, none twice
