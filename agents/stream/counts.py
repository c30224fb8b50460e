"""Terminal-state counts per partition: kept by the frontier agent, read by ``status``.

The frontier agent adds the terminal states each event ends to its partition's
``PartitionCounts`` (one ``META`` key in its table, written in the event's own state change)
and publishes the whole record to ``<prefix>.counts`` (compacted), to the partition of the same
number, with the event's offset commit. The last message of each ``counts`` partition is then
that partition's complete count, so ``status`` reads one message per partition: O(partitions),
not O(URLs).

Replay-safe: the record keeps the offset of the last event it counted per input topic; a
replayed event (offset not above it) counts nothing and only re-sends the record.

Compatible both ways: a field added to these records has a default (a record written before
it decodes), and msgspec ignores a field it does not know (an older ``status`` reads a newer
record).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

import msgspec

from streamcrawl.agents.frontier.store import META, Changes
from streamcrawl.agents.plugins.chain import MISSING_CLASS
from streamcrawl.agents.stream.tables import partition_for
from streamcrawl.schemas.records import TerminalState, UrlStatus

COUNTS_VERSION = 1
SLOWEST = 10  # origins kept per crawl and partition in ``CrawlCounts.slowest``
SMOOTHING = 0.2  # weight of a new fetch in an origin's smoothed latency
MAX_CRAWL_ERRORS = 8  # distinct errors kept per crawl and partition in ``CrawlCounts.errors``
MAX_CRAWL_ERROR_CHARS = 300
# Error classes of a URL's ``last_error`` that are its crawl's, not the URL's: the crawl's spec
# cannot run on the worker (docs/plugins.md, "A worker without the plugin").
CRAWL_ERROR_CLASSES = frozenset({MISSING_CLASS})


class SlowOrigin(msgspec.Struct, array_like=True):
    """One of the slowest origins of a crawl in a partition, ``[origin, latency, fetches]``:
    its fetch latency in seconds (request start to outcome, smoothed exponentially with
    ``SMOOTHING``) and the fetches measured since it entered the list."""

    origin: str
    latency: float
    fetches: int = 1


class CrawlCounts(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One crawl's URLs per terminal state in one partition, and its fetch time span.

    ``admitted``: URLs the partition queued for the crawl (less ``assets``, its page budget
    share), kept here so that a batch writes one counter key, not two; ``None``: none yet.
    ``assets``: the page assets among them (docs/assets.md), which take none of the page
    budget.

    A continuous crawl's revisits: ``revisits`` applied, ``changed`` those that found a change
    (or the page gone), their time span; ``due`` the revisits waiting in lanes by the bucket
    of ``due_width`` seconds they fall due in (``str(int(due // due_width))``), so ``status``
    tells what is due now, in the next hour, and since when the oldest waits.

    ``refused``: URLs that ended at admission (out of scope, over the page budget): in
    ``states`` but never in ``admitted``, so ``admitted - (sum(states) - refused)`` is the
    URLs queued and not yet ended. ``slowest``: the origins with the slowest fetches
    (``note_fetch``), at most ``SLOWEST``, in no order.

    ``errors``: the crawl's own errors (``crawl_error``: a plugin this worker lacks) -> the URLs
    that ended ``failed`` with it, at most ``MAX_CRAWL_ERRORS`` distinct ones (a later one is
    not kept; its URLs still count in ``states``).
    """

    states: dict[str, int] = {}
    first_fetched_at: float | None = None
    last_fetched_at: float | None = None
    admitted: int | None = None
    assets: int = 0
    revisits: int = 0
    changed: int = 0
    first_revisit_at: float | None = None
    last_revisit_at: float | None = None
    due: dict[str, int] = {}
    due_width: float = 0.0
    refused: int = 0
    slowest: list[SlowOrigin] = []
    errors: dict[str, int] = {}


Fetch = tuple[str, str, float]  # crawl id, origin, seconds from request start to outcome


@dataclass
class Revisits:
    """What one event did to a continuous crawl's revisits (``Frontier`` reports it)."""

    fetched: list[tuple[str, bool, float]] = field(default_factory=list)  # crawl, changed, at
    moves: Sequence[tuple[str, float, int]] = ()  # crawl, due, +1 into / -1 out of a lane
    width: Callable[[str], float] = lambda _crawl_id: 3600.0  # a crawl's due bucket, s

    def __bool__(self) -> bool:
        return bool(self.fetched or self.moves)


def due_width(recrawl_min: float | None) -> float:
    """The due bucket of a crawl: a quarter of its shortest interval, 1 s to 1 h."""
    return max(1.0, min(3600.0, (recrawl_min or 3600.0) / 4))


class PartitionCounts(msgspec.Struct, kw_only=True):
    """The value of one ``counts`` message: every crawl's counts in one frontier partition."""

    v: int = COUNTS_VERSION
    partition: int
    offsets: dict[str, int] = {}  # input topic -> offset of the last event counted
    crawls: dict[str, CrawlCounts] = {}
    updated_at: float = 0.0


_encode = msgspec.json.Encoder().encode
_decoder = msgspec.json.Decoder(PartitionCounts)


def counts_key(partition: int) -> bytes:
    """The table key of one partition's counts (``META`` rides in the ``origins`` table)."""
    return META + b"counts\x00" + str(partition).encode()


@cache
def message_key(partition: int, partitions: int) -> bytes:
    """A key that murmur2 sends to ``partition`` of ``partitions``: the agent's publisher
    partitions by key, and ``counts`` partition p must hold frontier partition p's record."""
    i = 0
    while partition_for(f"counts-{partition}-{i}", partitions) != partition:
        i += 1
    return f"counts-{partition}-{i}".encode()


def decode_counts(value: bytes) -> PartitionCounts:
    """Raises ``msgspec.DecodeError`` / ``ValidationError`` for a bad message."""
    return _decoder.decode(value)


def _record(ch: Changes, partition: int) -> PartitionCounts:
    raw = ch.get(counts_key(partition))
    return decode_counts(raw) if raw is not None else PartitionCounts(partition=partition)


def admitted(ch: Changes, partition: int, crawl_id: str) -> int:
    """URLs ``partition`` has queued for ``crawl_id`` (see ``CrawlCounts.admitted``)."""
    crawl = _record(ch, partition).crawls.get(crawl_id)
    if crawl is not None and crawl.admitted is not None:
        return crawl.admitted
    return 0


def admitted_pages(ch: Changes, partition: int, crawl_id: str) -> int:
    """URLs other than page assets ``partition`` has queued for ``crawl_id``: its share of the
    page budget."""
    crawl = _record(ch, partition).crawls.get(crawl_id)
    if crawl is not None and crawl.admitted is not None:
        return crawl.admitted - crawl.assets
    return 0


def add_admitted(ch: Changes, partition: int, crawl_id: str, queued: int, assets: int = 0) -> None:
    """Count ``queued`` more URLs queued for ``crawl_id`` by ``partition``, ``assets`` of them
    page assets.

    Replay-safe without an offset: a replayed event queues nothing again (its URLs are seen),
    except when the crash lost its origin's record, and then this key too (written after it,
    ``agents.stream.tables``)."""
    if not queued:
        return
    before = admitted(ch, partition, crawl_id)
    record = _record(ch, partition)
    counts = record.crawls.setdefault(crawl_id, CrawlCounts())
    counts.admitted = before + queued
    counts.assets += assets
    ch.put(counts_key(partition), _encode(record))


def count(
    ch: Changes,
    topic: str,
    partition: int,
    offset: int,
    statuses: Iterable[UrlStatus],
    revisits: Revisits | None = None,
    *,
    refused: Iterable[UrlStatus] = (),
    fetch: Fetch | None = None,
) -> bytes | None:
    """Add the event's terminal ``statuses`` (and ``revisits``) to its partition's counts in
    ``ch``; ``refused``: those of ``statuses`` that ended at admission (``CrawlCounts.refused``);
    ``fetch``: the request the event's outcome measured (``note_fetch``).

    Returns the record to publish, or None when the event ended no URL, moved no revisit and
    measured no fetch. A replayed event (``offset`` already counted for ``topic``) changes
    nothing; its record is returned again.
    """
    statuses = list(statuses)
    if not statuses and not revisits and fetch is None:
        return None
    raw = ch.get(counts_key(partition))
    record = decode_counts(raw) if raw is not None else PartitionCounts(partition=partition)
    if offset <= record.offsets.get(topic, -1):
        return raw
    for status in statuses:
        crawl = record.crawls.setdefault(status.crawl_id, CrawlCounts())
        crawl.states[status.state.value] = crawl.states.get(status.state.value, 0) + 1
        if status.previous is not None:  # a continuous crawl's URL moved from that state
            before = status.previous.value
            crawl.states[before] = max(0, crawl.states.get(before, 0) - 1)
        note_error(crawl, crawl_error(status))
        if status.state == TerminalState.FETCHED:
            at = status.updated_at
            first, last = crawl.first_fetched_at, crawl.last_fetched_at
            crawl.first_fetched_at = at if first is None else min(first, at)
            crawl.last_fetched_at = at if last is None else max(last, at)
    for status in refused:
        record.crawls.setdefault(status.crawl_id, CrawlCounts()).refused += 1
    if revisits:
        _revisits(record, revisits)
    if fetch is not None:
        crawl_id, origin, seconds = fetch
        note_fetch(record.crawls.setdefault(crawl_id, CrawlCounts()), origin, seconds)
    record.offsets[topic] = offset
    record.updated_at = time.time()
    value = _encode(record)
    ch.put(counts_key(partition), value)
    return value


def crawl_error(status: UrlStatus) -> str | None:
    """The error of a URL that ended ``failed`` because of its crawl (``CRAWL_ERROR_CLASSES``),
    at most ``MAX_CRAWL_ERROR_CHARS``; None for any other URL."""
    error = status.last_error
    if status.state != TerminalState.FAILED or error is None:
        return None
    if error.partition(":")[0] not in CRAWL_ERROR_CLASSES:
        return None
    return error[:MAX_CRAWL_ERROR_CHARS]


def note_error(crawl: CrawlCounts, error: str | None, urls: int = 1) -> None:
    """Count ``urls`` more URLs of ``crawl`` ended with ``error`` (None: nothing), within
    ``MAX_CRAWL_ERRORS`` distinct errors."""
    if error is None or (error not in crawl.errors and len(crawl.errors) >= MAX_CRAWL_ERRORS):
        return
    crawl.errors[error] = crawl.errors.get(error, 0) + urls


def _revisits(record: PartitionCounts, revisits: Revisits) -> None:
    for crawl_id, changed, at in revisits.fetched:
        crawl = record.crawls.setdefault(crawl_id, CrawlCounts())
        crawl.revisits += 1
        crawl.changed += changed
        first, last = crawl.first_revisit_at, crawl.last_revisit_at
        crawl.first_revisit_at = at if first is None else min(first, at)
        crawl.last_revisit_at = at if last is None else max(last, at)
    for crawl_id, due, delta in revisits.moves:
        crawl = record.crawls.setdefault(crawl_id, CrawlCounts())
        if not crawl.due_width:
            crawl.due_width = revisits.width(crawl_id)
        bucket = str(int(due // crawl.due_width))
        n = crawl.due.get(bucket, 0) + delta
        if n > 0:
            crawl.due[bucket] = n
        else:
            crawl.due.pop(bucket, None)


def note_fetch(crawl: CrawlCounts, origin: str, seconds: float) -> None:
    """Keep ``crawl.slowest`` the origins with the slowest fetches, at most ``SLOWEST``: an
    origin in the list smooths its latency with ``seconds``; another enters if the list has
    room or ``seconds`` is above the fastest listed, which it replaces. O(``SLOWEST``) per
    fetch, no per-origin state outside the list: an origin enters on one slow fetch and leaves
    once others are slower than its smoothed latency."""
    seconds = round(max(0.0, seconds), 3)
    fastest = -1
    for i, slow in enumerate(crawl.slowest):
        if slow.origin == origin:
            slow.latency = round(slow.latency + SMOOTHING * (seconds - slow.latency), 3)
            slow.fetches += 1
            return
        if fastest < 0 or slow.latency < crawl.slowest[fastest].latency:
            fastest = i
    if len(crawl.slowest) < SLOWEST:
        crawl.slowest.append(SlowOrigin(origin, seconds))
    elif seconds > crawl.slowest[fastest].latency:
        crawl.slowest[fastest] = SlowOrigin(origin, seconds)
