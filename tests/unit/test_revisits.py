"""Continuous crawling in the frontier and the scheduler: a fetched URL waits in a revisit lane
(agents/frontier/revisits.py), falls due, is queued and fetched again, moves along the interval
ladder (agents/policy/revisit.py), is forced by a sitemap's lastmod or ``recrawl_at``, ends gone;
and ``max_fetches_per_hour`` paces a crawl's requests. A fake clock and jitter 0 make each due
exactly ``fetched_at + interval``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from streamcrawl.agents.frontier import revisits
from streamcrawl.agents.frontier.frontier import Admission, Applied, Frontier
from streamcrawl.agents.frontier.records import (
    admitted_count,
    load_origin,
    queued_entries,
    seen_key,
)
from streamcrawl.agents.frontier.revisits import PROMOTE_LIMIT, lane_key
from streamcrawl.agents.frontier.scheduler import DUE_SEQ, Scheduler
from streamcrawl.agents.frontier.store import REVISITS, Changes, MemoryStore
from streamcrawl.agents.policy.revisit import DOWN, FUTURE_SKEW, RevisitPolicy
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import (
    CrawlPolicy,
    FrontierBatch,
    Lane,
    OriginState,
    Outcome,
    QueueEntry,
    Revisit,
    TerminalState,
    UrlRef,
)
from tests.unit.test_frontier import outcome as page_outcome

ORIGIN = "http://a.test"
X, Y, Z = ORIGIN + "/x", ORIGIN + "/y", ORIGIN + "/z"
HOUR, DAY = 3_600.0, 86_400.0
NOON = 1_714_564_800.0  # 2024-05-01T12:00:00Z
# recrawl after 1 h within [2 m, 1 d]: ladder 30 s * 1.5**k (k = 0..19), then 1 d.
FIRST, FLOOR, TOP = 12, 4, 20  # 3,892 s (nearest 1 h), 151.9 s (>= 2 m), 1 d
E1, E2 = '"e1"', '"e2"'
LM1, LM2 = "Wed, 01 May 2024 12:00:00 GMT", "Thu, 02 May 2024 12:00:00 GMT"
OK: dict[str, Any] = {
    "status": 200,
    "etag": E1,
    "last_modified": LM1,
    "digest": "d1",
}  # the first fetch


def rules(**kw: Any) -> CrawlRules:
    base = {"crawl_id": "c", "seeds": (ORIGIN + "/",), "obey_robots": False, "delay": 0.0}
    base |= {"retries": 2, "recrawl_after": HOUR, "recrawl_min": 120.0, "recrawl_max": DAY}
    return CrawlRules.from_policy(CrawlPolicy(**{**base, **kw}))


class Crawl:
    """One origin of a crawl over a MemoryStore, each call committed, on a fake clock."""

    def __init__(self, **policy: Any) -> None:
        self.now = 0.0
        self.store = MemoryStore()
        self.rules = rules(**policy)
        self.frontier = Frontier(clock=lambda: self.now, jitter=lambda: 0.0)

    def admit(self, *refs: UrlRef) -> Admission:
        ch = Changes(self.store)
        batch = FrontierBatch(crawl_id="c", origin=ORIGIN, urls=refs)
        result = self.frontier.admit(ch, batch, self.rules, budget=None)
        ch.commit()
        return result

    def apply(self, outcome: Outcome, r: CrawlRules | None = None) -> Applied:
        self.now = max(self.now, outcome.finished_at)
        ch = Changes(self.store)
        result = self.frontier.apply(ch, outcome, r or self.rules)
        ch.commit()
        return result

    def outcome(self, url: str, at: float, state: str = "fetched", **kw: Any) -> Outcome:
        """The outcome of a request for queued ``url`` that started at ``at``."""
        (seq,) = [s for s, e in queued_entries(self.store, self.state(), 100) if e.url == url]
        return page_outcome(seq, state, started=at, url=url, **kw)

    def fetch(self, url: str, at: float, state: str = "fetched", **kw: Any) -> Applied:
        return self.apply(self.outcome(url, at, state, **kw))

    def due(self, at: float, r: CrawlRules | None = None) -> Applied:
        """Apply the outcome of a ``due`` dispatch (as Stages builds it) at ``at``."""
        self.now = at
        due: dict[str, Any] = {
            "kind": "due",
            "seq": DUE_SEQ,
            "url": ORIGIN,
            "state": "due",
            "started_at": 0.0,
        }
        return self.apply(Outcome(crawl_id="c", origin=ORIGIN, finished_at=at, **due), r)

    @property
    def rp(self) -> RevisitPolicy:
        assert self.rules.revisit is not None
        return self.rules.revisit

    def state(self) -> OriginState:
        return load_origin(self.store, ORIGIN)

    def queued(self) -> list[QueueEntry]:
        return [e for _, e in queued_entries(self.store, self.state(), 1000)]

    def waiting(self) -> list[QueueEntry]:
        """Every lane entry, in key order."""
        decode = msgspec.msgpack.Decoder(QueueEntry).decode
        return [decode(v) for _, v in self.store.scan(REVISITS)]

    def revisit(self) -> Revisit:
        """The revisit state of the one URL waiting in a lane."""
        (entry,) = self.waiting()
        assert entry.revisit is not None
        return entry.revisit

    def revisited(self, at: float, **kw: Any) -> Applied:
        """Promote the one waiting URL at ``at`` and apply a revisit outcome started then."""
        self.due(at)
        (entry,) = self.queued()
        return self.fetch(entry.url, at, **kw)


def fetched_once(changefreq: str | None = None, **policy: Any) -> Crawl:
    """A crawl whose URL X was fetched once at 100 (with validators and digest "d1")."""
    crawl = Crawl(**policy)
    crawl.admit(UrlRef(X, 1, changefreq=changefreq))
    crawl.fetch(X, 100.0, **OK)
    return crawl


def test_a_first_fetch_leaves_the_queue_for_a_lane_with_its_validators() -> None:
    crawl = Crawl()
    crawl.admit(UrlRef(X, 1))
    applied = crawl.fetch(X, 100.0, **OK)
    due = 100.0 + crawl.rp.interval(FIRST)
    st = crawl.state()
    assert (st.head, st.tail, crawl.queued()) == (1, 1, [])
    assert st.lanes == [
        Lane(crawl_id="c", level=FIRST, tail=1, head_due=due, head_fetched=100.0, tail_due=due)
    ]  # fmt: skip
    assert crawl.waiting() == [
        QueueEntry(crawl_id="c", url=X, depth=1, revisit=Revisit(
            fetched_at=100.0, level=FIRST, due=due, etag=E1, last_modified=LM1,
            digest="d1", status=200, changed_at=100.0))
    ]  # fmt: skip
    assert revisits.read_pointer(crawl.store.get(seen_key("c", X))) == (FIRST, 0)
    assert [(s.state, s.url) for s in applied.statuses] == [(TerminalState.FETCHED, X)]


def test_a_crawl_without_recrawl_after_fetches_once() -> None:
    crawl = Crawl(recrawl_after=None, recrawl_min=None, recrawl_max=None)
    crawl.admit(UrlRef(X, 1))
    applied = crawl.fetch(X, 100.0, **OK)
    assert (crawl.state().lanes, crawl.waiting()) == ([], [])
    assert revisits.read_pointer(crawl.store.get(seen_key("c", X))) is None
    assert [s.state for s in applied.statuses] == [TerminalState.FETCHED]


def test_the_scheduler_dispatches_due_at_the_lane_head_then_the_revisit() -> None:
    crawl = fetched_once()
    due = crawl.revisit().due
    sched = Scheduler(crawl.store, lambda cid: crawl.rules if cid == "c" else None)
    sched.track(crawl.state())
    assert sched.next_ready_at() == due
    assert sched.take(due - 0.5, 10) == []
    (d,) = sched.take(due, 10)
    assert (d.kind, d.origin, d.seq, d.entry) == ("due", ORIGIN, DUE_SEQ, None)
    applied = crawl.due(due)
    assert (applied.promoted, applied.statuses, crawl.waiting()) == (1, [], [])
    sched.done(ORIGIN, DUE_SEQ, applied.state)
    (page,) = sched.take(due, 10)
    assert page.kind == "page" and page.entry is not None and page.entry.revisit is not None
    revisit = page.entry.revisit
    assert (page.entry.url, revisit.etag, revisit.last_modified) == (X, E1, LM1)


@pytest.mark.parametrize(
    ("policy", "changefreq", "second", "level"),
    [
        pytest.param({}, None, {"status": 304}, FIRST + 1, id="304-up"),
        pytest.param({}, None, {**OK, "etag": E2}, FIRST + 1, id="same-digest-up"),
        pytest.param({}, None, {**OK, "digest": "d2"}, FIRST - DOWN, id="changed-down"),
        pytest.param({}, "always", {"status": 304}, FLOOR + 1, id="floor-304-up"),
        pytest.param({}, "always", {**OK, "digest": "d2"}, FLOOR, id="floor-changed-clamped"),
        pytest.param({"recrawl_mode": "fixed"}, None, {"status": 304}, 0, id="fixed-304"),
        pytest.param({"recrawl_mode": "fixed"}, None, {**OK, "digest": "d2"}, 0, id="fixed-chg"),
    ],
)
def test_a_revisit_moves_up_after_no_change_and_down_after_one(
    policy: dict[str, Any], changefreq: str | None, second: dict[str, Any], level: int
) -> None:
    crawl = fetched_once(changefreq, **policy)
    at = crawl.revisit().due
    applied = crawl.revisited(at, **second)
    got = crawl.revisit()
    assert (got.level, got.due, got.fetched_at) == (level, at + crawl.rp.interval(level), at)
    assert applied.statuses == [] and applied.revisit


@pytest.mark.parametrize(
    ("second", "kept"),
    [
        pytest.param({"status": 304}, (E1, LM1, "d1", 100.0), id="304-keeps-all"),
        pytest.param({"status": 304, "etag": E2}, (E2, LM1, "d1", 100.0), id="304-new-etag"),
        pytest.param(
            {"status": 200, "digest": "d1"}, (None, None, "d1", 100.0), id="same-body-no-headers"
        ),
        pytest.param(
            {"status": 200, "digest": "d2", "etag": E2, "last_modified": LM2},
            (E2, LM2, "d2", None),  # None: changed at the revisit
            id="changed",
        ),
    ],
)
def test_a_revisit_keeps_the_validators_a_304_leaves_out(
    second: dict[str, Any], kept: tuple[str | None, str | None, str, float | None]
) -> None:
    crawl = fetched_once()
    at = crawl.revisit().due
    crawl.revisited(at, **second)
    got = crawl.revisit()
    *validators, changed_at = kept
    assert [got.etag, got.last_modified, got.digest] == validators
    assert got.changed_at == (at if changed_at is None else changed_at)


@pytest.mark.parametrize("status", [404, 410])
def test_a_gone_revisit_is_confirmed_once_then_dropped(status: int) -> None:
    crawl = fetched_once()
    at = crawl.revisit().due
    first = crawl.revisited(at, state="failed", status=status)
    got = crawl.revisit()
    due = at + crawl.rp.interval(FLOOR)
    assert (got.level, got.gone, got.due, got.status) == (FLOOR, 1, due, status)
    assert first.statuses == []
    second = crawl.revisited(got.due, state="failed", status=status)
    assert [(s.state, s.url, s.status) for s in second.statuses] == [
        (TerminalState.GONE, X, status)
    ]
    assert (crawl.waiting(), crawl.state().lanes, crawl.queued()) == ([], [], [])


def test_a_404_on_a_first_fetch_is_not_scheduled() -> None:
    crawl = Crawl()
    crawl.admit(UrlRef(X, 1))
    applied = crawl.fetch(X, 100.0, state="failed", status=404)
    assert (crawl.waiting(), crawl.state().lanes) == ([], [])
    assert [(s.state, s.status) for s in applied.statuses] == [(TerminalState.FAILED, 404)]


def test_failed_revisits_back_off_then_go_to_the_top_level() -> None:
    crawl = fetched_once()  # retries=2
    rp = crawl.rp
    levels, errors = [], []
    for _ in range(rp.retries + 1):
        applied = crawl.revisited(crawl.revisit().due, state="failed", status=503)
        assert applied.statuses == []
        levels.append(crawl.revisit().level)
        errors.append(crawl.revisit().errors)
    assert rp.ladder[FLOOR] >= 120.0 > rp.ladder[FLOOR - 1]
    assert rp.ladder[6] >= 240.0 > rp.ladder[5]
    assert (levels, errors) == ([FLOOR, 6, TOP], [1, 2, 3])  # 2 m, 4 m, then beyond retries


def lanes(*pushes: tuple[int, str, float]) -> tuple[Changes, OriginState]:
    """An origin whose lanes got ``pushes`` (level, url, due) in that order."""
    ch, st = Changes(MemoryStore()), OriginState(origin=ORIGIN)
    for level, url, due in pushes:
        revisit = Revisit(fetched_at=0.0, level=level, due=due)
        revisits.schedule(ch, st, QueueEntry(crawl_id="c", url=url, depth=1, revisit=revisit))
    return ch, st


def never(_: str) -> float:
    return 0.0


@pytest.mark.parametrize(
    ("now", "moved"),
    [(250.0, []), (300.0, [X]), (450.0, [X, Y]), (1_000.0, [X, Y, Z])],
)
def test_promote_moves_the_earliest_due_first_across_lanes(now: float, moved: list[str]) -> None:
    ch, st = lanes((5, X, 300.0), (5, Z, 500.0), (2, Y, 400.0))
    got = revisits.promote(ch, st, now, never)
    assert [e.url for _, e in got] == moved
    assert [e.url for _, e in queued_entries(ch, st, 10)] == moved


def test_due_times_never_decrease_along_a_lane() -> None:
    ch, st = lanes((3, X, 500.0), (3, Y, 400.0))  # jitter asked for an earlier due
    raw = [ch.get(lane_key(ORIGIN, "c", 3, seq)) for seq in (0, 1)]
    entries = [msgspec.msgpack.decode(r or b"", type=QueueEntry) for r in raw]
    assert [e.revisit.due if e.revisit else None for e in entries] == [500.0, 500.0]
    assert st.lanes[0].tail_due == 500.0
    assert revisits.promote(ch, st, 450.0, never) == []
    assert [e.url for _, e in revisits.promote(ch, st, 500.0, never)] == [X, Y]


def test_promote_skips_the_holes_force_left() -> None:
    w = ORIGIN + "/w"
    ch, st = lanes((3, X, 300.0), (3, Y, 400.0), (3, Z, 500.0), (3, w, 600.0))
    forced = revisits.force(ch, st, "c", Y, (3, 1))
    assert forced is not None and forced.revisit is not None and forced.revisit.forced
    assert revisits.force(ch, st, "c", X, (3, 0)) is not None  # the head: past the hole
    assert revisits.next_due(st, never) == 500.0
    assert [e.url for _, e in revisits.promote(ch, st, 550.0, never)] == [Z]
    assert [e.url for _, e in revisits.promote(ch, st, 1_000.0, never)] == [w]
    assert st.lanes == [] and revisits.waiting(st) == 0


def test_one_promote_moves_at_most_promote_limit() -> None:
    urls = [f"{ORIGIN}/{i}" for i in range(PROMOTE_LIMIT + 3)]
    ch, st = lanes(*((1, url, 10.0) for url in urls))
    first = revisits.promote(ch, st, 100.0, never)
    rest = revisits.promote(ch, st, 100.0, never)
    assert [e.url for _, e in first + rest] == urls
    assert (len(first), len(rest)) == (PROMOTE_LIMIT, 3)


def w3c(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


NOW = NOON + HOUR


@pytest.mark.parametrize(
    ("lastmod", "forced"),
    [
        pytest.param(NOON + 1_800.0, True, id="newer"),
        pytest.param(NOW + FUTURE_SKEW - 60.0, True, id="within-skew"),
        pytest.param(NOON, False, id="same-as-fetch"),
        pytest.param(NOON - HOUR, False, id="older"),
        pytest.param(NOW + FUTURE_SKEW + 60.0, False, id="future"),
    ],
)
def test_a_sitemap_lastmod_newer_than_the_last_fetch_forces_a_revisit(
    lastmod: float, forced: bool
) -> None:
    crawl = Crawl()
    crawl.admit(UrlRef(X, 1), UrlRef(Y, 1))
    crawl.fetch(X, NOON - 600.0, **OK)
    crawl.fetch(Y, NOON, **OK)  # behind X in the same lane
    crawl.now = NOW
    admission = crawl.admit(UrlRef(Y, 1, lastmod=w3c(lastmod)))
    assert (admission.forced, admission.duplicates, admission.queued) == (forced, not forced, [])
    now_queued = [(e.url, e.revisit is not None and e.revisit.forced) for e in crawl.queued()]
    assert now_queued == ([(Y, True)] if forced else [])
    crawl.due(NOON + DAY)  # both due: the lane holds only what was not forced
    assert [e.url for e in crawl.queued()] == ([Y, X] if forced else [X, Y])


def test_recrawl_at_makes_every_revisit_fetched_before_it_due() -> None:
    crawl = Crawl()
    crawl.admit(UrlRef(X, 1), UrlRef(Y, 1), UrlRef(Z, 1))
    for url, at in ((X, 100.0), (Y, 200.0), (Z, 900.0)):
        crawl.fetch(url, at, **OK)
    forced = rules(recrawl_at=500.0)
    st = crawl.state()
    assert revisits.next_due(st, never) == 100.0 + crawl.rp.interval(FIRST)
    assert revisits.next_due(st, lambda c: forced.policy.recrawl_at) == 500.0
    applied = crawl.due(600.0, forced)
    assert (applied.promoted, [e.url for e in crawl.queued()]) == (2, [X, Y])
    assert [e.url for e in crawl.waiting()] == [Z]


@pytest.mark.parametrize("revisit", [False, True], ids=["first-fetch", "revisit"])
def test_a_replayed_outcome_schedules_one_revisit(revisit: bool) -> None:
    crawl = fetched_once() if revisit else Crawl()
    if revisit:
        crawl.due(crawl.revisit().due)  # X queued again, as a revisit
    else:
        crawl.admit(UrlRef(X, 1))
    outcome = crawl.outcome(X, crawl.now, **{**OK, "digest": "d2"})
    crawl.apply(outcome)
    replay = crawl.apply(outcome)
    assert replay.replayed
    assert [e.url for e in crawl.waiting()] == [X]
    assert revisits.waiting(crawl.state()) == 1


def test_a_replayed_due_outcome_promotes_once() -> None:
    crawl = fetched_once()
    due = crawl.revisit().due
    assert crawl.due(due).promoted == 1
    assert crawl.due(due).promoted == 0
    assert [e.url for e in crawl.queued()] == [X]


def test_max_fetches_per_hour_paces_requests_across_origins() -> None:
    origins = [f"http://{name}.test" for name in "abc"]
    seeds = tuple(origin + "/" for origin in origins)
    r = rules(seeds=seeds, recrawl_after=None, max_fetches_per_hour=60)
    store, frontier = MemoryStore(), Frontier(clock=lambda: 0.0, jitter=lambda: 0.0)
    for origin in origins:
        ch = Changes(store)
        refs = tuple(UrlRef(f"{origin}/{i}", 1) for i in range(3))
        batch = FrontierBatch(crawl_id="c", origin=origin, urls=refs)
        assert len(frontier.admit(ch, batch, r, budget=None).queued) == 3
        ch.commit()
    sched = Scheduler(store, lambda cid: r)
    for origin in origins:
        sched.track(load_origin(store, origin))
    assert [d.kind for d in sched.take(0.0, 10)] == ["page"]
    assert sched.take(0.0, 10) == []
    assert sched.next_ready_at() == pytest.approx(60.0)
    assert sched.take(59.0, 10) == []
    assert [d.kind for d in sched.take(60.0, 10)] == ["page"]


def test_a_replayed_revisit_repeats_the_status_it_reported_or_none() -> None:
    """A crash between the commit and the delivery replays the outcome: its status (or none)
    must be the same, rebuilt from the outcome alone (``reported``, ``gone``, as Stages sets
    them), and a gone URL says it was ``fetched`` before (the counts move it)."""
    crawl = fetched_once()
    at = crawl.revisit().due
    crawl.due(at)
    unchanged = crawl.outcome(X, at, status=304, reported="fetched")
    assert crawl.apply(unchanged).statuses == []
    assert crawl.apply(unchanged).statuses == []  # the replay: still none
    first_410 = crawl.revisit().due
    crawl.due(first_410)
    crawl.apply(crawl.outcome(X, first_410, state="failed", status=410, reported="fetched"))
    confirm = crawl.revisit().due
    crawl.due(confirm)
    gone = crawl.outcome(X, confirm, state="failed", status=410, reported="fetched", gone=1)
    expected = [(TerminalState.GONE, TerminalState.FETCHED)]
    assert [(s.state, s.previous) for s in crawl.apply(gone).statuses] == expected
    replay = crawl.apply(gone)
    assert replay.replayed and [(s.state, s.previous) for s in replay.statuses] == expected


def test_a_url_that_failed_first_is_fetched_on_a_revisit_and_says_so() -> None:
    crawl = Crawl()
    crawl.admit(UrlRef(X, 1))
    failed = crawl.fetch(X, 100.0, state="failed", status=503, error="HTTP 503")
    assert [s.state for s in failed.statuses] == [TerminalState.FAILED]
    again = crawl.revisited(crawl.revisit().due, status=200, digest="d", reported="failed")
    assert [(s.state, s.previous) for s in again.statuses] == [
        (TerminalState.FETCHED, TerminalState.FAILED)
    ]
    assert crawl.revisit().state == "fetched"


def test_revisits_do_not_count_against_max_pages() -> None:
    """``--max-pages`` counts distinct URLs admitted: a URL revisited ten times is one."""
    crawl = fetched_once(max_pages=2)
    for _ in range(10):
        crawl.revisited(crawl.revisit().due, status=304)
    ch = Changes(crawl.store)
    budget = 2 - admitted_count(ch, "c")  # as the embedded runner computes it
    batch = FrontierBatch(crawl_id="c", origin=ORIGIN, urls=(UrlRef(Y, 1), UrlRef(Z, 1)))
    admission = crawl.frontier.admit(ch, batch, crawl.rules, budget=budget)
    assert [e.url for _, e in admission.queued] == [Y]  # X and Y: the budget of 2
    assert [(s.url, s.state) for s in admission.statuses] == [(Z, TerminalState.CANCELLED)]


def test_a_paused_crawl_waits_and_a_stopped_one_ends_its_schedule_keeping_states() -> None:
    crawl = fetched_once()
    due = crawl.revisit().due
    paused = rules(state="paused")
    sched = Scheduler(crawl.store, lambda cid: paused)
    sched.track(crawl.state())
    assert sched.take(due, 10) == []  # paused: looked at again later, nothing dispatched
    stopped = rules(state="stopped")
    sched = Scheduler(crawl.store, lambda cid: stopped)
    sched.track(crawl.state())
    (d,) = sched.take(100.5, 10)  # long before the due: a stop queues it now...
    assert d.kind == "due"
    crawl.frontier.clock = lambda: 100.5
    crawl.apply(
        Outcome(crawl_id="c", origin=ORIGIN, kind="due", seq=DUE_SEQ, url=ORIGIN,
                state="due", started_at=0.0, finished_at=100.5),
        stopped,
    )  # fmt: skip
    assert [e.url for e in crawl.queued()] == [X]
    cancel = crawl.outcome(X, 0.0, state="cancelled", reported="fetched")
    applied = crawl.apply(cancel, stopped)
    # ...and cancelled: it leaves the schedule, and the URL stays `fetched` (no new state).
    assert applied.statuses == [] and crawl.waiting() == [] and crawl.state().lanes == []


def test_an_origin_that_only_waits_for_revisits_yields_its_place() -> None:
    """Memory stays bounded: with origins waiting in the store, one whose URLs all wait for
    revisits leaves memory at its next applied outcome (the refill brings it back)."""
    crawl = fetched_once()
    sched = Scheduler(crawl.store, lambda cid: crawl.rules, max_origins=1)
    sched.track(crawl.state())
    sched.overflow = True  # another origin waits in the store
    sched.done(ORIGIN, DUE_SEQ, crawl.state())
    assert ORIGIN not in sched and sched.spills == 1
