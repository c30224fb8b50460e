"""The frontier's pure logic: dedupe, scope, budget, queue order, retries, timing, replay.

Run over every ``Store`` the frontier is wired to: ``MemoryStore``, ``RocksStore`` (embedded) and
``TableStore`` over dict tables (Kafka), whose writes are key by key, not atomic
(``tests/unit/test_kafka_state.py`` replays every crash prefix of them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.records import admitted_count, load_origin, queued_entries
from streamcrawl.agents.frontier.scheduler import Dispatch, Scheduler
from streamcrawl.agents.frontier.store import (
    META,
    ORIGINS,
    SEEN,
    SEGMENTS,
    Changes,
    MemoryStore,
    RocksStore,
    Store,
)
from streamcrawl.agents.net.reports import page_outcome
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.tables import TableStore
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Outcome, TerminalState, UrlRef
from tests.outcomes import robots_fetched, robots_unreachable

ORIGIN = "http://a.test"


def rules(**kw: object) -> CrawlRules:
    base = {"crawl_id": "c", "seeds": (ORIGIN + "/",), "delay": 1.0, "retries": 2}
    return CrawlRules.from_policy(CrawlPolicy(**{**base, **kw}))  # type: ignore[arg-type]


def batch(*paths: str, depth: int = 1, origin: str = ORIGIN) -> FrontierBatch:
    return FrontierBatch(
        crawl_id="c", origin=origin, urls=tuple(UrlRef(origin + p, depth) for p in paths)
    )


def outcome(
    seq: int, state: str, *, started: float = 100.0, url: str = ORIGIN + "/x", **kw: object
) -> Outcome:
    return Outcome(
        crawl_id="c",
        origin=ORIGIN,
        kind="page",
        seq=seq,
        url=url,
        state=state,
        started_at=started,
        finished_at=started + 0.1,
        **kw,  # type: ignore[arg-type]
    )


def make_store(kind: str, path: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "rocksdb":
        return RocksStore(path / "db")
    return TableStore({}, {}, {})


@pytest.fixture(params=["memory", "rocksdb", "tables"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Frontier, Store]]:
    store = make_store(request.param, tmp_path)
    yield Frontier(clock=lambda: 50.0, jitter=lambda: 0.5), store
    store.close()


def snapshot(store: Store) -> list[tuple[bytes, bytes]]:
    """Every row of every namespace the frontier writes."""
    return [row for ns in (SEEN, SEGMENTS, ORIGINS, META) for row in store.scan(ns)]


def admit(f: Frontier, store: Store, b: FrontierBatch, r: CrawlRules, budget=None):  # type: ignore[no-untyped-def]
    ch = Changes(store)
    result = f.admit(ch, b, r, budget=budget)
    ch.commit()
    return result


def apply(f: Frontier, store: Store, o: Outcome, r: CrawlRules):  # type: ignore[no-untyped-def]
    ch = Changes(store)
    result = f.apply(ch, o, r)
    ch.commit()
    return result


def test_admit_dedupes_canonical_variants_and_keeps_fifo(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules()
    first = admit(f, store, batch("/a", "/b#x", "/A/../a?utm_source=z", "/b"), r)
    assert [e.url for _, e in first.queued] == [ORIGIN + "/a", ORIGIN + "/b"]
    assert first.duplicates == 2
    again = admit(f, store, batch("/a", "/b"), r)  # a replayed batch changes nothing
    assert again.queued == [] and again.duplicates == 2
    st = load_origin(store, ORIGIN)
    assert (st.head, st.tail) == (0, 2)
    assert [e.url for _, e in queued_entries(store, st, 10)] == [ORIGIN + "/a", ORIGIN + "/b"]


def test_out_of_scope_and_budget_get_terminal_states(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules(max_depth=1)
    res = admit(f, store, batch("/deep", depth=2), r)
    assert [(s.state, s.last_error) for s in res.statuses] == [
        (TerminalState.OUT_OF_SCOPE, "depth")
    ]
    res = admit(f, store, batch("/1", "/2", "/3"), r, budget=2)
    assert len(res.queued) == 2
    assert [(s.state, s.last_error) for s in res.statuses] == [
        (TerminalState.CANCELLED, "max_pages")
    ]
    assert admitted_count(store, "c") == 2


def test_misrouted_urls_are_returned_not_queued(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    b = FrontierBatch(crawl_id="c", origin=ORIGIN, urls=(UrlRef("http://b.test/x", 1),))
    res = admit(f, store, b, rules(allow_hosts=("b.test",)))
    assert res.queued == [] and list(res.misrouted) == ["http://b.test"]


def test_success_pops_and_sets_next_fetch_time(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules()
    admit(f, store, batch("/a", "/b"), r)
    first = outcome(0, "fetched", url=ORIGIN + "/a", depth=1, attempts=1)
    applied = apply(f, store, first, r)
    assert [s.state for s in applied.statuses] == [TerminalState.FETCHED]
    st = load_origin(store, ORIGIN)
    assert st.head == 1 and st.next_fetch_at == pytest.approx(101.0)
    before = snapshot(store)
    replay = apply(f, store, first, r)  # replayed: no state change, the same status again
    assert replay.replayed and replay.statuses == applied.statuses
    assert snapshot(store) == before and before


def test_a_replayed_retry_repeats_a_status_only_if_it_was_the_last_attempt(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules(retries=1)
    admit(f, store, batch("/a"), r)
    first = outcome(0, "retry", url=ORIGIN + "/a", depth=1, attempts=1, error="timeout: slow")
    last = outcome(0, "retry", url=ORIGIN + "/a", depth=1, attempts=2, error="timeout: slow")
    apply(f, store, first, r)
    failed = apply(f, store, last, r).statuses
    assert [s.state for s in failed] == [TerminalState.FAILED]
    assert apply(f, store, first, r).statuses == []  # that one re-queued its entry
    assert apply(f, store, last, r).statuses == failed


def test_retry_keeps_entry_at_head_then_fails_after_retries(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules(retries=1)
    admit(f, store, batch("/a", "/b"), r)
    res = apply(f, store, outcome(0, "retry", error="timeout: slow", backoff=True), r)
    assert res.retried and res.statuses == []
    st = load_origin(store, ORIGIN)
    assert st.head == 0 and st.failures == 1 and st.next_fetch_at >= 100.1 + 1.0
    res = apply(f, store, outcome(0, "retry", error="timeout: slow", backoff=True), r)
    assert [(s.state, s.attempts, s.last_error) for s in res.statuses] == [
        (TerminalState.FAILED, 2, "timeout: slow")
    ]
    assert load_origin(store, ORIGIN).head == 1


def test_retry_after_and_backoff_then_recovery(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules(retries=5)
    admit(f, store, batch("/a"), r)
    apply(f, store, outcome(0, "retry", status=429, retry_after=30.0, backoff=True), r)
    st = load_origin(store, ORIGIN)
    assert st.next_fetch_at == pytest.approx(100.1 + 30.0)
    apply(f, store, outcome(0, "retry", started=200.0, status=503, backoff=True), r)
    st = load_origin(store, ORIGIN)
    assert st.failures == 2 and st.backoff_until == pytest.approx(200.1 + 2.0)  # 1 s * 2^1 * 1.0
    apply(f, store, outcome(0, "fetched", started=300.0), r)
    assert load_origin(store, ORIGIN).failures == 0


def test_redirect_final_url_is_marked_seen(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules()
    admit(f, store, batch("/old"), r)
    apply(f, store, outcome(0, "fetched", final_url=ORIGIN + "/new"), r)
    res = admit(f, store, batch("/new"), r)
    assert res.queued == [] and res.duplicates == 1


def test_robots_outcome_caches_rules_and_crawl_delay_widens_gap(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules(delay=0.5)
    body = "User-agent: *\nCrawl-delay: 3\nDisallow: /private\n"
    robots = robots_fetched(ORIGIN, body, 10.0, 10.1)
    apply(f, store, robots, r)
    st = load_origin(store, ORIGIN)
    assert st.robots_expires == pytest.approx(10.1 + r.policy.robots_ttl)
    assert r.delay(st) == 3.0 and st.next_fetch_at == pytest.approx(13.0)
    rr = r.robots(st)
    assert rr is not None and not rr.allowed(ORIGIN + "/private/x", r.policy.user_agent)


# --- robots.txt decided at admission once the origin's file is cached ------------------------

PRIVATE = "User-agent: *\nDisallow: /private\n"


def admit_from(f: Frontier, store: Store, b: FrontierBatch, r: CrawlRules, source: bytes):  # type: ignore[no-untyped-def]
    ch = Changes(store)
    result = f.admit(ch, b, r, budget=None, source=source)
    ch.commit()
    return result


def dispatched(store: Store, r: CrawlRules) -> list[Dispatch]:
    sched = Scheduler(store, lambda cid: r)
    sched.track(load_origin(store, ORIGIN))
    return sched.take(60.0, 10)


@pytest.mark.parametrize("recrawl_after", [None, 3600.0])
def test_a_url_robots_denies_ends_at_admission_as_its_dispatch_would_end_it(  # type: ignore[no-untyped-def]
    env, recrawl_after: float | None
) -> None:
    f, store = env
    r = rules(delay=0.0, recrawl_after=recrawl_after)
    listed = "2024-01-02"
    ref = UrlRef(ORIGIN + "/private/old", 2, parent=ORIGIN + "/", lastmod=listed)
    early = admit(f, store, FrontierBatch(crawl_id="c", origin=ORIGIN, urls=(ref,)), r)
    assert len(early.queued) == 1 and early.statuses == []  # robots.txt not known yet: queued
    apply(f, store, robots_fetched(ORIGIN, PRIVATE, 10.0, 10.1), r)
    ref = UrlRef(ORIGIN + "/private/new", 2, parent=ORIGIN + "/", lastmod=listed)
    late = admit(f, store, FrontierBatch(crawl_id="c", origin=ORIGIN, urls=(ref,)), r)
    assert late.queued == [] and [s.state for s in late.statuses] == [TerminalState.ROBOTS_DENIED]
    (d,) = dispatched(store, r)  # the early one only: the late one was never queued
    assert d.kind == "deny" and d.entry is not None and d.entry.url == ORIGIN + "/private/old"
    applied = apply(f, store, page_outcome(d, TerminalState.ROBOTS_DENIED, started=0.0), r)
    (at_dispatch,) = applied.statuses
    (at_admission,) = late.statuses
    assert msgspec.structs.replace(at_admission, url=d.entry.url, updated_at=0.0) == (
        msgspec.structs.replace(at_dispatch, updated_at=0.0)
    )
    assert at_admission.lastmod == listed and at_admission.last_error is None
    assert load_origin(store, ORIGIN).lanes == []  # neither is revisited
    assert dispatched(store, r) == []


def test_a_replay_of_the_event_repeats_its_robots_denied_status(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules()
    apply(f, store, robots_fetched(ORIGIN, PRIVATE, 10.0, 10.1), r)
    first = admit_from(f, store, batch("/private/x", "/ok"), r, b"frontier/0@7")
    assert [e.url for _, e in first.queued] == [ORIGIN + "/ok"]
    replay = admit_from(f, store, batch("/private/x", "/ok"), r, b"frontier/0@7")
    assert replay.queued == [] and replay.statuses == first.statuses
    other = admit_from(f, store, batch("/private/x"), r, b"frontier/0@8")
    assert other.statuses == [] and other.duplicates == 1


def test_a_robots_denied_url_takes_none_of_the_page_budget(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules()
    apply(f, store, robots_fetched(ORIGIN, PRIVATE, 10.0, 10.1), r)
    res = admit(f, store, batch("/private/a", "/b", "/private/c", "/d"), r, budget=1)
    assert [e.url for _, e in res.queued] == [ORIGIN + "/b"]
    assert [(s.url, s.state, s.last_error) for s in res.statuses] == [
        (ORIGIN + "/private/a", TerminalState.ROBOTS_DENIED, None),
        (ORIGIN + "/private/c", TerminalState.CANCELLED, "max_pages"),  # over it, as before
        (ORIGIN + "/d", TerminalState.CANCELLED, "max_pages"),
    ]
    assert admitted_count(store, "c") == 1


def test_robots_unknown_expired_unreachable_or_crawl_stopped_leaves_it_to_dispatch(env) -> None:  # type: ignore[no-untyped-def]
    f, store = env
    r = rules()
    apply(f, store, robots_fetched(ORIGIN, PRIVATE, 10.0, 10.1), r)
    stopped = rules(state="stopped")
    assert len(admit(f, store, batch("/private/1"), stopped).queued) == 1
    expired = Frontier(clock=lambda: 10.1 + r.policy.robots_ttl, jitter=lambda: 0.5)
    assert len(admit(expired, store, batch("/private/2"), r).queued) == 1
    for _ in range(r.policy.retries + 1):  # "complete disallow": denied at dispatch, as before
        apply(f, store, robots_unreachable(ORIGIN, 20.0), r)
    assert len(admit(f, store, batch("/private/3"), r).queued) == 1


def test_an_origin_whose_robots_txt_keeps_failing_has_every_url_denied_not_one_per_ttl(env) -> None:  # type: ignore[no-untyped-def]
    """After ``retries`` + 1 failed robots.txt fetches the origin is disallowed for the error
    TTL: each queued URL ends robots_denied. A deny (no request) used to reset the origin's
    failure count like a fetched page, which made robots.txt "unusable but retried" again:
    one URL denied, then robots.txt asked for, per error TTL."""
    f, store = env
    r = rules()
    admit(f, store, batch("/a", "/b", "/c"), r)
    for _ in range(r.policy.retries + 1):
        apply(f, store, robots_unreachable(ORIGIN, 20.0), r)
    kinds = []
    for _ in range(3):
        (d,) = dispatched(store, r)
        kinds.append(d.kind)
        apply(f, store, page_outcome(d, TerminalState.ROBOTS_DENIED, started=0.0), r)
    assert kinds == ["deny", "deny", "deny"]
    assert load_origin(store, ORIGIN).failures == r.policy.retries + 1


# -- cookie jars (docs/requests.md, "Cookies") ---------------------------------------------------


def test_an_outcomes_cookies_are_stored_with_its_origin_and_a_replay_stores_the_same(env) -> None:  # type: ignore[no-untyped-def]
    from streamcrawl.schemas.records import SetCookie

    frontier, store = env
    r = rules(cookies=True)
    ch = Changes(store)
    frontier.admit(ch, batch("/x"), r, budget=None)
    ch.commit()
    set_cookies = (
        SetCookie(url=ORIGIN + "/x", header="sid=1; Path=/"),
        SetCookie(url=ORIGIN + "/x", header="tmp=2; Max-Age=1"),  # gone 1 s after the fetch
    )
    done = outcome(0, TerminalState.FETCHED, url=ORIGIN + "/x", set_cookies=set_cookies)
    ch = Changes(store)
    frontier.apply(ch, done, r)
    ch.commit()
    jar = load_origin(store, ORIGIN).jars["c"]
    assert [(c.name, c.value) for c in jar] == [("sid", "1"), ("tmp", "2")]
    assert jar[1].expires == done.finished_at + 1  # as of the outcome's end, not the clock
    ch = Changes(store)
    frontier.apply(ch, done, r)  # the same outcome, replayed
    ch.commit()
    assert load_origin(store, ORIGIN).jars["c"] == jar
    robots = msgspec.structs.replace(
        robots_fetched(ORIGIN, "User-agent: *\nAllow: /\n", started=199.0, finished=200.0),
        set_cookies=(SetCookie(url=ORIGIN + "/robots.txt", header="sid=3"),),
    )
    ch = Changes(store)
    frontier.apply(ch, robots, r)
    ch.commit()
    assert [(c.name, c.value) for c in load_origin(store, ORIGIN).jars["c"]] == [("sid", "3")]


def test_a_crawl_without_cookies_stores_no_jar(env) -> None:  # type: ignore[no-untyped-def]
    from streamcrawl.schemas.records import SetCookie

    frontier, store = env
    ch = Changes(store)
    frontier.admit(ch, batch("/x"), rules(), budget=None)
    set_cookies = (SetCookie(url=ORIGIN + "/x", header="sid=1"),)
    frontier.apply(ch, outcome(0, TerminalState.FETCHED, set_cookies=set_cookies), rules())
    ch.commit()
    assert load_origin(store, ORIGIN).jars == {}


def test_a_dispatch_carries_its_crawls_jar_for_the_origin(env) -> None:  # type: ignore[no-untyped-def]
    from streamcrawl.schemas.records import SetCookie

    frontier, store = env
    r = rules(cookies=True, obey_robots=False)
    ch = Changes(store)
    frontier.admit(ch, batch("/x", "/y"), r, budget=None)
    cookie = (SetCookie(url=ORIGIN + "/x", header="sid=1"),)
    frontier.apply(ch, outcome(0, TerminalState.FETCHED, set_cookies=cookie), r)
    ch.commit()
    scheduler = Scheduler(store, lambda _c: r)
    scheduler.track(load_origin(store, ORIGIN))
    (d,) = scheduler.take(1000.0, 1)
    assert isinstance(d, Dispatch) and d.entry is not None and d.entry.url == ORIGIN + "/y"
    assert [(c.name, c.value) for c in d.cookies] == [("sid", "1")]


# -- --render auto (docs/rendering.md, "When to render") -----------------------------------------


def test_render_tallies_are_stored_with_the_origin_and_reach_its_dispatches(env) -> None:  # type: ignore[no-untyped-def]
    from streamcrawl.schemas.records import RenderTally

    frontier, store = env
    r = rules(render="auto", obey_robots=False)
    ch = Changes(store)
    frontier.admit(ch, batch("/app/1", "/app/2", "/app/3"), r, budget=None)
    frontier.apply(
        ch, outcome(0, TerminalState.FETCHED, url=ORIGIN + "/app/1", render_needed=True), r
    )
    frontier.apply(
        ch, outcome(1, TerminalState.FETCHED, url=ORIGIN + "/app/2", render_needed=False), r
    )
    ch.commit()
    tally = RenderTally(checked=2, needed=1)
    assert load_origin(store, ORIGIN).renders == {"c": {"/app/": tally}}  # read back from the store
    scheduler = Scheduler(store, lambda _c: r)
    scheduler.track(load_origin(store, ORIGIN))
    (d,) = scheduler.take(1000.0, 1)
    assert isinstance(d, Dispatch) and d.entry is not None and d.entry.url == ORIGIN + "/app/3"
    assert d.renders == {"/app/": tally}
