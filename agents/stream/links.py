"""The links pages found for other origins, of many reports, sent to ``frontier`` together.

``frontier`` is keyed by origin, so a page's links to other origins went out as one batch per
origin linked, each a produce and, for the frontier agent, a Faust event; these were the larger
part of the worker's Kafka messages (docs/performance.md, "Kafka messages per page").

``LinkBatches.send`` takes a report's batches and returns once they are in Kafka (acked). What
is handed over until the flush goes (at most ``window`` seconds after the first, sooner where
waiting would hold an origin's next request back: see ``LinkBatches``) is sent together: ONE
batch per crawl and partition (``by_partition``: the URLs of every origin whose partition it
is, each origin's in the order handed over; the frontier agent drops the duplicates, as it
drops those of one page), keyed by the first of those origins, so it lands on that partition,
and split to the message size (``frontier_values``). With many origins a page links a few
that rarely meet in one flush, so one batch per origin made several ``frontier`` messages and
frontier-agent events a page (docs/performance.md, "Kafka messages per page"); per partition
there are at most as many as partitions per flush.

A page's links still reach Kafka before its outcome is published (the fetch service awaits
``send`` first). The wait is added to the publish, and the publish to the time an origin's
concurrency slot is taken: the flush goes ``ACK_ROOM`` before the origin's delay ends, so a
polite crawl's requests are not held back.

A send that fails fails every report of the flush; each then publishes its bare retry outcome
(``FetchService._publish_failure``) and its URL is fetched again, its links with it. A report
whose task was cancelled meanwhile (abandoned at a revoke or a stop) still has its links sent:
harmless, they are deduplicated, and its URL, still queued, is fetched again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Final

from streamcrawl.agents.content.listings import merge
from streamcrawl.agents.stream.frontier_agent import Publisher
from streamcrawl.agents.stream.messages import MESSAGE_BYTES, frontier_values
from streamcrawl.agents.stream.partitioner import key_hash
from streamcrawl.agents.urls.canonical import origin_of
from streamcrawl.schemas.codec import BadMessage, decode, encode
from streamcrawl.schemas.records import FrontierBatch, UrlRef

# How long the links of a page wait for other pages' links at most: long enough that a busy
# worker's pages share one batch per partition (docs/performance.md, "Kafka messages per page").
WINDOW: Final = 0.1
# A flush starts before its window ends once this many URLs are waiting.
MAX_URLS: Final = 5000
# A flush goes this long before a waiting report's origin may send its next request: the
# links' and then the outcome's acks (a few ms each on one broker) fit in it.
ACK_ROOM: Final = 0.03
# How long the links of a report may wait at most when its origin has other URLs queued for
# its next request (``send``'s ``queued``): that request waits for the delay anyway, so the
# report waits for others until ACK_ROOM before it, up to this. With many origins the few
# other origins a page links rarely meet within WINDOW; the hold gives the frontier agent fewer
# events per page and the politeness-bound row a higher rate (docs/performance.md, "Kafka
# messages per page").
HOLD: Final = 0.5

Piece = tuple[bytes, bytes | None]  # a message's key and value


class LinkBatches:
    """Batches of many reports, merged and sent together (see the module's docstring).

    A flush goes out at the earliest of: once ``max_urls`` URLs wait; ``ACK_ROOM`` seconds
    before a waiting report's origin may start its next request (its ``due``: the request's
    start plus the origin's delay), so that waiting never holds a polite request back; and
    for each waiting report, ``window`` seconds after it came, or ``hold`` seconds if its
    origin has a delay and other URLs queued (``queued``: its next request waits for the
    delay, not for this report). A report whose origin has nothing else queued waits only the
    window: its outcome may bring that origin's next URL (a chain of pages found one by one
    would otherwise wait the whole delay and then the frontier's apply latency each time).
    A report without a delay (``due`` None) waits the window, but only while more reports may
    come (``idle``: none can, as no request is being fetched and none may start now): its
    origin's concurrency slot stays taken until its outcome is in Kafka, so the wait is added to
    every request of that origin, and it buys a merge only with reports that are still to come.
    Once nothing is coming the flush goes at once: a busy worker still merges a window of
    reports, one origin crawled without a delay is not held to one request per window
    (docs/performance.md, "Latency at delay 0"). The fetch service calls ``poke`` when ``idle``
    may have become true.
    """

    def __init__(
        self,
        publish: Publisher,
        *,
        partition: Callable[[str], Hashable] = lambda origin: origin,
        window: float = WINDOW,
        hold: float = HOLD,
        max_urls: int = MAX_URLS,
        message_bytes: int = MESSAGE_BYTES,
        clock: Callable[[], float] = time.time,
        idle: Callable[[], bool] = lambda: False,
    ) -> None:
        """``partition(origin)``: the ``frontier`` partition of ``origin``'s key (the
        producer's partitioner; by default each origin its own: one batch per origin);
        ``idle()``: no report can join a flush soon (the fetch service: no request is being
        fetched and none may start now)."""
        self.publish = publish
        self.partition = partition
        self.window = window
        self.hold = hold
        self.max_urls = max_urls
        self.message_bytes = message_bytes
        self.clock = clock
        self.idle = idle
        self._waiting: list[tuple[Sequence[FrontierBatch], asyncio.Future[None]]] = []
        self._urls = 0
        self._undelayed = 0  # waiting reports without a delay: their origins wait for the flush
        self._deadline = float("inf")  # of the flush that takes new batches (``clock``)
        self._wake = asyncio.Event()  # the deadline moved, or the flush may go now
        self._flushing: set[asyncio.Task[None]] = set()  # started flushes (referenced)
        self._next: asyncio.Task[None] | None = None  # the flush that takes new batches

    async def send(
        self, batches: Sequence[FrontierBatch], *, due: float | None = None, queued: bool = False
    ) -> None:
        """Return once ``batches`` are in Kafka; raise what their send raised. ``due``: when
        the report's origin may start its next request (``clock`` time); None: no delay.
        ``queued``: that origin has other URLs queued (with a ``due``, the report may wait
        ``hold`` instead of ``window``)."""
        if not batches:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((batches, done))
        self._urls += sum(len(b.urls) for b in batches)
        now = self.clock()
        if self._next is None:
            self._next = asyncio.ensure_future(self._flush())
            self._flushing.add(self._next)
            self._next.add_done_callback(self._flushing.discard)
        if due is None:
            self._undelayed += 1
            latest = now + self.window
        else:
            latest = min(now + (self.hold if queued else self.window), due - ACK_ROOM)
        self._deadline = min(self._deadline, latest)
        self._wake.set()  # the flush looks at its deadline and the URLs waiting again
        await done

    def poke(self) -> None:
        """Look at ``idle`` again (a request ended, or the dispatch loop started what it could):
        a flush may go now."""
        if self._next is not None:
            self._wake.set()

    def _due_now(self) -> bool:
        return (
            self._urls >= self.max_urls
            or self.clock() >= self._deadline
            or (self._undelayed > 0 and self.idle())
        )

    async def _flush(self) -> None:
        while not self._due_now():
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._deadline - self.clock())
        waiting, self._waiting, self._urls, self._next = self._waiting, [], 0, None
        self._undelayed = 0
        self._deadline = float("inf")  # later batches: the next flush
        try:
            merged = merge(b for batches, _ in waiting for b in batches)
            values = frontier_values(by_partition(merged, self.partition), self.message_bytes)
            await self.publish("frontier", [(origin.encode(), v) for origin, v in values])
        except BaseException as exc:
            for _, done in waiting:
                if not done.done():
                    if isinstance(exc, asyncio.CancelledError):
                        done.cancel()
                    else:
                        done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for _, done in waiting:
            if not done.done():
                done.set_result(None)

    async def close(self) -> None:
        """Wait for the flushes already started (their reports wait for them)."""
        if self._flushing:
            await asyncio.gather(*self._flushing, return_exceptions=True)


def by_partition(
    batches: Sequence[FrontierBatch], partition: Callable[[str], Hashable]
) -> list[FrontierBatch]:
    """``batches`` (one per crawl and origin) joined into one per crawl and partition, in the
    order each first came: the first origin's batch with the URLs of the others of that
    partition after its own, each origin's in order. Its ``origin`` (the key) is the first
    origin's, which the producer sends to that same partition; the frontier agent admits each
    origin's URLs of it (``agents.stream.frontier_agent``)."""
    joined: dict[tuple[str, Hashable], tuple[FrontierBatch, list[UrlRef]]] = {}
    for batch in batches:
        at = (batch.crawl_id, partition(batch.origin))
        found = joined.get(at)
        if found is None:
            joined[at] = (batch, list(batch.urls))
        else:
            found[1].extend(batch.urls)
    return [
        first
        if len(urls) == len(first.urls)
        else FrontierBatch(crawl_id=first.crawl_id, origin=first.origin, urls=tuple(urls))
        for first, urls in joined.values()
    ]


def frontier_pieces(key: bytes, value: bytes | None, new_count: int) -> list[Piece]:
    """A ``frontier`` batch (``key``, ``value``) as one batch per partition of its URLs' origins
    at ``new_count`` partitions (``admin reshard``'s copy of an event not applied yet: a batch
    ``by_partition`` merged may hold origins that another count parts), the key's partition's
    first and keyed by it, each other keyed by its first URL's origin; the event itself when
    all are one partition's (nearly always), or when it does not decode (the worker skips it,
    logged). A URL of another origin not in canonical form (a seed another producer sent)
    goes by the origin its text shows; the worker re-sends it keyed right if that is not its
    own."""
    try:
        batch = decode("frontier", value if value is not None else b"")
    except BadMessage:
        return [(key, value)]
    assert isinstance(batch, FrontierBatch)
    try:
        lowered = key.decode().lower()
    except UnicodeDecodeError:  # not an origin: copied as it is (the worker re-keys it)
        return [(key, value)]
    home = key_hash(key) % new_count
    groups: dict[int, tuple[bytes, list[UrlRef]]] = {home: (key, [])}
    for ref in batch.urls:
        text = origin_of(ref.url)
        if text.lower() == lowered:  # the key's own, if in another case
            groups[home][1].append(ref)
            continue
        origin = text.encode()
        groups.setdefault(key_hash(origin) % new_count, (origin, []))[1].append(ref)
    pieces = [(k, refs) for k, refs in groups.values() if refs]
    if len(pieces) <= 1 and (not pieces or pieces[0][0] == key):
        return [(key, value)]
    return [
        (k, encode(FrontierBatch(crawl_id=batch.crawl_id, origin=k.decode(), urls=tuple(refs))))
        for k, refs in pieces
    ]
