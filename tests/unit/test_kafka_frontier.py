"""The frontier agent's body over dict tables: an outcome and its own-origin links are one
state change, sent before it is committed, and a replay changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from agents.frontier import load_origin, pending_key
from agents.kafka_frontier import FrontierAgent, Where
from agents.kafka_state import TableStore, partition_for
from agents.metrics import Metrics
from agents.rules import CrawlRules
from schemas.codec import decode, encode
from schemas.records import CrawlPolicy, FrontierBatch, OriginState, Outcome, UrlRef

ORIGIN = "http://a.test"
PARTITIONS = 4
HERE = partition_for(ORIGIN, PARTITIONS)


class View:
    def __init__(self, policy: CrawlPolicy) -> None:
        self.rules = CrawlRules.from_policy(policy)

    async def wait_rules(self, crawl_id: str, timeout: float) -> CrawlRules | None:
        return self.rules if crawl_id == self.rules.policy.crawl_id else None

    def admitted_elsewhere(self, crawl_id: str, partition: int, partitions: int) -> int:
        return 0


class Hook:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def admitted(self, state: OriginState) -> None:
        self.calls.append(("admitted", state))

    def applied(self, origin: str, seq: int, state: OriginState) -> None:
        self.calls.append(("applied", (seq, state)))

    def caught_up(self, partition: int, token: bytes) -> None:
        self.calls.append(("caught_up", partition))


class Publisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.attached: list[tuple[str, bytes, bytes]] = []  # sent with the offset commit
        self.fail = False

    async def __call__(
        self, short: str, items: Sequence[tuple[bytes, bytes]], *, on_commit: bool = False
    ) -> None:
        if self.fail and not on_commit:  # attaching does not talk to Kafka
            raise ConnectionError("broker down")
        (self.attached if on_commit else self.sent).extend((short, k, v) for k, v in items)

    def statuses(self, *, attached: bool = False) -> list[tuple[str, str]]:
        out = []
        for short, _, value in self.attached if attached else self.sent:
            if short == "status":
                s = decode("status", value)
                out.append((s.url, str(s.state)))
        return out


@dataclass
class Rig:
    agent: FrontierAgent
    tables: dict[str, dict[bytes, bytes]]
    publish: Publisher
    hook: Hook


def make(max_pages: int | None = None) -> Rig:
    tables: dict[str, dict[bytes, bytes]] = {"seen": {}, "pending": {}, "origins": {}}
    store = TableStore(tables["seen"], tables["pending"], tables["origins"])
    policy = CrawlPolicy(crawl_id="c", seeds=(ORIGIN + "/",), max_pages=max_pages)
    publish, hook = Publisher(), Hook()
    agent = FrontierAgent(
        store=store,
        view=View(policy),  # type: ignore[arg-type]
        publish=publish,
        hook=hook,
        metrics=Metrics(),
        partitions=PARTITIONS,
    )
    return Rig(agent, tables, publish, hook)


def outcome(links: tuple[UrlRef, ...]) -> bytes:
    return encode(
        Outcome(
            crawl_id="c",
            origin=ORIGIN,
            kind="page",
            seq=0,
            url=ORIGIN + "/",
            state="fetched",
            status=200,
            started_at=1.0,
            finished_at=2.0,
            links=links,
        )
    )


def seed(agent: FrontierAgent) -> None:
    batch = FrontierBatch(crawl_id="c", origin=ORIGIN, urls=(UrlRef(ORIGIN + "/", 0),))
    asyncio.run(agent.handle(Where("x.frontier", HERE, 0), encode(batch)))


LINKS = (
    UrlRef(ORIGIN + "/a", 1, ORIGIN + "/"),
    UrlRef(ORIGIN + "/b?utm_source=x", 1, ORIGIN + "/"),
    UrlRef(ORIGIN + "/", 1, ORIGIN + "/"),  # the page itself: a duplicate
)


def test_outcome_links_are_admitted_and_the_outcome_applied_in_one_change() -> None:
    r = make()
    seed(r.agent)
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), outcome(LINKS)))
    store = r.agent.store
    state = load_origin(store, ORIGIN)
    assert (state.head, state.tail) == (1, 3)  # root done, /a and /b queued
    assert store.get(pending_key(ORIGIN, 0)) is None
    assert {store.get(pending_key(ORIGIN, s)) is not None for s in (1, 2)} == {True}
    assert r.publish.statuses() == []  # nothing awaited: the page's status rides the commit
    assert r.publish.statuses(attached=True) == [(ORIGIN + "/", "fetched")]
    assert [name for name, _ in r.hook.calls] == ["admitted", "applied"]  # seed, then outcome
    assert r.hook.calls[-1][1] == (0, state)  # told the final state, not the one before apply


def test_a_replayed_outcome_queues_nothing_twice() -> None:
    r = make()
    seed(r.agent)
    value = outcome(LINKS)
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), value))
    before = {name: dict(t) for name, t in r.tables.items()}
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), value))
    assert {name: dict(t) for name, t in r.tables.items()} == before
    # The status is attached again: a crash may have lost the first one with the commit.
    first, again = r.publish.attached
    assert first == again


def test_nothing_is_committed_when_admission_statuses_cannot_be_sent() -> None:
    """Statuses of links ended at admission (here: over the page budget) are awaited before
    the commit: a replay finds those URLs seen and would never send them."""
    r = make(max_pages=2)
    seed(r.agent)
    before = {name: dict(t) for name, t in r.tables.items()}
    r.publish.fail = True
    with pytest.raises(ConnectionError):
        asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), outcome(LINKS)))
    assert {name: dict(t) for name, t in r.tables.items()} == before
    r.publish.fail = False  # the event is redelivered (no commit): applied exactly once
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), outcome(LINKS)))
    state = load_origin(r.agent.store, ORIGIN)
    assert (state.head, state.tail) == (1, 2)
    assert r.publish.statuses() == [(ORIGIN + "/b", "cancelled")]
    assert r.publish.statuses(attached=True) == [(ORIGIN + "/", "fetched")]


def test_outcome_links_count_against_the_page_budget() -> None:
    r = make(max_pages=2)
    seed(r.agent)
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), outcome(LINKS)))
    states = dict(r.publish.statuses())
    assert states[ORIGIN + "/b"] == "cancelled"  # over the budget: root + /a only
    budget = [v for short, _, v in r.publish.sent if short == "budget"]
    assert budget[-1] == b"2"
