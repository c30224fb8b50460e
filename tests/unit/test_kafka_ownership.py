"""The fetch service's ownership across rebalances (``agents.stream.ownership``): a partition is
dispatched only after the catch-up marker of the current assignment came back; a recovery of an
earlier generation changes nothing; a partition the assignment no longer names is dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.fetch_service import FetchService
from streamcrawl.agents.stream.frontier_agent import MARKER
from streamcrawl.agents.stream.ownership import Ownership
from streamcrawl.agents.stream.slot_leases import LEASE_WINDOW
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, UrlRef
from tests.unit.test_fetch_service import Stages
from tests.unit.test_fetch_service import _service as fetch_service

P0, P1 = "http://h4.test", "http://h6.test"  # partitions 0 and 1 of 4


def _store(rules: CrawlRules) -> TableStore:
    store = TableStore({}, {}, {})
    ch = Changes(store)
    for origin in (P0, P1):
        urls = tuple(UrlRef(f"{origin}/{i}", 1) for i in range(3))
        batch = FrontierBatch(crawl_id="c", origin=origin, urls=urls)
        Frontier().admit(ch, batch, rules, budget=None)
    ch.commit()
    return store


def _ownership_service(render: str = "never") -> tuple[FetchService, list[tuple[int, bytes]]]:
    assert (partition_for(P0, 4), partition_for(P1, 4)) == (0, 1)
    policy = CrawlPolicy(
        crawl_id="c",
        seeds=(P0 + "/", P1 + "/"),
        obey_robots=False,
        delay=0.0,
        render=render,  # type: ignore[arg-type]
    )
    rules = CrawlRules.from_policy(policy)
    marks: list[tuple[int, bytes]] = []

    async def mark(partition: int, value: bytes) -> None:
        marks.append((partition, value[len(MARKER) :]))

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        return None

    svc = fetch_service(_store(rules), rules, publish)
    svc.own.owned = set()  # nothing owned before the first assignment
    svc.mark = mark
    return svc, marks


async def _recover(svc: FetchService, marks: list[tuple[int, bytes]], parts: set[int]) -> None:
    """The tables of ``parts`` are recovered; every marker sent comes back."""
    svc.rebuild(parts)
    await asyncio.sleep(0)  # the markers go out
    for partition, token in marks:
        svc.caught_up(partition, token)


async def test_a_recovery_that_ends_during_the_next_rebalance_sends_no_marker() -> None:
    """faust-streaming reports a recovery complete even when the next rebalance has begun: a
    marker sent then can precede the old owner's last outcomes (published while it revokes),
    and the partition would be dispatched before they are applied, refetching their URLs."""
    svc, marks = _ownership_service()
    svc.assigned({0, 1})
    await _recover(svc, marks, {0, 1})
    assert set(svc.scheduler.origins()) == {P0, P1}
    await svc.revoke({0, 1})  # the next rebalance
    marks.clear()
    svc.rebuild({0, 1})  # the earlier generation's recovery ends now
    await asyncio.sleep(0)
    assert marks == [] and svc.owned == set() and svc.scheduler.origins() == []
    svc.assigned({0})  # the new generation
    svc.rebuild({0})
    await asyncio.sleep(0)
    assert [p for p, _ in marks] == [0]  # one marker, sent after the assignment
    assert svc.scheduler.origins() == []  # gated until it comes back
    svc.caught_up(*marks[0])
    assert svc.scheduler.origins() == [P0]
    await svc.stop()


async def test_a_partition_the_assignment_no_longer_names_is_dropped() -> None:
    """Its origins must not stay in the scheduler, where they would be dispatched by this
    worker and by their new owner."""
    svc, marks = _ownership_service()
    svc.assigned({0, 1})
    await _recover(svc, marks, {0, 1})
    svc.assigned({1})  # no revoke of partition 0 reached the service
    svc.rebuild({1})
    assert svc.owned == {1}
    assert svc.scheduler.origins() == [P1]
    assert svc.since_of(0) is None
    await svc.stop()


@pytest.mark.parametrize("render", ["never", "always"])
async def test_nothing_is_dispatched_once_a_rebalance_has_begun(render: str) -> None:
    """Faust marks the rebalance in aiokafka's revoke callback, ~90 ms before ``revoke`` runs:
    a request dispatched in between ended before ``revoke`` counted it as in flight, with its
    outcome not applied, and its URL was fetched again. While a crawl renders, the origins
    taken over at the recovery also wait the lease window (a previous owner's loan of their
    slot may be sent in it: agents/stream/slot_leases.py); a crawl that never renders lent
    nothing, and does not wait it."""
    svc, marks = _ownership_service(render)
    svc.assigned({0, 1})
    await _recover(svc, marks, {0, 1})
    rebalancing = True
    svc.rebalancing = lambda: rebalancing
    stages = Stages()
    svc._stages = stages  # type: ignore[assignment]
    loop = asyncio.create_task(svc._dispatch_loop())
    try:
        await asyncio.sleep(0.3)
        assert stages.runs == []  # both partitions indexed and ready: nothing starts
        rebalancing = False  # a rebalance that kept them ended
        if render != "never":
            await asyncio.sleep(LEASE_WINDOW - 1.0)
            assert stages.runs == []  # the lease window first
            await asyncio.sleep(1.0)
        await asyncio.sleep(1.3)  # the loop looks again within a second
        assert len(stages.runs) == 6  # then every queued URL (3 per origin, delay 0)
    finally:
        svc.stopping = True
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        svc._stages = None  # no HTTP session to close


def test_a_marker_of_an_earlier_assignment_opens_nothing() -> None:
    own = Ownership()
    own.assigned({0})
    first = own.recovered({0})
    assert first is not None and set(first.gate) == {0}
    own.revoke({0})
    own.assigned({0})
    again = own.recovered({0})
    assert again is not None and again.gate[0] != first.gate[0]
    assert not own.caught_up(0, first.gate[0], 1.0)  # the old token: still gated
    assert own.since_of(0) is None
    assert own.caught_up(0, again.gate[0], 2.0) and own.since_of(0) == 2.0


def test_a_recovery_of_other_partitions_than_the_assignment_is_ignored() -> None:
    own = Ownership()
    assert own.recovered({0}) is None  # no assignment known yet
    own.assigned({0, 1})
    assert own.recovered({0}) is None  # not this generation's
    assert own.owned == set() and own.gated == {}
