"""Revisit lanes: where a continuous crawl's fetched URLs wait until they are due again.

An origin has one lane per (crawl, ladder level) it uses (``Lane`` in its ``OriginState``): a
FIFO of revisits, one key each (``lane_key``), pushed in the order their fetches were applied.
All revisits of a lane have the same interval, so their due times grow along it (a push never
goes below the lane's last due: ``tail_due``), and the origin's next due URL is at the head of
one of its few lanes: the scheduler reads ``next_due`` from the origin's record, never scans.

When revisits fall due, ``promote`` moves them, in due order, to the tail of the origin's one
FIFO queue (``agents.frontier.queue``), where new URLs wait too: from there a revisit is
dispatched, fetched and applied like any URL, under the same delay, robots.txt, backoff and
concurrency. A URL's seen mark points at its lane entry (``pointer``), so that a sitemap's newer
``lastmod`` or ``streamcrawl recrawl URL`` can move it to the queue at once (``force``); a whole
crawl is forced by ``CrawlPolicy.recrawl_at``: a lane head fetched before it counts as due.

Crash order (``agents.stream.tables``): lane entries ride with the queue segments (written
first), the seen pointers next, the origin record (lane head and tail) after, deletions last.
Replaying an outcome or a ``due`` event over a partial commit writes the same keys again.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from streamcrawl.agents.frontier import queue
from streamcrawl.agents.frontier.store import REVISITS, Changes, Store
from streamcrawl.agents.policy.revisit import RevisitPolicy
from streamcrawl.schemas.records import (
    Lane,
    OriginState,
    Outcome,
    QueueEntry,
    Revisit,
    TerminalState,
)

PROMOTE_LIMIT = 256  # revisits moved to the queue per event (the rest at the next one)
_POINTER = b"R"  # seen value of a URL waiting in a lane: _POINTER, level, seq

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(QueueEntry).decode

# crawl id -> its recrawl_at (0: never forced; STOPPED: the crawl stopped, everything is due)
RecrawlAt = Callable[[str], float]
STOPPED = float("inf")
# A revisit that entered (+1) or left (-1) a lane: (crawl id, its due time, +1 or -1), for the
# counts ``status`` reads (agents/stream/counts.py).
LaneMove = tuple[str, float, int]


def lane_key(origin: str, crawl_id: str, level: int, seq: int) -> bytes:
    return b"".join(
        (
            REVISITS,
            origin.encode(),
            b"\x00",
            crawl_id.encode(),
            b"\x00",
            level.to_bytes(2, "big"),
            seq.to_bytes(8, "big"),
        )
    )


def pointer(level: int, seq: int) -> bytes:
    """The seen value of a URL waiting in lane ``level`` at ``seq``."""
    return b"\x00".join((_POINTER, b"%d" % level, b"%d" % seq))


def read_pointer(seen: bytes | None) -> tuple[int, int] | None:
    """(level, seq) of a seen value written by ``pointer``; None for any other seen value."""
    if seen is None or not seen.startswith(_POINTER + b"\x00"):
        return None
    _, level, seq = seen.split(b"\x00")
    return int(level), int(seq)


def waiting(st: OriginState) -> int:
    """Revisits waiting in the origin's lanes (holes left by ``force`` included)."""
    return sum(lane.tail - lane.head for lane in st.lanes)


def _due(lane: Lane, recrawl_at: RecrawlAt) -> float:
    forced = recrawl_at(lane.crawl_id)
    if forced == STOPPED:
        return 0.0
    return forced if lane.head_fetched < forced < lane.head_due else lane.head_due


def next_due(st: OriginState, recrawl_at: RecrawlAt) -> float | None:
    """When the origin's next revisit falls due (None: no lane holds any)."""
    dues = [_due(lane, recrawl_at) for lane in st.lanes if lane.head < lane.tail]
    return min(dues) if dues else None


def next_lane(st: OriginState, recrawl_at: RecrawlAt) -> Lane | None:
    """The lane whose head falls due first."""
    lanes = [lane for lane in st.lanes if lane.head < lane.tail]
    return min(lanes, key=lambda lane: _due(lane, recrawl_at)) if lanes else None


def schedule(ch: Changes, st: OriginState, entry: QueueEntry) -> tuple[int, int, float]:
    """Put ``entry`` (its ``revisit`` says level and due) at the tail of its lane; returns
    (level, seq) for the URL's seen ``pointer``, and its due. The entry's due is raised to the
    lane's last due if needed, so that due times grow along the lane."""
    revisit = entry.revisit
    assert revisit is not None
    lane = _lane(st, entry.crawl_id, revisit.level)
    due = max(revisit.due, lane.tail_due)
    if due != revisit.due:
        entry = msgspec.structs.replace(entry, revisit=msgspec.structs.replace(revisit, due=due))
    seq = lane.tail
    ch.put(lane_key(st.origin, entry.crawl_id, revisit.level, seq), _encode(entry))
    if lane.head == lane.tail:
        lane.head_due, lane.head_fetched = due, revisit.fetched_at
    lane.tail += 1
    lane.tail_due = due
    return revisit.level, seq, due


def _lane(st: OriginState, crawl_id: str, level: int) -> Lane:
    for lane in st.lanes:
        if lane.crawl_id == crawl_id and lane.level == level:
            return lane
    lane = Lane(crawl_id=crawl_id, level=level)
    st.lanes.append(lane)
    return lane


def promote(
    ch: Changes, st: OriginState, now: float, recrawl_at: RecrawlAt, limit: int = PROMOTE_LIMIT
) -> list[tuple[int, QueueEntry]]:
    """Move up to ``limit`` due revisits, earliest due first, to the origin's queue; returns
    what was queued (seq, entry). Idempotent over a replay: it moves what is due now."""
    moved: list[tuple[int, QueueEntry]] = []
    while len(moved) < limit:
        lane = next_lane(st, recrawl_at)
        if lane is None or _due(lane, recrawl_at) > now:
            break
        key = lane_key(st.origin, lane.crawl_id, lane.level, lane.head)
        raw = ch.get(key)
        _pop(ch, st, lane)
        if raw is None:
            continue  # a hole: the revisit was forced out earlier
        entry = _decode(raw)
        ch.delete(key)
        seq = st.tail
        queue.push(ch, st, seq, entry)
        moved.append((seq, entry))
    st.lanes = [lane for lane in st.lanes if lane.head < lane.tail]
    return moved


def _pop(ch: Changes | Store, st: OriginState, lane: Lane) -> None:
    """Move the lane's head one on, and its head times to the next entry's (if any)."""
    lane.head += 1
    while lane.head < lane.tail:
        raw = ch.get(lane_key(st.origin, lane.crawl_id, lane.level, lane.head))
        if raw is not None:
            nxt = _decode(raw).revisit
            assert nxt is not None
            lane.head_due, lane.head_fetched = nxt.due, nxt.fetched_at
            return
        lane.head += 1  # a hole left by ``force``


def force(
    ch: Changes,
    st: OriginState,
    crawl_id: str,
    url: str,
    at: tuple[int, int],
    when: Callable[[Revisit], bool] = lambda _: True,
) -> QueueEntry | None:
    """Move the revisit of ``url`` waiting at ``at`` (its seen ``pointer``) to the origin's
    queue now, marked ``forced``, if ``when`` says so of it; None if it did not move (not
    there any more: already queued, or gone)."""
    level, seq = at
    key = lane_key(st.origin, crawl_id, level, seq)
    raw = ch.get(key)
    if raw is None:
        return None
    entry = _decode(raw)
    if entry.url != url or entry.revisit is None:
        return None  # a lane emptied and started again: the pointer is stale
    if not when(entry.revisit):
        return None
    ch.delete(key)
    for lane in st.lanes:
        if lane.crawl_id == crawl_id and lane.level == level and lane.head == seq:
            _pop(ch, st, lane)
    st.lanes = [lane for lane in st.lanes if lane.head < lane.tail]
    entry = msgspec.structs.replace(
        entry, revisit=msgspec.structs.replace(entry.revisit, forced=True)
    )
    queue.push(ch, st, st.tail, entry)
    return entry


def changed(previous: Revisit, outcome: Outcome) -> bool:
    """Whether a revisit's response differs from the copy of the previous fetch: not a 304,
    and a body whose digest is another."""
    return outcome.status != 304 and outcome.digest not in (None, previous.digest)


def after_fetch(
    entry: QueueEntry, outcome: Outcome, state: TerminalState, rp: RevisitPolicy, u: float
) -> tuple[Revisit | None, bool]:
    """The URL's next revisit once ``outcome`` ended ``entry`` in ``state`` (None: it is not
    revisited again), and whether a 404/410 just confirmed it gone.

    A fetch (page, sitemap or feed) is rescheduled: its first revisit at ``rp.first``, later
    ones up the ladder after no change (a 304, or the same body digest) and down after a
    change. A 404/410 on a revisit is confirmed by one more revisit at the soonest level, then
    the URL is gone. A failure backs off (``rp.after_error``). Any other end (robots.txt now
    denies it, it redirects, it is too large...) drops it from the schedule.
    """
    started = outcome.started_at or outcome.finished_at
    if state in _FETCHED:
        return _after_success(entry, outcome, started, rp, u), False
    if state is not TerminalState.FAILED:
        return None, False
    if outcome.status in GONE_STATUSES:
        return _after_gone(entry, outcome, started, rp, u)
    return _after_error(entry, outcome, started, rp, u), False


def _after_success(
    entry: QueueEntry, outcome: Outcome, started: float, rp: RevisitPolicy, u: float
) -> Revisit:
    """The next revisit after a fetch: the first, else up the ladder if unchanged, down if not."""
    prev, kind = entry.revisit, entry.kind
    if prev is None:
        level, changed_at = rp.first(kind, entry.changefreq), started
        digest, etag, modified = outcome.digest, outcome.etag, outcome.last_modified
    else:
        same = not changed(prev, outcome)
        level = rp.next(prev.level, not same, kind)
        changed_at = prev.changed_at if same else started
        digest = prev.digest if outcome.digest is None else outcome.digest
        keep = outcome.status == 304  # a 304 may leave out validators that still hold
        etag = outcome.etag if outcome.etag is not None or not keep else prev.etag
        modified = outcome.last_modified
        if modified is None and keep:
            modified = prev.last_modified
    return Revisit(
        fetched_at=started,
        level=level,
        due=rp.due(started, level, u),
        etag=etag,
        last_modified=modified,
        digest=digest,
        status=outcome.status,
        changed_at=changed_at,
    )


def _after_gone(
    entry: QueueEntry, outcome: Outcome, started: float, rp: RevisitPolicy, u: float
) -> tuple[Revisit | None, bool]:
    """After a 404/410: one confirming revisit at the soonest level, then gone."""
    prev = entry.revisit
    if prev is None:
        return None, False  # never was a page: nothing to keep fresh
    if prev.gone >= 1:
        return None, True
    level = rp.gone_confirm(entry.kind)
    return msgspec.structs.replace(
        prev,
        level=level,
        due=rp.due(started, level, u),
        gone=prev.gone + 1,
        status=outcome.status,
        forced=False,
    ), False


def _after_error(
    entry: QueueEntry, outcome: Outcome, started: float, rp: RevisitPolicy, u: float
) -> Revisit:
    """After a failure other than a 404/410: back off further with each failure in a row."""
    prev = entry.revisit
    errors = (prev.errors if prev is not None else 0) + 1
    level = rp.after_error(errors, entry.kind)
    base = prev if prev is not None else Revisit(fetched_at=started, level=level, due=0.0)
    return msgspec.structs.replace(
        base,
        level=level,
        due=rp.due(started, level, u),
        errors=errors,
        gone=0,
        status=outcome.status,
        forced=False,
    )


def reported(
    previous: str | None, again: Revisit | None, gone: bool, state: TerminalState
) -> TerminalState:
    """The URL's terminal state once a fetch ended it in ``state`` (``again``: its next
    revisit, None: it left the schedule; ``previous``: the state reported before, None for a
    first fetch). A failed revisit that is tried again keeps the URL's state."""
    if gone:
        return TerminalState.GONE
    if previous is not None and state is TerminalState.CANCELLED:
        return TerminalState(previous)  # the crawl stopped: the URL is what it was
    if previous is None or again is None or state in _FETCHED:
        return state
    return TerminalState(previous)


GONE_STATUSES = frozenset({404, 410})
_FETCHED = frozenset({TerminalState.FETCHED, TerminalState.SITEMAP, TerminalState.FEED})
