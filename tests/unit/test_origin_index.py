"""The scheduler's memory is bounded by ``max_origins``: the other origins with work wait in the
origins table, are found there by ``Refill`` when there is room, and take turns, so none
starves and none is dispatched twice."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.probes.origin_memory import fetch_service
from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.records import load_origin
from streamcrawl.agents.frontier.scheduler import TURN, Scheduler
from streamcrawl.agents.frontier.store import ORIGINS, Changes
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.fetch_service import FetchService
from streamcrawl.agents.stream.origin_index import Refill
from streamcrawl.agents.stream.tables import TableStore
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, UrlRef
from tests.unit.test_scheduler import finish

ORIGINS_N = 300
BOUND = 40


def origin(i: int) -> str:
    return f"http://o{i}.test"


def rules() -> CrawlRules:
    policy = CrawlPolicy(
        crawl_id="c",
        seeds=tuple(origin(i) + "/" for i in range(ORIGINS_N)),
        obey_robots=False,
        delay=0.0,
    )
    return CrawlRules.from_policy(policy)


def store_with(urls_per_origin: int, r: CrawlRules) -> TableStore:
    store = TableStore({}, {}, {})
    ch = Changes(store)
    for i in range(ORIGINS_N):
        urls = tuple(UrlRef(f"{origin(i)}/{k}", 1) for k in range(urls_per_origin))
        batch = FrontierBatch(crawl_id="c", origin=origin(i), urls=urls)
        Frontier().admit(ch, batch, r, budget=None)
    ch.commit()
    return store


def service(store: TableStore, r: CrawlRules, max_origins: int | None) -> FetchService:
    return fetch_service(store, r, partitions=1, max_origins=max_origins)


@pytest.mark.parametrize(("bound", "held"), [(BOUND, BOUND), (None, ORIGINS_N)])
def test_assignment_indexes_at_most_the_bound(bound: int | None, held: int) -> None:
    r = rules()
    store = store_with(2, r)
    svc = service(store, r, bound)
    svc.own.owned = {0}
    svc.index_partitions({0})
    assert len(svc.scheduler) == held
    assert svc.scheduler.overflow is (bound is not None)
    # the queue sizes count every origin: in memory, and in the table once the census ended
    while svc.refill.wanted():
        svc.refill.run(svc.since_of, 7)
    assert svc.queue_sizes() == {0: 2 * ORIGINS_N}
    assert len(svc.scheduler) == held
    # new work for origins not in memory waits in the table: memory stays bounded
    ch = Changes(store)
    extra = FrontierBatch(
        crawl_id="c", origin=origin(ORIGINS_N - 1), urls=(UrlRef(origin(ORIGINS_N - 1) + "/x", 1),)
    )
    admission = Frontier().admit(ch, extra, r, budget=None)
    ch.commit()
    assert admission.state is not None
    svc.admitted(admission.state)
    assert len(svc.scheduler) == held


def drive(scheduler: Scheduler, refill: Refill, store: TableStore, r: CrawlRules) -> list[str]:
    """Dispatch and apply everything (each dispatch fetched at once), never over the bound;
    the URLs in the order they were fetched."""
    fetched: list[str] = []
    frontier = Frontier(clock=lambda: 0.0)
    now = 1.0
    for _ in range(10_000):
        refill.run(lambda p: 0.0, 50)
        assert len(scheduler) <= BOUND
        dispatches = scheduler.take(now, 16)
        if not dispatches and not scheduler.overflow and not len(scheduler):
            return fetched
        for d in dispatches:
            assert d.entry is not None
            fetched.append(d.entry.url)
            finish(scheduler, store, r, frontier, d, now)  # type: ignore[arg-type]
        now += 1.0
    raise AssertionError("the crawl did not end")


@pytest.mark.parametrize("urls", [1, 3 * TURN])
def test_every_origin_takes_its_turn_and_every_url_is_fetched_once(urls: int) -> None:
    """Short queues (an origin leaves memory when it is done) and long ones (it leaves after
    ``TURN`` dispatches, so the origins in the table are not starved by those in memory)."""
    r = rules()
    store = store_with(urls, r)
    scheduler = Scheduler(store, lambda c: r, max_origins=BOUND)
    refill = Refill(lambda: store.walk(ORIGINS), scheduler, 1)
    refill.restart()
    fetched = drive(scheduler, refill, store, r)
    assert len(fetched) == ORIGINS_N * urls and set(Counter(fetched).values()) == {1}
    # Turns: every origin's first fetch comes within ~TURN fetches per origin (2x: slack); without
    # them the first 40 origins would take all 24 of theirs before the next ones started (~6,700).
    first: dict[str, int] = {}
    for i, url in enumerate(fetched):
        first.setdefault(url.rsplit("/", 1)[0], i)
    assert max(first.values()) < 2 * ORIGINS_N * min(urls, TURN)
    assert all(load_origin(store, origin(i)).head == urls for i in range(ORIGINS_N))
