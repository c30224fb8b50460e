"""The politeness index with a simulated clock: delay, concurrency, robots first, ownership."""

from __future__ import annotations

import itertools

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.records import load_origin
from streamcrawl.agents.frontier.scheduler import Scheduler
from streamcrawl.agents.frontier.store import Changes, MemoryStore
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, UrlRef
from tests.outcomes import page_fetched, robots_fetched

A, B = "http://a.test", "http://b.test"


def setup(n: int = 5, **kw: object) -> tuple[Scheduler, MemoryStore, CrawlRules, Frontier]:
    policy = CrawlPolicy(crawl_id="c", seeds=(A + "/", B + "/"), obey_robots=False, **kw)  # type: ignore[arg-type]
    r = CrawlRules.from_policy(policy)
    store = MemoryStore()
    f = Frontier(clock=lambda: 0.0, jitter=lambda: 0.5)
    for origin in (A, B):
        ch = Changes(store)
        refs = tuple(UrlRef(f"{origin}/{i}", 1) for i in range(n))
        f.admit(ch, FrontierBatch(crawl_id="c", origin=origin, urls=refs), r, budget=None)
        ch.commit()
    sched = Scheduler(store, lambda cid: r if cid == "c" else None)
    for origin in (A, B):
        sched.track(load_origin(store, origin))
    return sched, store, r, f


def finish(sched: Scheduler, store: MemoryStore, r: CrawlRules, f: Frontier, d, t: float) -> None:  # type: ignore[no-untyped-def]
    ch = Changes(store)
    applied = f.apply(ch, page_fetched(d, t, t + 0.01), r)
    ch.commit()
    sched.done(d.origin, d.seq, applied.state)


def simulate(sched, store, r, f, until: float, step: float = 0.01) -> list[tuple[float, str]]:  # type: ignore[no-untyped-def]
    """Run the loop on a fake clock: each request completes immediately."""
    starts: list[tuple[float, str]] = []
    t = 0.0
    while t < until:
        for d in sched.take(t, 100):
            starts.append((t, d.origin))
            finish(sched, store, r, f, d, t)
        t = round(t + step, 6)
    return starts


def test_gap_per_origin_is_the_delay_and_origins_interleave() -> None:
    sched, store, r, f = setup(n=5, delay=1.0)
    starts = simulate(sched, store, r, f, until=10)
    for origin in (A, B):
        times = [t for t, o in starts if o == origin]
        assert len(times) == 5
        assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(times))
    assert starts[0][0] == starts[1][0] == 0.0  # both origins start at once


def test_per_origin_concurrency_bounds_in_flight() -> None:
    sched, store, r, f = setup(n=6, delay=0.0, per_origin_concurrency=2)
    first = sched.take(0.0, 100)
    assert sorted(d.origin for d in first) == [A, A, B, B]
    assert sched.take(0.0, 100) == []  # both slots busy on both origins
    finish(sched, store, r, f, first[0], 0.0)
    again = sched.take(0.0, 100)
    assert [d.origin for d in again] == [first[0].origin]


def test_global_limit_is_respected() -> None:
    sched, *_ = setup(n=3, delay=0.0)
    assert len(sched.take(0.0, 1)) == 1


def test_new_owner_waits_one_delay_and_forget_drops_origin() -> None:
    _sched, store, r, _ = setup(n=2, delay=2.0)
    owner = Scheduler(store, lambda cid: r)
    owner.track(load_origin(store, A), assumed_start=100.0)
    assert owner.take(101.0, 10) == []
    assert [d.origin for d in owner.take(102.0, 10)] == [A]
    owner.forget(A)
    assert owner.origins() == [] and owner.next_ready_at() is None


def test_robots_fetched_before_pages() -> None:
    policy = CrawlPolicy(crawl_id="c", seeds=(A + "/",), delay=0.0)
    r = CrawlRules.from_policy(policy)
    store = MemoryStore()
    f = Frontier(clock=lambda: 0.0)
    ch = Changes(store)
    f.admit(ch, FrontierBatch(crawl_id="c", origin=A, urls=(UrlRef(A + "/x", 0),)), r, budget=None)
    ch.commit()
    sched = Scheduler(store, lambda cid: r)
    sched.track(load_origin(store, A))
    (d,) = sched.take(0.0, 10)
    assert d.kind == "robots"
    assert sched.take(0.0, 10) == []  # pages wait for robots.txt
    ch = Changes(store)
    applied = f.apply(ch, robots_fetched(A, "User-agent: *\nDisallow: /x\n", 0.0, 0.01), r)
    ch.commit()
    sched.done(A, -1, applied.state)
    (d,) = sched.take(0.02, 10)
    assert d.kind == "deny" and d.entry is not None and d.entry.url == A + "/x"


def test_stopped_crawl_cancels_without_requests_and_paused_waits() -> None:
    sched, _store, _r, _f = setup(n=1, delay=0.0)
    paused = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", state="paused", obey_robots=False))
    sched.rules_for = lambda cid: paused
    assert sched.take(0.0, 10) == []
    stopped = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", state="stopped", obey_robots=False))
    sched.rules_for = lambda cid: stopped
    kinds = {d.kind for d in sched.take(5.0, 10)}
    assert kinds == {"cancel"}


def test_fetched_frees_the_slot_before_the_outcome_is_applied() -> None:
    sched, store, r, f = setup(n=3, delay=1.0)
    first = next(d for d in sched.take(0.0, 10) if d.origin == A)
    sched.fetched(A, first.seq, 0.0)
    assert [d.origin for d in sched.take(0.5, 10)] == []  # the delay still holds
    (nxt,) = [d for d in sched.take(1.0, 10) if d.origin == A]
    assert nxt.seq != first.seq  # the settling entry is not dispatched again
    finish(sched, store, r, f, first, 0.0)  # its outcome arrives late: no harm
    sched.fetched(A, nxt.seq, 1.0)
    (third,) = [d for d in sched.take(2.0, 10) if d.origin == A]
    assert third.seq not in (first.seq, nxt.seq)
    sched.fetched(A, third.seq, 2.3)  # started late: the next request waits from 2.3
    assert [d for d in sched.take(3.2, 10) if d.origin == A] == []


def test_settling_counts_fetched_outcomes_until_applied_or_forgotten() -> None:
    sched, store, r, f = setup(n=3, delay=0.0, per_origin_concurrency=3)
    ds = sched.take(0.0, 10)
    assert len(ds) == 6 and sched.settling == 0
    for d in ds:
        sched.fetched(d.origin, d.seq, 0.0)
    sched.fetched(ds[0].origin, ds[0].seq, 0.0)  # reported twice: counted once
    assert sched.settling == 6
    finish(sched, store, r, f, ds[0], 0.0)
    sched.done(ds[0].origin, ds[0].seq, None)  # a late duplicate `done`: no double count
    assert sched.settling == 5
    sched.forget(B)  # B's partition revoked: its 3 settling entries no longer count
    assert sched.settling == 2
    for d in ds[1:]:
        if d.origin == A:
            finish(sched, store, r, f, d, 0.0)
    assert sched.settling == 0


def test_an_outcome_this_scheduler_never_dispatched_is_unexpected() -> None:
    """A seq at or past the head that is neither in flight nor settling was dispatched
    elsewhere (a previous owner's outcome, published late); one in flight, settling or already
    applied (a replay) is not."""
    sched, store, r, f = setup(n=3, delay=0.0)
    first = next(d for d in sched.take(0.0, 10) if d.origin == A)
    assert not sched.unexpected(A, first.seq)  # in flight
    sched.fetched(A, first.seq, 0.0)
    assert not sched.unexpected(A, first.seq)  # settling
    assert sched.unexpected(A, first.seq + 1)  # queued, never dispatched here
    finish(sched, store, r, f, first, 0.0)
    assert not sched.unexpected(A, first.seq)  # applied: a replay of it is expected
    assert not sched.unexpected("http://c.test", 0)  # an origin not in memory
    sched.forget(B)
    assert not sched.unexpected(B, 0)


def test_queued_besides_counts_what_is_neither_in_flight_nor_settling() -> None:
    """The Kafka wiring lets a report's links wait longer (``LinkBatches``' ``queued``) only
    when its origin's next request has a URL already: otherwise that URL may be in the
    outcome still on its way."""
    sched, store, r, f = setup(n=2, delay=1.0, per_origin_concurrency=1)
    assert not sched.queued_besides("http://unknown.test")
    first = next(d for d in sched.take(0.0, 10) if d.origin == A)
    assert sched.queued_besides(A)  # /1 waits behind /0 in flight
    sched.fetched(A, first.seq, 0.0)
    assert sched.queued_besides(A)  # /0 settling, /1 still queued
    finish(sched, store, r, f, first, 0.0)
    second = next(d for d in sched.take(5.0, 10) if d.origin == A)
    assert second.seq != first.seq
    assert not sched.queued_besides(A)  # /1, the last one, in flight
    sched.fetched(A, second.seq, 5.0)
    assert not sched.queued_besides(A)  # settling: nothing else queued


def test_the_dispatch_after_a_request_ended_carries_the_time_since() -> None:
    """``since_end``: from a request's end (``ended``) to its origin's next dispatch, once."""
    sched, store, r, f = setup(n=3, delay=0.0)
    first = [d for d in sched.take(0.0, 100) if d.origin == A]
    assert [d.since_end for d in first] == [None]  # nothing ended before
    sched.ended(A, 1.0)
    finish(sched, store, r, f, first[0], 1.0)
    (second,) = [d for d in sched.take(1.25, 100) if d.origin == A]
    assert second.since_end == 0.25
    finish(sched, store, r, f, second, 1.5)  # ended, but not reported through ``ended``
    (third,) = [d for d in sched.take(2.0, 100) if d.origin == A]
    assert third.since_end is None


def test_an_origin_whose_queued_urls_all_settle_is_blocked_until_one_is_applied() -> None:
    """Its next request needs an outcome applied first (the wiring hurries the frontier)."""
    sched, store, r, f = setup(n=1, delay=0.0)
    (d,) = [d for d in sched.take(0.0, 100) if d.origin == A]
    sched.fetched(A, d.seq, 0.0)  # published, not applied: nothing else is queued
    assert [x for x in sched.take(0.01, 100) if x.origin == A] == []
    assert A in sched.blocked
    finish(sched, store, r, f, d, 0.02)
    assert A not in sched.blocked


def test_census_tells_fetching_ready_and_waiting_origins_apart() -> None:
    sched, store, r, f = setup(n=3, delay=1.0)
    assert sched.census(0.0) == {"ready": 2, "waiting": 0, "fetching": 0}
    (d,) = sched.take(0.0, 1)  # capacity for one: the other origin stays ready
    assert sched.census(0.0) == {"ready": 1, "waiting": 0, "fetching": 1}
    finish(sched, store, r, f, d, 0.0)
    # Done: that origin now waits out its delay, until the delay has passed.
    assert sched.census(0.5) == {"ready": 1, "waiting": 1, "fetching": 0}
    assert sched.census(1.5) == {"ready": 2, "waiting": 0, "fetching": 0}
