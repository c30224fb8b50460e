"""The frontier agent's body over dict tables: an outcome and its own-origin links are one
state change, its sends ride the offset commit, and a replay changes nothing but repeats them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamcrawl.agents.frontier.queue import entry_at
from streamcrawl.agents.frontier.records import load_origin
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.frontier_agent import FrontierAgent, Where
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import (
    CrawlPolicy,
    FrontierBatch,
    OriginState,
    Outcome,
    SlotMessage,
    UrlRef,
)

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

    def slot(self, message: SlotMessage) -> None:
        self.calls.append(("slot", message))


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


def make(max_pages: int | None = None, allow_hosts: tuple[str, ...] = ()) -> Rig:
    tables: dict[str, dict[bytes, bytes]] = {"seen": {}, "pending": {}, "origins": {}}
    store = TableStore(tables["seen"], tables["pending"], tables["origins"])
    policy = CrawlPolicy(
        crawl_id="c", seeds=(ORIGIN + "/",), max_pages=max_pages, allow_hosts=allow_hosts
    )
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
    assert entry_at(store, state, 0) is None
    assert {entry_at(store, state, s) is not None for s in (1, 2)} == {True}
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
    first, again = [m for m in r.publish.attached if m[0] != "counts"]
    assert first == again


def test_nothing_is_awaited_and_a_replay_repeats_every_status_of_its_event() -> None:
    """Statuses ride the offset commit; a crash before it loses them with the commit, so the
    replayed event must send them again, including those of links it ended at admission (over
    the budget), which it finds already seen. Another event linking them again sends nothing."""
    r = make(max_pages=2)
    seed(r.agent)
    r.publish.fail = True  # any awaited send would raise: nothing may be awaited
    where = Where("x.outcomes", HERE, 7)
    asyncio.run(r.agent.handle(where, outcome(LINKS)))
    first = sorted(r.publish.statuses(attached=True))
    assert first == [(ORIGIN + "/", "fetched"), (ORIGIN + "/b", "cancelled")]
    r.publish.attached.clear()  # kill -9 before the commit: the attachments are gone
    asyncio.run(r.agent.handle(where, outcome(LINKS)))
    assert sorted(r.publish.statuses(attached=True)) == first
    r.publish.attached.clear()
    again = FrontierBatch(crawl_id="c", origin=ORIGIN, urls=(UrlRef(ORIGIN + "/b", 2),))
    asyncio.run(r.agent.handle(Where("x.frontier", HERE, 8), encode(again)))
    assert r.publish.statuses(attached=True) == []  # a plain duplicate: already ended


def test_a_replayed_batch_repeats_the_statuses_of_the_urls_it_ended() -> None:
    r = make(max_pages=1)
    seed(r.agent)
    batch = FrontierBatch(
        crawl_id="c",
        origin=ORIGIN,
        urls=(UrlRef(ORIGIN + "/x", 1), UrlRef(ORIGIN + "/x", 1), UrlRef("ftp://a.test/", 1)),
    )
    where = Where("x.frontier", HERE, 3)
    asyncio.run(r.agent.handle(where, encode(batch)))
    first = r.publish.statuses(attached=True)
    assert first == [(ORIGIN + "/x", "cancelled")]  # once, though listed twice
    r.publish.attached.clear()
    asyncio.run(r.agent.handle(where, encode(batch)))
    assert r.publish.statuses(attached=True) == first


def test_outcome_links_count_against_the_page_budget() -> None:
    r = make(max_pages=2)
    seed(r.agent)
    asyncio.run(r.agent.handle(Where("x.outcomes", HERE, 0), outcome(LINKS)))
    states = dict(r.publish.statuses(attached=True))
    assert states[ORIGIN + "/b"] == "cancelled"  # over the budget: root + /a only
    budget = [v for short, _, v in r.publish.attached if short == "budget"]
    assert budget[-1] == b"2"


def _origins(partition: int, n: int, *, same: bool) -> list[str]:
    """``n`` origins whose partition is (``same``) or is not ``partition``."""
    found = (f"http://o{i}.test" for i in range(1000))
    return [o for o in found if (partition_for(o, PARTITIONS) == partition) == same][:n]


def test_a_batch_merged_per_partition_admits_each_origin_here_and_resends_the_others() -> None:
    """The fetch service merges the links of many pages per partition, keyed by the first
    origin (``agents.stream.links.by_partition``): every origin of this partition is admitted
    by this one event, as its own batch (its own queue, the scheduler told); a URL of another
    partition's origin is re-sent keyed by its origin; a replay of the event repeats the
    statuses of the URLs it ended and queues nothing twice."""
    (other,) = _origins(HERE, 1, same=True)
    (elsewhere,) = _origins(HERE, 1, same=False)
    r = make(max_pages=3, allow_hosts=(other[7:], elsewhere[7:]))
    seed(r.agent)
    urls = (
        UrlRef(ORIGIN + "/a", 1),
        UrlRef(other + "/x?utm_source=y", 1),  # canonicalized once: the tracking tag dropped
        UrlRef(other + "/y", 1),
        UrlRef(elsewhere + "/z", 1),
        UrlRef(other + "/over", 1),  # over the page budget of 3: the seed, /a, /x
    )
    batch = FrontierBatch(crawl_id="c", origin=ORIGIN, urls=urls)
    where = Where("x.frontier", HERE, 5)
    asyncio.run(r.agent.handle(where, encode(batch)))
    store = r.agent.store
    state = load_origin(store, other)
    assert (state.head, state.tail) == (0, 1)
    assert [entry_at(store, state, s).url for s in (0,)] == [other + "/x"]  # type: ignore[union-attr]
    assert load_origin(store, elsewhere).tail == 0  # not this partition's: not admitted here
    resent = [(k, decode("frontier", v)) for s, k, v in r.publish.attached if s == "frontier"]
    assert [(k, [u.url for u in b.urls]) for k, b in resent] == [
        (elsewhere.encode(), [elsewhere + "/z"])
    ]
    ended = sorted(r.publish.statuses(attached=True))
    assert ended == [(other + "/over", "cancelled"), (other + "/y", "cancelled")]
    told = [s.origin for name, s in r.hook.calls if name == "admitted"]
    assert told[-2:] == [other, ORIGIN] or told[-2:] == [ORIGIN, other]
    before = {name: dict(t) for name, t in r.tables.items()}
    r.publish.attached.clear()  # kill -9 before the commit: the replay sends it all again
    asyncio.run(r.agent.handle(where, encode(batch)))
    assert {name: dict(t) for name, t in r.tables.items()} == before
    assert sorted(r.publish.statuses(attached=True)) == ended
    assert [s for s, _, _ in r.publish.attached].count("frontier") == 1


def test_a_claim_of_a_slot_on_outcomes_goes_to_the_scheduler_and_changes_no_table() -> None:
    """A render worker's claim travels on ``outcomes`` with its origin's outcomes: the agent
    hands it to the scheduler's leases (``hook.slot``) and writes no table, for an unknown
    crawl too (the leases decide); a replay hands it again (the leases are idempotent)."""
    r = make()
    seed(r.agent)
    before = {name: dict(table) for name, table in r.tables.items()}
    r.hook.calls.clear()
    claim = SlotMessage(
        kind="claim", claim_id="k1", crawl_id="c", origin=ORIGIN, worker_id="r1", not_after=9.0
    )
    for offset in (3, 3):
        asyncio.run(r.agent.handle(Where("x.outcomes", HERE, offset), encode(claim)))
    assert r.hook.calls == [("slot", claim), ("slot", claim)]
    assert r.tables == before
    assert r.publish.statuses() == []
