"""Which origin may start which request, and when: the per-worker, in-memory politeness index.

It reads frontier state but never writes it. Each origin is a ``Slot`` (as in Scrapy) holding
its in-flight requests and the start time of the last one; a heap orders origins by the time
they become ready. Rebuilt from the store when the wiring (re)gains ownership of origins.

Bounded: at most ``max_origins`` origins are in memory. An origin with work that does not fit
stays in the store only (``overflow``: the wiring's ``agents.stream.origin_index.Refill`` walks the
store for such origins whenever there is room); while some wait there, an origin leaves memory
after ``TURN`` dispatches with nothing in flight, so every origin gets its turn. Leaving is
safe for politeness: the frontier's record says when its next request may start.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from streamcrawl.agents.frontier import revisits
from streamcrawl.agents.frontier.frontier import robots_unusable
from streamcrawl.agents.frontier.records import load_origin, queued_entries
from streamcrawl.agents.frontier.store import Changes, Store
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.robots.rules import RobotsRules
from streamcrawl.schemas.records import Cookie, OriginState, QueueEntry, RenderTally

ROBOTS_SEQ = -1
DUE_SEQ = -2  # a ``due`` dispatch: no request, the frontier queues the origin's due revisits
PAUSED_POLL = 1.0  # seconds between looks at an origin whose crawl is paused or unknown
LEND_POLL = 0.05  # seconds between looks at a lent slot's origin, and its claimant's
TURN = 8  # dispatches an origin makes before it yields its place to one waiting in the store
DispatchKind = Literal["robots", "page", "deny", "cancel", "due"]


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One unit of work: fetch robots.txt, fetch a page, or end an entry without a request."""

    kind: DispatchKind
    origin: str
    seq: int
    entry: QueueEntry | None
    rules: CrawlRules
    robots: RobotsRules | None = None
    after: float | None = None  # start of the origin's previous request (politeness metric)
    # Seconds since the origin's previous request ended, for the first dispatch after it: how
    # long the wiring took to start the next one (with no delay, none of it is politeness).
    since_end: float | None = None
    # A crawl with cookies: its jar for the origin, as the frontier last stored it.
    cookies: tuple[Cookie, ...] = ()
    # ``--render auto``: the crawl's render tallies for the origin, by path prefix.
    renders: dict[str, RenderTally] = field(default_factory=dict)
    # A crawl that renders: the robots.txt response ``robots`` was read from (status, body),
    # for a render worker that rebuilds the dispatch (docs/rendering.md, "The Kafka wiring").
    robots_txt: tuple[int | None, str | None] | None = None


@dataclass
class Slot:
    """Per-origin politeness: requests in flight and when the last one started."""

    in_flight: set[int] = field(default_factory=set)
    # Fetched, outcome published but not yet applied by the frontier: skipped when choosing
    # the next entry, but no longer holding a concurrency slot (see ``Scheduler.fetched``).
    settling: set[int] = field(default_factory=set)
    last_start: float = float("-inf")  # never started
    ready_at: float = 0.0
    # Held back by the wiring (its report could not be published) or by a loan's delay.
    hold_until: float = 0.0
    turns: int = 0  # requests started since the origin came into memory
    last_end: float | None = None  # its last request ended (``Scheduler.ended``), not reported
    claims: int = 0  # requests waiting for a loan of this slot (``Scheduler.claim``)
    lent: bool = False  # lent once: kept in memory while its origin has no work (its hold)


@dataclass(frozen=True, slots=True)
class Loan:
    """An origin's slot lent to a request this scheduler did not dispatch (a rendered page's
    subrequest to another origin): in flight, under ``token``, until ``Scheduler.returned``."""

    origin: str
    token: int


class Scheduler:
    """Heap of origins by ready time, with per-origin concurrency and delay."""

    def __init__(
        self,
        store: Store | Changes,
        rules_for: Callable[[str], CrawlRules | None],
        *,
        max_origins: int | None = None,
    ) -> None:
        self.store = store
        self.rules_for = rules_for
        self.max_origins = max_origins  # None: every origin with work is in memory
        self.overflow = False  # some origin with work is in the store only
        self.spills = 0  # origins refused or sent back to the store, ever (see Refill)
        self.slots: dict[str, Slot] = {}
        self._states: dict[str, OriginState] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._tick = itertools.count()
        self.settling = 0  # fetched, outcome not applied yet (all origins; see ``fetched``)
        # Origins whose every queued URL is settling: their next request needs an outcome
        # applied first (a chain of pages found one by one). The wiring hurries the frontier.
        self.blocked: set[str] = set()
        # max_fetches_per_hour: a token bucket per crawl, (tokens, when last filled).
        self._buckets: dict[str, tuple[float, float]] = {}
        self._loans = itertools.count(DUE_SEQ - 1, -1)  # tokens no queue seq can be

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, origin: object) -> bool:
        return origin in self._states

    def in_flight(self) -> int:
        return sum(len(s.in_flight) for s in self.slots.values())

    def full(self) -> bool:
        return self.max_origins is not None and len(self._states) >= self.max_origins

    def track(self, state: OriginState, *, assumed_start: float | None = None) -> bool:
        """(Re)index an origin after its state changed. ``assumed_start`` treats the origin as
        having just been fetched (used when ownership moves here: wait one delay first).

        False if the origin has work but no room in memory: it waits in the store
        (``overflow``)."""
        origin = state.origin
        slot = self.slots.get(origin)
        idle = slot is None or not (slot.in_flight or slot.settling)
        if state.head >= state.tail and not state.lanes and idle:
            self._states.pop(origin, None)
            if slot is None or not _lent(slot):
                self.slots.pop(origin, None)
            return True
        if origin not in self._states and self.full():
            self._spill()
            return False
        self._states[origin] = state
        slot = self.slots.setdefault(origin, Slot())
        if assumed_start is not None:
            slot.last_start = max(slot.last_start, assumed_start)
        self._push(origin, slot)
        return True

    def _spill(self) -> None:
        self.overflow = True
        self.spills += 1

    def forget(self, origin: str) -> None:
        """Drop an origin (its partition was revoked); in-flight work is the caller's to end."""
        self.blocked.discard(origin)
        self._states.pop(origin, None)
        slot = self.slots.pop(origin, None)
        if slot is not None:
            self.settling -= len(slot.settling)

    def origins(self) -> list[str]:
        return list(self._states)

    def states(self) -> list[OriginState]:
        """The states of the origins in memory (as last tracked)."""
        return list(self._states.values())

    def census(self, now: float) -> dict[str, int]:
        """Origins in memory by what holds them (the dashboard's politeness-bound vs
        capacity-bound share): ``fetching`` (a request in flight or its outcome not applied),
        ``ready`` (may start now; the wiring has no room yet) or ``waiting`` (a delay, a
        backoff, a pause or a revisit not due). O(origins in memory): for a scrape, not a loop.
        """
        out = {"ready": 0, "waiting": 0, "fetching": 0}
        for origin in self._states:
            slot = self.slots.get(origin)
            if slot is not None and (slot.in_flight or slot.settling):
                out["fetching"] += 1
            elif slot is None or slot.ready_at <= now:
                out["ready"] += 1
            else:
                out["waiting"] += 1
        return out

    def next_ready_at(self) -> float | None:
        while self._heap:
            ready_at, _, origin = self._heap[0]
            slot = self.slots.get(origin)
            if origin in self._states and slot is not None and slot.ready_at == ready_at:
                return ready_at
            heapq.heappop(self._heap)
        return None

    def take(self, now: float, limit: int) -> list[Dispatch]:
        """Up to ``limit`` dispatches whose time has come, marking requests started at ``now``."""
        out: list[Dispatch] = []
        while self._heap and self._heap[0][0] <= now and len(out) < limit:
            ready_at, _, origin = heapq.heappop(self._heap)
            slot = self.slots.get(origin)
            state = self._states.get(origin)
            if slot is None or state is None or slot.ready_at != ready_at:
                continue  # stale heap entry
            dispatch = self._decide(origin, state, slot, now)
            if dispatch is None:
                continue  # nothing to do until a dispatch of this origin ends
            if isinstance(dispatch, float):
                slot.ready_at = dispatch  # look again then (paused crawl, robots.txt retry)
                heapq.heappush(self._heap, (dispatch, next(self._tick), origin))
                continue
            if dispatch.kind in ("robots", "page"):
                after, since_end = dispatch.after, dispatch.since_end
                if slot.last_start > float("-inf"):
                    after = slot.last_start
                if slot.last_end is not None:
                    since_end = now - slot.last_end
                    slot.last_end = None
                if after is not dispatch.after or since_end is not dispatch.since_end:
                    dispatch = replace(dispatch, after=after, since_end=since_end)  # one copy
                slot.last_start = now
                slot.turns += 1
            slot.in_flight.add(dispatch.seq)
            out.append(dispatch)
            self._push(origin, slot)
        return out

    def ended(self, origin: str, at: float) -> None:
        """A request of ``origin`` ended at ``at`` (its report is ready): the next dispatch of
        the origin carries the time since (``Dispatch.since_end``)."""
        slot = self.slots.get(origin)
        if slot is not None:
            slot.last_end = at

    def fetched(self, origin: str, seq: int, started_at: float) -> None:
        """The request of a page dispatch ended and its outcome is on its way to the frontier.

        The concurrency slot is free now (the delay still counts from the request's start), so
        a wiring whose outcomes take a while to be applied (Kafka: a produce and a consume)
        does not add that round trip to every origin's cycle; a page being rendered in
        process (the embedded crawl), so that its subrequests, and other pages' subrequests to
        its origin, borrow the slot (``lend``). The entry stays skipped until ``done``.
        Outcomes that change the origin's timing (backoff, robots.txt) must not be reported
        here: their slot stays taken until ``done`` brings the new state (a rendered page's
        fetch was a 2xx: no backoff)."""
        slot = self.slots.get(origin)
        if slot is not None and seq in slot.in_flight:
            slot.in_flight.discard(seq)
            slot.settling.add(seq)
            self.settling += 1
            # The request really started a little after its dispatch (event-loop latency):
            # the delay counts from the real start, as the frontier's next_fetch_at does.
            slot.last_start = max(slot.last_start, started_at)
            if origin in self._states:
                self._push(origin, slot)

    def queued_besides(self, origin: str) -> bool:
        """Whether ``origin`` has URLs queued besides those in flight or settling (as its
        state was last tracked): its next request need not wait for their outcomes."""
        state = self._states.get(origin)
        slot = self.slots.get(origin)
        if state is None or slot is None:
            return False
        pending = state.tail - state.head - len(state.done)  # done: ended, past the head
        return pending > len(slot.in_flight) + len(slot.settling)

    def unexpected(self, origin: str, seq: int) -> bool:
        """Whether an outcome of ``seq`` is one this scheduler neither dispatched nor has seen
        applied: a seq at or past the origin's head as last tracked, not in flight, not
        settling. The wiring logs such an outcome (one published by a previous owner after
        this one indexed the origin: a refetch of its URL may have started). Unknown origins
        (not in memory) are never unexpected."""
        state = self._states.get(origin)
        slot = self.slots.get(origin)
        if state is None or slot is None or seq < state.head:
            return False
        return seq not in slot.in_flight and seq not in slot.settling

    def hold(self, origin: str, until: float) -> None:
        """Start nothing for ``origin`` before ``until`` (kept in memory only: the wiring could
        not publish, so nothing durable can say it)."""
        slot = self.slots.get(origin)
        if slot is not None:
            slot.hold_until = max(slot.hold_until, until)
            if origin in self._states:
                self._push(origin, slot)

    def claim(self, origin: str) -> None:
        """A request not dispatched here waits for ``origin``'s slot (``lend``): until
        ``unclaim``, the origin's own dispatches let it go first, so that a busy origin's
        queue does not keep the slot from it."""
        self.slots.setdefault(origin, Slot()).claims += 1

    def unclaim(self, origin: str) -> None:
        """The request of a ``claim`` got its loan, or stopped waiting."""
        slot = self.slots.get(origin)
        if slot is not None and slot.claims > 0:
            slot.claims -= 1
            if origin in self._states:
                self._push(origin, slot)

    def lend(
        self, origin: str, now: float, delay: float, limit: int, not_before: float = 0.0
    ) -> Loan | float:
        """Lend ``origin``'s slot to a request this scheduler did not dispatch (a rendered
        page's subrequest): a ``Loan`` if it may start at ``now``, else when to ask again.

        The loan keeps the origin's politeness as a dispatch would: fewer than ``limit``
        requests in flight, ``delay`` seconds since the last one started (a dispatch's or
        another loan's), none before ``not_before`` (the origin's stored next fetch or
        backoff) or a hold. It counts as in flight and started now: the origin's next dispatch
        waits for ``returned``, then ``delay`` after the loan's request was on the wire."""
        slot = self.slots.setdefault(origin, Slot())
        if len(slot.in_flight) >= limit or ROBOTS_SEQ in slot.in_flight:
            return now + LEND_POLL  # look again soon: a request in flight may end any time
        ready = max(not_before, slot.last_start + delay, slot.hold_until)
        if ready > now:
            return ready
        loan = Loan(origin, next(self._loans))
        slot.in_flight.add(loan.token)
        slot.lent = True
        slot.last_start = now
        slot.hold_until = max(slot.hold_until, now + delay)
        if origin in self._states:
            self._push(origin, slot)
        return loan

    def returned(self, loan: Loan, sent_at: float, delay: float) -> None:
        """The request of ``loan`` ended; it was on the wire at ``sent_at``: nothing starts
        for the origin before ``sent_at + delay`` (its robots.txt's delay, as the borrower
        read it, may be longer than this scheduler knows yet)."""
        slot = self.slots.get(loan.origin)
        if slot is None or loan.token not in slot.in_flight:
            return
        slot.in_flight.discard(loan.token)
        slot.last_start = max(slot.last_start, sent_at)
        slot.hold_until = max(slot.hold_until, sent_at + delay)
        if loan.origin in self._states:
            self._push(loan.origin, slot)

    def origin_state(self, origin: str) -> OriginState:
        """``origin``'s state as the store holds it (a fresh ``OriginState`` if none)."""
        return load_origin(self.store, origin)

    def done(self, origin: str, seq: int, state: OriginState | None) -> None:
        """A dispatch ended; ``state`` is the origin's state after its outcome was applied."""
        self.blocked.discard(origin)
        slot = self.slots.get(origin)
        if slot is not None:
            slot.in_flight.discard(seq)
            if seq in slot.settling:
                slot.settling.discard(seq)
                self.settling -= 1
        if state is not None:
            self.track(state)
            if slot is not None and self._yields(origin, slot):
                self.forget(origin)
                self._spill()
        elif slot is not None and origin in self._states:
            self._push(origin, slot)

    def _yields(self, origin: str, slot: Slot) -> bool:
        """Leave memory for an origin waiting in the store: its turn is over, nothing of it is
        in flight, nothing holds it back (a hold lives in memory only)."""
        state = self._states.get(origin)
        return (
            self.overflow
            and state is not None
            # its turn is over, or it only waits for revisits (it comes back at a refill)
            and (slot.turns >= TURN or state.head >= state.tail)
            and not slot.in_flight
            and not slot.settling
            and slot.hold_until <= time.time()
        )

    def _push(self, origin: str, slot: Slot) -> None:
        state = self._states[origin]
        head = self._head_rules(state, slot)
        delay = head.delay(state) if head is not None else 0.0
        ready = max(
            state.next_fetch_at, state.backoff_until, slot.last_start + delay, slot.hold_until
        )
        if head is None and state.lanes:  # only revisits: none may start before it is due
            due = revisits.next_due(state, self._recrawl_at)
            ready = max(ready, due) if due is not None else ready
        if slot.in_flight and ready < slot.last_start + delay:
            ready = slot.last_start + delay
        slot.ready_at = ready
        heapq.heappush(self._heap, (ready, next(self._tick), origin))

    def _recrawl_at(self, crawl_id: str) -> float:
        """When the crawl made every revisit fetched before due (a stopped crawl: all of them
        at once, so that they are queued and cancelled)."""
        rules = self.rules_for(crawl_id)
        if rules is None:
            return 0.0
        return revisits.STOPPED if rules.policy.state == "stopped" else rules.policy.recrawl_at

    def refresh(self) -> None:
        """A crawl's spec changed (``recrawl``, ``stop``, ``resume``): look at every origin in
        memory again now, not at the time its old spec gave."""
        for origin in list(self._states):
            slot = self.slots.get(origin)
            if slot is not None:
                self._push(origin, slot)

    def _due(self, origin: str, state: OriginState, now: float) -> Dispatch | float | None:
        """Nothing queued, revisits waiting: a ``due`` dispatch once the first is due."""
        lane = revisits.next_lane(state, self._recrawl_at)
        due = revisits.next_due(state, self._recrawl_at)
        if lane is None or due is None:
            return None
        if due > now:
            return due
        rules = self.rules_for(lane.crawl_id)
        if rules is None or rules.policy.state == "paused":
            return now + PAUSED_POLL
        return Dispatch("due", origin, DUE_SEQ, None, rules)

    def _head_rules(self, state: OriginState, slot: Slot) -> CrawlRules | None:
        head = queued_entries(self.store, state, 1)
        return self.rules_for(head[0][1].crawl_id) if head else None

    def _decide(
        self, origin: str, state: OriginState, slot: Slot, now: float
    ) -> Dispatch | float | None:
        """The next dispatch for a ready origin; a float: look again at that time; None: wait
        for an in-flight dispatch of this origin to end."""
        if ROBOTS_SEQ in slot.in_flight:
            return None
        entries = queued_entries(self.store, state, 1, skip=slot.in_flight | slot.settling)
        if not entries:
            if slot.settling:
                self.blocked.add(origin)  # until ``done``: an applied outcome may queue more
            elif state.lanes and not slot.in_flight:
                return self._due(origin, state, now)
            return None
        seq, entry = entries[0]
        rules = self.rules_for(entry.crawl_id)
        if rules is None or rules.policy.state == "paused":
            return now + PAUSED_POLL  # the spec has not arrived yet, or the crawl is paused
        if rules.policy.state == "stopped":
            return Dispatch("cancel", origin, seq, entry, rules)
        limit = rules.policy.per_origin_concurrency
        if len(slot.in_flight) >= limit:
            return None
        if slot.claims:
            return now + LEND_POLL  # a waiting loan goes first (``claim``): look again then
        wait = self._rate_wait(rules, now)
        if wait is not None:
            return wait
        if rules.robots_expired(state, now):
            if slot.in_flight:
                return None  # let in-flight pages finish before refreshing robots.txt
            robots_fetch = Dispatch(
                "robots", origin, ROBOTS_SEQ, None, rules, cookies=_jar(rules, state)
            )
            return self._spend(rules, robots_fetch)
        if robots_unusable(state, rules):
            return max(state.robots_expires, now)  # robots.txt failed: wait for its retry
        robots = rules.robots(state)
        if robots is not None and not robots.allowed(entry.url, rules.policy.user_agent):
            return Dispatch("deny", origin, seq, entry, rules)
        page = Dispatch(
            "page",
            origin,
            seq,
            entry,
            rules,
            robots,
            cookies=_jar(rules, state),
            renders=state.renders.get(rules.policy.crawl_id, {}),
            robots_txt=_robots_txt(rules, state),
        )
        return self._spend(rules, page)

    def _rate_wait(self, rules: CrawlRules, now: float) -> float | None:
        """When the crawl's ``max_fetches_per_hour`` lets its next request start, None if now.

        A token bucket of a minute's worth of requests, refilled at limit / 3600 per second:
        any hour holds at most limit + limit / 60 requests (per scheduler: per worker)."""
        limit = rules.policy.max_fetches_per_hour
        if limit is None:
            return None
        rate, cap = limit / 3600.0, max(1.0, limit / 60.0)
        tokens, at = self._buckets.get(rules.policy.crawl_id, (cap, now))
        tokens = min(cap, tokens + (now - at) * rate)
        self._buckets[rules.policy.crawl_id] = (tokens, now)
        return None if tokens >= 1.0 else now + (1.0 - tokens) / rate

    def _spend(self, rules: CrawlRules, dispatch: Dispatch) -> Dispatch:
        """Take a token of the crawl's bucket for ``dispatch`` (a request)."""
        bucket = self._buckets.get(rules.policy.crawl_id)
        if bucket is not None:
            self._buckets[rules.policy.crawl_id] = (bucket[0] - 1.0, bucket[1])
        return dispatch


def _lent(slot: Slot) -> bool:
    """Whether ``slot`` holds what a loan left (one in flight, one claimed, its hold): kept
    while its origin has no work, so that the origin's next request still waits for it."""
    return bool(slot.in_flight or slot.claims or slot.lent)


def _robots_txt(rules: CrawlRules, state: OriginState) -> tuple[int | None, str | None] | None:
    """The origin's robots.txt response, for a crawl that renders and obeys robots.txt."""
    if rules.policy.render == "never" or not rules.policy.obey_robots:
        return None
    return state.robots_status, state.robots_body


def _jar(rules: CrawlRules, state: OriginState) -> tuple[Cookie, ...]:
    """The crawl's cookie jar for the origin of ``state`` (empty without cookies)."""
    if not rules.requests.cookies:
        return ()
    return state.jars.get(rules.policy.crawl_id, ())
