"""The frontier: dedupe, per-origin durable FIFO queues, per-origin timing and backoff.

Pure logic over a ``Changes`` overlay (``agents.frontier.store``): the single writer (the
embedded runner, or the Faust frontier agent) calls ``admit`` for discovered URLs and ``apply``
for fetch outcomes, then commits the overlay (atomically in the embedded runner; key by key in a
crash-safe order in the Faust tables, so a crash can leave part of one commit). Both are
idempotent, which also completes such a partial commit: a replayed batch finds its URLs seen; a
replayed outcome finds its queue entry ended and only repeats its terminal status. The steps
``admit`` takes for each URL are ``agents.frontier.admission``; the queue's layout (segments,
the head cursor in the origin's record) is ``agents.frontier.queue``; the tables' keys and the
origin records ``agents.frontier.records``; what the seen table holds of a URL and the statuses
that end it ``agents.frontier.statuses``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from streamcrawl.agents.frontier import queue, revisits
from streamcrawl.agents.frontier.admission import Admission, Admitting
from streamcrawl.agents.frontier.records import load_origin, seen_key, store_origin
from streamcrawl.agents.frontier.statuses import (
    RETRY,
    attempts_after,
    moved_statuses,
    terminal_state,
    terminal_status,
)
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.agents.policy import rendering
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.robots.rules import robots_expiry
from streamcrawl.agents.urls import cookies
from streamcrawl.schemas.records import (
    FrontierBatch,
    OriginState,
    Outcome,
    QueueEntry,
    Revisit,
    TerminalState,
    UrlStatus,
)

__all__ = ("Admission", "Applied", "Frontier", "robots_unusable")


@dataclass
class Applied:
    """What ``apply`` did with an outcome: terminal states to sink, the origin's new state."""

    statuses: list[UrlStatus]
    state: OriginState
    retried: bool = False
    replayed: bool = False
    # Continuous crawling: the applied fetch was a revisit, and found a change (or the page
    # gone); revisits moved to the queue; revisits in and out of lanes, for the counts.
    revisit: bool = False
    changed: bool = False
    promoted: int = 0
    moves: list[revisits.LaneMove] = field(default_factory=list)


class Frontier:
    """Computes state changes; never commits them (the caller owns the transaction)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.clock = clock
        self.jitter = jitter

    def admit(
        self,
        ch: Changes,
        batch: FrontierBatch,
        rules: CrawlRules,
        *,
        budget: int | None,
        source: bytes = b"",
        count_admitted: bool = True,
        canonical: bool = False,
    ) -> Admission:
        """Dedupe, scope-check and enqueue a batch of URLs for ONE origin.

        ``budget`` is how many more URLs this crawl may queue (``None``: unlimited); URLs over it
        end ``cancelled``. A URL that the origin's cached, unexpired robots.txt denies ends
        ``robots_denied`` here, with the status its dispatch would have ended it with, and
        takes none of the budget; while robots.txt is not known (or the crawl is not running)
        it is queued and the scheduler decides (``admission._robots_denies``). Each new URL is
        marked seen exactly once, so it gets exactly one terminal state: queued now (and a
        terminal state later), or ``out_of_scope``/``cancelled``/``robots_denied``.

        ``source`` names the event being applied (Kafka: topic, partition, offset). A URL that
        ends at admission is marked seen with it, so a replay of that same event, which finds
        the URL seen, repeats its terminal status (one lost in a crash is sent again) while any
        other event linking the URL is a plain duplicate. A URL it queues is marked seen with it
        and its seq: if a crash lost the origin state that counted it (the seen marks are
        written before the origin, see ``agents.stream.tables``), the replay queues it at the
        same seq.

        ``count_admitted=False``: the caller keeps the crawl's admitted count itself (the
        Kafka agent, in its partition's counts record), else it is ``admitted_key``.

        ``canonical=True``: the batch's URLs are canonical URLs of ``batch.origin`` (the
        embedded crawl's own stages made them with these rules), so they are not canonicalized
        again; a batch that crossed a topic is, since anyone may have written it.
        """
        admitting = Admitting(ch, batch, rules, budget, source, self.clock())
        for ref in batch.urls:
            url = ref.url if canonical else admitting.canonical(ref)
            if url is not None:
                admitting.add(ref, url)
        return admitting.finish(count_admitted)

    def apply(self, ch: Changes, outcome: Outcome, rules: CrawlRules) -> Applied:
        """Apply one fetch outcome: robots cache, politeness timing, backoff, retry or terminal."""
        st = load_origin(ch, outcome.origin)
        if outcome.kind == "robots":
            return self._apply_robots(ch, outcome, rules, st)
        if outcome.kind == "due":
            moves: list[revisits.LaneMove] = []
            promoted = self._promote(ch, st, rules, moves)
            store_origin(ch, st)
            return Applied([], st, promoted=promoted, moves=moves)
        found = queue.entry_at(ch, st, outcome.seq)
        if found is None:
            queue.forget_replayed(ch, st, outcome.seq)
            return Applied(self._replayed(outcome, rules), st, replayed=True)
        entry = found
        policy = rules.policy
        self._time(st, outcome, rules)
        keep_cookies(st, outcome, rules)
        keep_render_tally(st, outcome)
        if outcome.state == RETRY and entry.attempts + 1 <= policy.retries:
            again = msgspec.structs.replace(
                entry, attempts=entry.attempts + 1, last_error=outcome.error
            )
            queue.replace(ch, st, outcome.seq, again)
            if not outcome.backoff:  # still wait before the retry: exponential with jitter
                wait = min(policy.max_backoff, max(policy.delay, 0.5) * 2**entry.attempts)
                st.next_fetch_at = max(st.next_fetch_at, outcome.finished_at + wait)
            store_origin(ch, st)
            return Applied([], st, retried=True)
        state = terminal_state(outcome)
        entry = msgspec.structs.replace(entry, attempts=attempts_after(entry.attempts, outcome))
        queue.end(ch, st, outcome.seq)
        if outcome.final_url and outcome.final_url != entry.url:
            ch.put(seen_key(entry.crawl_id, outcome.final_url), str(entry.depth).encode())
        if state is TerminalState.FETCHED:
            st.fetched += 1
        statuses = [terminal_status(entry, outcome, state)]
        moves = []
        if rules.revisit is not None:
            statuses = self._reschedule(ch, st, entry, outcome, state, rules, moves)
        promoted = self._promote(ch, st, rules, moves) if st.lanes else 0
        store_origin(ch, st)
        previous = entry.revisit
        changed = previous is not None and (
            any(s.state is TerminalState.GONE for s in statuses)
            or revisits.changed(previous, outcome)
        )
        return Applied(
            statuses,
            st,
            revisit=previous is not None,
            changed=changed,
            promoted=promoted,
            moves=moves,
        )

    def _reschedule(
        self,
        ch: Changes,
        st: OriginState,
        entry: QueueEntry,
        outcome: Outcome,
        state: TerminalState,
        rules: CrawlRules,
        moves: list[revisits.LaneMove],
    ) -> list[UrlStatus]:
        """Continuous crawling: put the URL in its next revisit's lane (its seen mark points
        there; ``moves`` gets it), or drop it. A first fetch reports its terminal state as any
        crawl's; a revisit only a change of the URL's state (``moved_statuses``)."""
        assert rules.revisit is not None
        revisit, gone = revisits.after_fetch(entry, outcome, state, rules.revisit, self.jitter())
        previous = entry.revisit.state if entry.revisit is not None else None
        now = revisits.reported(previous, revisit, gone, state)
        if revisit is not None:
            revisit = msgspec.structs.replace(revisit, state=now.value)
            level, seq, due = revisits.schedule(
                ch, st, msgspec.structs.replace(entry, attempts=0, revisit=revisit)
            )
            ch.put(seen_key(entry.crawl_id, entry.url), revisits.pointer(level, seq))
            moves.append((entry.crawl_id, due, 1))
        return moved_statuses(entry, outcome, now, previous)

    def _promote(
        self, ch: Changes, st: OriginState, rules: CrawlRules, moves: list[revisits.LaneMove]
    ) -> int:
        """Move the origin's due revisits to its queue (``revisits.promote``); ``moves`` gets
        them."""
        crawl_id, forced = rules.policy.crawl_id, rules.policy.recrawl_at
        if rules.policy.state == "stopped":
            forced = revisits.STOPPED  # queued, then cancelled: a stop ends the schedule
        moved = revisits.promote(ch, st, self.clock(), lambda c: forced if c == crawl_id else 0.0)
        for _, entry in moved:
            if entry.revisit is not None:
                moves.append((entry.crawl_id, entry.revisit.due, -1))
        return len(moved)

    def _replayed(self, outcome: Outcome, rules: CrawlRules) -> list[UrlStatus]:
        """The terminal status a replayed outcome produced the first time, rebuilt from the
        outcome alone (its entry is gone), so that a status lost in a crash between the table
        commit and its delivery is sent again. A retry that re-queued its entry had none."""
        if outcome.state == RETRY and outcome.attempts <= rules.policy.retries:
            return []
        state = terminal_state(outcome)
        entry = QueueEntry(
            crawl_id=outcome.crawl_id,
            url=outcome.url,
            depth=outcome.depth,
            # Outcome.attempts = entry's + 1
            attempts=attempts_after(outcome.attempts - 1, outcome),
            lastmod=outcome.lastmod,
        )
        if outcome.reported is not None and rules.revisit is not None:
            # A revisit reported a state only if it changed the URL's: decide it again.
            before = Revisit(
                fetched_at=0.0, level=0, due=0.0, gone=outcome.gone, state=outcome.reported
            )
            entry = msgspec.structs.replace(entry, revisit=before)
            again, gone = revisits.after_fetch(entry, outcome, state, rules.revisit, 0.5)
            now = revisits.reported(outcome.reported, again, gone, state)
            return moved_statuses(entry, outcome, now, outcome.reported)
        return [terminal_status(entry, outcome, state)]

    def _apply_robots(
        self, ch: Changes, outcome: Outcome, rules: CrawlRules, st: OriginState
    ) -> Applied:
        failed = outcome.robots_status is None or outcome.robots_status >= 500
        st.robots_status = outcome.robots_status
        st.robots_body = outcome.robots_body
        st.robots_expires = robots_expiry(outcome.robots_status, outcome.finished_at, rules.policy)
        # After `retries` consecutive failures the origin is treated as disallowed (RFC 9309
        # "complete disallow") for the error TTL, so its URLs end robots_denied instead of
        # waiting forever; a later successful fetch lifts it.
        st.failures = st.failures + 1 if failed else 0
        if failed and st.failures <= rules.policy.retries:
            # Retry robots.txt sooner than the error TTL, with exponential backoff.
            wait = max(rules.policy.delay, 1.0) * 2 ** (st.failures - 1) * (0.5 + self.jitter())
            st.robots_expires = outcome.finished_at + min(rules.policy.robots_error_ttl, wait)
        self._time(st, outcome, rules)
        keep_cookies(st, outcome, rules)
        store_origin(ch, st)
        return Applied([], st)

    def _time(self, st: OriginState, outcome: Outcome, rules: CrawlRules) -> None:
        """Politeness: the next request starts no earlier than start + delay, or after backoff."""
        policy = rules.policy
        if outcome.started_at > 0:
            st.next_fetch_at = max(st.next_fetch_at, outcome.started_at + rules.delay(st))
        if outcome.backoff:
            st.errors += 1
            if outcome.kind == "page":
                st.failures += 1
            base = max(policy.delay, 1.0) * 2 ** max(st.failures - 1, 0)
            wait = min(policy.max_backoff, base * (0.5 + self.jitter()))
            if outcome.retry_after is not None:
                wait = max(wait, min(outcome.retry_after, policy.max_backoff))
            st.backoff_until = outcome.finished_at + wait
            st.next_fetch_at = max(st.next_fetch_at, st.backoff_until)
        elif outcome.kind == "page" and outcome.state != RETRY and outcome.started_at > 0:
            # A request that did not fail; an entry ended without one (denied, cancelled)
            # says nothing of the origin, and must not make robots.txt that keeps failing
            # "not yet given up on" (``robots_unusable``) again.
            st.failures = 0


def robots_unusable(st: OriginState, rules: CrawlRules) -> bool:
    """robots.txt failed (5xx/unreachable) but not yet often enough to give up on the origin."""
    failed = st.robots_expires > 0 and (st.robots_status is None or st.robots_status >= 500)
    return failed and st.failures <= rules.policy.retries


def keep_render_tally(st: OriginState, outcome: Outcome) -> None:
    """Count a render compared with its HTTP copy (``--render auto``) in the tally of its
    crawl and path prefix, which later pages of the prefix are decided by."""
    if outcome.render_needed is None:
        return
    prefix = rendering.path_prefix(outcome.url)
    tallies = st.renders.setdefault(outcome.crawl_id, {})
    if prefix in tallies or len(tallies) < rendering.MAX_PREFIXES:  # bounded per origin
        tallies[prefix] = rendering.tallied(tallies.get(prefix), outcome.render_needed)


def keep_cookies(st: OriginState, outcome: Outcome, rules: CrawlRules) -> None:
    """Store the Set-Cookie headers of ``outcome`` in the crawl's jar for the origin, as of the
    outcome's end (deterministic: a replay of the outcome stores the same jar)."""
    if not outcome.set_cookies or not rules.requests.cookies:
        return
    jar = st.jars.get(outcome.crawl_id, ())
    for set_cookie in outcome.set_cookies:
        jar = cookies.receive(jar, set_cookie.header, set_cookie.url, outcome.finished_at)
    jar = cookies.prune(jar, outcome.finished_at)
    if jar:
        st.jars[outcome.crawl_id] = jar
    else:
        st.jars.pop(outcome.crawl_id, None)
