"""The frontier agent's body: the single writer of the ``seen``/``pending``/``origins`` tables.

One call of ``FrontierAgent.handle`` per event of ``frontier`` or ``outcomes`` (same origin key,
same partition count, so an origin's batches and outcomes meet in one partition, in order):

1. decode; a bad message is logged with topic/partition/offset, counted, skipped;
2. find the crawl's rules (waiting a bounded time for its spec, see ``SPEC_WAIT``);
3. compute the changes with the pure ``Frontier.admit``/``apply`` over a ``Changes`` overlay;
4. send what the event produces (terminal statuses to ``status``, misrouted URLs back to
   ``frontier``, this partition's admitted count for the page budget) without waiting, and
   commit the overlay to the tables. Faust flushes the producer before it commits an offset, so
   the sends are acked before the event's offset is committed; a crash before that replays the
   event, and the replay finds its own state changes and repeats the same sends
   (``Frontier.admit``'s ``source``, ``Frontier.apply`` on a replayed outcome); the sink writes
   them idempotently;
5. tell the local scheduler.

No Faust import: the wiring passes a ``Publisher`` and calls ``handle`` inside stream iteration.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from streamcrawl.agents.frontier import Admission, Frontier, admitted_count
from streamcrawl.agents.kafka_control import SharedView, budget_key
from streamcrawl.agents.kafka_counts import count, message_key
from streamcrawl.agents.kafka_state import TableStore, partition_for
from streamcrawl.agents.metrics import Metrics
from streamcrawl.agents.rules import CrawlRules
from streamcrawl.agents.state import Changes
from streamcrawl.schemas.codec import BadMessage, decode, encode
from streamcrawl.schemas.records import FrontierBatch, OriginState, Outcome, UrlStatus

log = logging.getLogger(__name__)

# How long an event waits for the spec of its crawl. Waiting (not stashing the event in memory)
# is what keeps this replay-safe: the offset is not acknowledged until the event was applied.
# The seed CLI publishes the spec before the seeds, so the wait is normally milliseconds; an
# event whose spec never comes (a deleted crawl) is skipped after this, logged and counted.
SPEC_WAIT = 60.0


class Publisher(Protocol):
    """Sends values to ``<prefix>.<short>`` keyed by ``key``; returns once Kafka acked them all.

    ``on_commit=True`` (inside the frontier agent's event): return without waiting; they are
    acked before the offset of that event is committed (Faust flushes the producer first), and
    one that cannot be delivered crashes the worker, so the event is replayed.
    """

    def __call__(
        self, short: str, items: Sequence[tuple[bytes, bytes]], *, on_commit: bool = False
    ) -> Awaitable[None]: ...


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
        """Apply one event. Never raises for bad input; Kafka errors propagate (no commit)."""
        short = where.topic.rpartition(".")[2]
        if value is not None and value.startswith(MARKER):
            self.hook.caught_up(where.partition, value[len(MARKER) :])
            return
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
            await self.publish(short, [(origin.encode(), encode(record))])
            return
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
        if isinstance(record, FrontierBatch):
            await self._admit(where, record, rules)
        else:
            await self._apply(where, record, rules)

    async def _admit(self, where: Where, batch: FrontierBatch, rules: CrawlRules) -> None:
        ch = Changes(self.store)
        admission, budgeted = self._admission(ch, where, batch, rules)
        await self._send_statuses(admission.statuses)
        await self._count(ch, where, admission.statuses)
        await self._reroute(batch.crawl_id, admission)
        ch.commit()
        await self._admitted(where, batch.crawl_id, admission, budgeted)
        if admission.state is not None and admission.queued:
            self.hook.admitted(admission.state)

    async def _apply(self, where: Where, outcome: Outcome, rules: CrawlRules) -> None:
        """Admit the outcome's own-origin links, then apply it: one state change."""
        ch = Changes(self.store)
        admission, budgeted = None, False
        if outcome.links:
            links = FrontierBatch(
                crawl_id=outcome.crawl_id, origin=outcome.origin, urls=outcome.links
            )
            admission, budgeted = self._admission(ch, where, links, rules)
        applied = self.frontier.apply(ch, outcome, rules)
        if admission is not None:
            await self._send_statuses(admission.statuses)
            await self._reroute(outcome.crawl_id, admission)
        await self._send_statuses(applied.statuses)
        await self._count(
            ch, where, [*(admission.statuses if admission else ()), *applied.statuses]
        )
        ch.commit()
        if admission is not None:
            await self._admitted(where, outcome.crawl_id, admission, budgeted)
        if applied.retried:
            self.metrics.retries.inc()
        self.hook.applied(outcome.origin, outcome.seq, applied.state)

    def _admission(
        self, ch: Changes, where: Where, batch: FrontierBatch, rules: CrawlRules
    ) -> tuple[Admission, bool]:
        """``Frontier.admit`` within the crawl's page budget; also whether a budget applies."""
        budget = self._budget(ch, batch.crawl_id, rules, where.partition)
        source = f"{where.topic}/{where.partition}@{where.offset}".encode()
        admission = self.frontier.admit(ch, batch, rules, budget=budget, source=source)
        return admission, budget is not None

    async def _reroute(self, crawl_id: str, admission: Admission) -> None:
        """Send URLs whose canonical origin is not the batch's to the partition that owns it."""
        if admission.misrouted:  # not marked seen here: a replay re-sends them
            await self.publish(
                "frontier",
                [
                    (
                        origin.encode(),
                        encode(FrontierBatch(crawl_id=crawl_id, origin=origin, urls=tuple(refs))),
                    )
                    for origin, refs in admission.misrouted.items()
                ],
                on_commit=True,
            )

    async def _admitted(
        self, where: Where, crawl_id: str, admission: Admission, budgeted: bool
    ) -> None:
        """After the commit: count, and publish this partition's admitted total (page budget)."""
        self.metrics.duplicates.inc(admission.duplicates)
        self.metrics.admitted.inc(len(admission.queued))
        if admission.queued and budgeted:
            count = admitted_count(self.store, crawl_id)
            await self.publish(
                "budget",
                [(budget_key(crawl_id, where.partition), str(count).encode())],
                on_commit=True,
            )

    def _budget(self, ch: Changes, crawl_id: str, rules: CrawlRules, partition: int) -> int | None:
        """How many more URLs this batch may queue. Overshoot is bounded by what the other
        partitions admitted since they last published (one batch each, in flight)."""
        max_pages = rules.policy.max_pages
        if max_pages is None:
            return None
        here = admitted_count(ch, crawl_id)
        elsewhere = self.view.admitted_elsewhere(crawl_id, partition, self.partitions)
        return max(0, max_pages - here - elsewhere)

    async def _count(self, ch: Changes, where: Where, statuses: list[UrlStatus]) -> None:
        """Add the event's states to this partition's counts and publish them for ``status``
        (``agents/kafka_counts.py``; replay-safe by the event's offset)."""
        short = where.topic.rpartition(".")[2]
        record = count(ch, short, where.partition, where.offset, statuses)
        if record is not None:
            key = message_key(where.partition, self.partitions)
            await self.publish("counts", [(key, record)], on_commit=True)

    async def _send_statuses(self, statuses: list[UrlStatus]) -> None:
        """Sent, never awaited here (a produce round trip per event was most of the agent's
        time); acked before the event's offset commit. A crash before that commit replays the
        event, and the replay repeats every status: ``Frontier.apply`` rebuilds an outcome's
        from the outcome, ``Frontier.admit`` recognises URLs this very event ended
        (``source``)."""
        if not statuses:
            return
        items = [(s.origin.encode(), encode(s)) for s in statuses]
        await self.publish("status", items, on_commit=True)
        for status in statuses:
            self.metrics.terminal.labels(str(status.state)).inc()
