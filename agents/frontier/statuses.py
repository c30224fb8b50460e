"""What the frontier records of a URL it has seen: the seen table's marks (the depth, or the
event that queued or ended the URL, so that a replayed event is recognised) and the terminal
statuses it reports for a URL's end.
"""

from __future__ import annotations

import msgspec

from streamcrawl.schemas.records import (
    FrontierBatch,
    Outcome,
    QueueEntry,
    TerminalState,
    UrlRef,
    UrlStatus,
)

RETRY = "retry"  # an outcome's state when the URL may be fetched again


def terminal_state(outcome: Outcome) -> TerminalState:
    """The state an outcome ends its entry in (a retry that may not be retried: failed)."""
    return TerminalState.FAILED if outcome.state == RETRY else TerminalState(outcome.state)


def attempts_after(before: int, outcome: Outcome) -> int:
    """Attempts of an entry once ``outcome`` is applied (a dispatch without request: none)."""
    return before + (1 if outcome.started_at > 0 else 0)


def moved_statuses(
    entry: QueueEntry, outcome: Outcome, state: TerminalState, previous: str | None
) -> list[UrlStatus]:
    """The status to report for a URL of a continuous crawl now in ``state``: none if that is
    the state reported before, else one that says which it replaces."""
    if previous is None:
        return [terminal_status(entry, outcome, state)]
    if state.value == previous:
        return []
    status = terminal_status(entry, outcome, state)
    return [msgspec.structs.replace(status, previous=TerminalState(previous))]


def terminal_status(entry: QueueEntry, outcome: Outcome, state: TerminalState) -> UrlStatus:
    """The terminal status of ``entry`` (attempts already counted) ended by ``outcome``."""
    return UrlStatus(
        crawl_id=entry.crawl_id,
        url=entry.url,
        origin=outcome.origin,
        state=state,
        depth=entry.depth,
        attempts=entry.attempts,
        status=outcome.status,
        last_error=outcome.error,
        final_url=outcome.final_url,
        updated_at=outcome.finished_at,
        lastmod=entry.lastmod,
    )


# Seen value of a URL that ended at admission: _ENDED, source, state, reason (empty: none), depth.
_ENDED = b"!"


def ended_mark(source: bytes, state: TerminalState, reason: str | None, depth: int) -> bytes:
    if not source:
        return str(depth).encode()  # no replays to recognise (the embedded crawl)
    why = (reason or "").encode()
    return b"\x00".join((_ENDED, source, state.value.encode(), why, b"%d" % depth))


_QUEUED = b"?"  # seen value of a URL queued by a known event: _QUEUED, source, seq, depth


def queued_mark(source: bytes, seq: int, depth: int) -> bytes:
    if not source:
        return str(depth).encode()  # the embedded crawl commits atomically: no partial state
    return b"\x00".join((_QUEUED, source, b"%d" % seq, b"%d" % depth))


def queued_by(seen: bytes, source: bytes) -> int | None:
    """The seq at which event ``source`` queued the URL whose seen value is ``seen``."""
    if not source or not seen.startswith(_QUEUED + b"\x00" + source + b"\x00"):
        return None
    return int(seen.split(b"\x00")[2])


def ended_at_admission(seen: bytes, source: bytes) -> tuple[TerminalState, str | None, int] | None:
    """(state, reason, depth) if ``seen`` marks a URL ended at admission by event ``source``."""
    if not source or not seen.startswith(_ENDED + b"\x00" + source + b"\x00"):
        return None
    _, _, state, reason, depth = seen.split(b"\x00")
    return TerminalState(state.decode()), reason.decode() or None, int(depth)


def ended_status(
    batch: FrontierBatch,
    ref: UrlRef,
    url: str,
    state: TerminalState,
    reason: str | None,
    depth: int,
    now: float,
) -> UrlStatus:
    """The status of ``url`` (canonical ``ref``) ended at admission. One ``robots_denied``
    is the status its dispatch would have ended it with (``terminal_status``): no request, so no
    attempt, and the sitemap's lastmod, which a queue entry carries."""
    denied = state is TerminalState.ROBOTS_DENIED
    return UrlStatus(
        crawl_id=batch.crawl_id,
        url=url,
        origin=batch.origin,
        state=state,
        depth=depth,
        last_error=reason,
        updated_at=now,
        lastmod=ref.lastmod if denied else None,
    )
