"""The frontier agent's body: the single writer of the ``seen``/``pending``/``origins`` tables.

``FrontierAgent.handle_many`` applies a batch of events of ``frontier`` and ``outcomes`` (same
origin key, same partition count, so an origin's batches and outcomes meet in one partition, in
order). The wiring currently passes ONE event per call (``handle``): a wiring that handed over
the events already buffered (``stream.noack().events()``, acks after the batch) cut the
``origins`` changelog writes from 2.3 to 1.0-1.8 per page, but a worker restarted over a backlog
(kill -9 test) then applied nothing at all; ``noack_take`` lost events the same way. Steps:

1. decode each event; a bad message is logged with topic/partition/offset, counted, skipped;
2. find the crawl's rules (waiting a bounded time for its spec, see ``SPEC_WAIT``);
3. compute the changes with the pure ``Frontier.admit``/``apply`` over ONE ``Changes`` overlay
   per partition (an event sees the changes of the events before it);
4. SEND first (terminal statuses to ``status``, misrouted URLs back to ``frontier``) and await
   the acks, THEN commit each overlay to the tables. A crash between the two replays the batch
   and re-sends identical statuses, which the sink writes idempotently;
5. publish each partition's admitted count (page budget) and tell the local scheduler.

No Faust import: the wiring passes a ``Publisher`` and calls ``handle`` inside stream iteration.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from agents.frontier import Frontier, admitted_count
from agents.kafka_control import SharedView, budget_key
from agents.kafka_state import TableStore, partition_for
from agents.metrics import Metrics
from agents.rules import CrawlRules
from agents.state import Changes
from schemas.codec import BadMessage, decode, encode
from schemas.records import FrontierBatch, OriginState, Outcome, UrlStatus

log = logging.getLogger(__name__)

# How long an event waits for the spec of its crawl. Waiting (not stashing the event in memory)
# is what keeps this replay-safe: the offset is not acknowledged until the event was applied.
# The seed CLI publishes the spec before the seeds, so the wait is normally milliseconds; an
# event whose spec never comes (a deleted crawl) is skipped after this, logged and counted.
SPEC_WAIT = 60.0


class Publisher(Protocol):
    """Sends values to ``<prefix>.<short>`` keyed by ``key``; returns once Kafka acked them all."""

    def __call__(self, short: str, items: Sequence[tuple[bytes, bytes]]) -> Awaitable[None]: ...


class SchedulerHook(Protocol):
    """The local scheduler, told about state the frontier just committed."""

    def admitted(self, state: OriginState) -> None: ...

    def applied(self, origin: str, seq: int, state: OriginState) -> None: ...

    def caught_up(self, partition: int, token: bytes) -> None: ...


# A catch-up marker on ``outcomes``: sent by a worker to a partition it was just assigned; when
# its own frontier agent reads it back, every outcome published before the assignment has been
# applied (Kafka keeps a partition's order), so the queue heads are exact and dispatching the
# partition's origins refetches nothing whose outcome was already on its way.
MARKER = b"\x00streamcrawl-catch-up:"


@dataclass(frozen=True)
class Where:
    """Position of the event being handled, for logs and routing."""

    topic: str
    partition: int
    offset: int

    def extra(self, origin: str | None = None) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "origin": origin,
        }


class FrontierAgent:
    """Applies frontier batches and fetch outcomes of the partitions this worker owns."""

    def __init__(
        self,
        *,
        store: TableStore,
        view: SharedView,
        publish: Publisher,
        hook: SchedulerHook,
        metrics: Metrics,
        partitions: int,
        frontier: Frontier | None = None,
        spec_wait: float = SPEC_WAIT,
    ) -> None:
        self.store = store
        self.view = view
        self.publish = publish
        self.hook = hook
        self.metrics = metrics
        self.partitions = partitions
        self.frontier = frontier if frontier is not None else Frontier()
        self.spec_wait = spec_wait

    async def handle(self, where: Where, value: bytes | None) -> None:
        """Apply one event (see ``handle_many``)."""
        await self.handle_many([(where, value)])

    async def handle_many(
        self,
        events: Sequence[tuple[Where, bytes | None]],
        enter: Callable[[int], None] = lambda _i: None,
    ) -> None:
        """Apply a batch of events in order. Never raises for bad input; Kafka errors propagate
        (nothing is acknowledged then: the whole batch is replayed).

        The events of one partition share one ``Changes`` overlay (event ``i`` sees what the
        events before it changed), so a key written by several events is written once. Then,
        for the whole batch: SEND every status and re-keyed message, await the acks, THEN
        commit each partition's overlay, then tell the scheduler. A crash in between replays
        the batch over a prefix of the writes, exactly as for one event (see ``_ORDER``).

        ``enter(i)`` makes event ``i`` the current one before it is read or its partition's
        overlay is written (Faust tables read and write the partition of the current event).
        A catch-up marker flushes what came before it, so ``caught_up`` sees those outcomes
        applied.
        """
        batch = _Batch()
        for i, (where, value) in enumerate(events):
            if value is not None and value.startswith(MARKER):
                await self._flush(batch, enter)
                batch = _Batch()
                self.hook.caught_up(where.partition, value[len(MARKER) :])
                continue
            enter(i)
            await self._one(batch, i, where, value)
        await self._flush(batch, enter)

    async def _one(self, batch: _Batch, i: int, where: Where, value: bytes | None) -> None:
        short = where.topic.rpartition(".")[2]
        try:
            record = decode(short, value if value is not None else b"")
        except BadMessage as exc:
            self.metrics.bad_messages.labels(short).inc()
            log.warning(
                "skipping bad %s message at %s/%s@%s: %s",
                short,
                where.topic,
                where.partition,
                where.offset,
                exc,
                extra=where.extra(),
            )
            return
        origin = record.origin
        if partition_for(origin, self.partitions) != where.partition:
            # Keyed by something else than its origin: route it to the partition that owns it.
            log.warning(
                "re-keying %s message for %s found on partition %s",
                short,
                origin,
                where.partition,
                extra=where.extra(origin),
            )
            batch.sends.setdefault(short, []).append((origin.encode(), encode(record)))
            return
        rules = self.view.rules(record.crawl_id) if record.crawl_id in self.view.policies else None
        if rules is None:
            rules = await self.view.wait_rules(record.crawl_id, self.spec_wait)
        if rules is None:
            self.metrics.unknown_crawl.inc()
            log.error(
                "skipping %s message of unknown crawl %r at %s/%s@%s",
                short,
                record.crawl_id,
                where.topic,
                where.partition,
                where.offset,
                extra=where.extra(origin),
            )
            return
        part = batch.part(where.partition, self.store, i)
        if isinstance(record, FrontierBatch):
            self._admit(batch, part, where, record, rules)
        else:
            self._apply(batch, part, record, rules)

    def _admit(
        self, batch: _Batch, part: _Part, where: Where, fb: FrontierBatch, rules: CrawlRules
    ) -> None:
        ch = part.changes
        budget = self._budget(ch, fb.crawl_id, rules, where.partition)
        admission = self.frontier.admit(ch, fb, rules, budget=budget)
        frontier = batch.sends.setdefault("frontier", [])
        for origin, refs in admission.misrouted.items():
            again = FrontierBatch(crawl_id=fb.crawl_id, origin=origin, urls=tuple(refs))
            frontier.append((origin.encode(), encode(again)))
        self._statuses(batch, admission.statuses)
        self.metrics.duplicates.inc(admission.duplicates)
        self.metrics.admitted.inc(len(admission.queued))
        if admission.queued and budget is not None:
            part.budgets.add(fb.crawl_id)
        if admission.state is not None and admission.queued:
            part.after.append(partial(self.hook.admitted, admission.state))

    def _apply(self, batch: _Batch, part: _Part, outcome: Outcome, rules: CrawlRules) -> None:
        applied = self.frontier.apply(part.changes, outcome, rules)
        self._statuses(batch, applied.statuses)
        if applied.retried:
            self.metrics.retries.inc()
        part.after.append(partial(self.hook.applied, outcome.origin, outcome.seq, applied.state))

    async def _flush(self, batch: _Batch, enter: Callable[[int], None]) -> None:
        """Send, await the acks, then commit each partition's overlay and run its follow-ups."""
        sends = [self.publish(short, items) for short, items in batch.sends.items() if items]
        if sends:
            await asyncio.gather(*sends)
        for partition, part in batch.parts.items():
            enter(part.last)
            part.changes.commit()
            if part.budgets:
                await self.publish(
                    "budget",
                    [
                        (
                            budget_key(crawl_id, partition),
                            str(admitted_count(self.store, crawl_id)).encode(),
                        )
                        for crawl_id in sorted(part.budgets)
                    ],
                )
            for call in part.after:
                call()
        for state, n in batch.terminal.items():
            self.metrics.terminal.labels(state).inc(n)

    def _budget(self, ch: Changes, crawl_id: str, rules: CrawlRules, partition: int) -> int | None:
        """How many more URLs this batch may queue. Overshoot is bounded by what the other
        partitions admitted since they last published (one batch each, in flight)."""
        max_pages = rules.policy.max_pages
        if max_pages is None:
            return None
        here = admitted_count(ch, crawl_id)
        elsewhere = self.view.admitted_elsewhere(crawl_id, partition, self.partitions)
        return max(0, max_pages - here - elsewhere)

    def _statuses(self, batch: _Batch, statuses: list[UrlStatus]) -> None:
        if not statuses:
            return
        batch.sends.setdefault("status", []).extend(
            (s.origin.encode(), encode(s)) for s in statuses
        )
        for status in statuses:
            state = str(status.state)
            batch.terminal[state] = batch.terminal.get(state, 0) + 1


class _Part:
    """What a batch changes in one partition: the overlay, then what follows its commit."""

    def __init__(self, store: TableStore, index: int) -> None:
        self.changes = Changes(store)
        self.last = index  # an event of this partition (for ``enter``)
        self.budgets: set[str] = set()  # crawls whose admitted count to publish
        self.after: list[Callable[[], None]] = []  # scheduler calls, in event order


class _Batch:
    """Everything a batch sends before its commits, and its per-partition changes."""

    def __init__(self) -> None:
        self.sends: dict[str, list[tuple[bytes, bytes]]] = {}  # short topic -> items, in order
        self.parts: dict[int, _Part] = {}
        self.terminal: dict[str, int] = {}

    def part(self, partition: int, store: TableStore, index: int) -> _Part:
        part = self.parts.get(partition)
        if part is None:
            part = self.parts[partition] = _Part(store, index)
        part.last = index
        return part
