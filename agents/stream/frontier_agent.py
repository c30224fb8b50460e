"""The frontier agent's body: the single writer of the ``seen``/``pending``/``origins`` tables.

Among the ``outcomes`` are ``SlotMessage`` records (claims and returns of loans of its origins'
slots, keyed by origin too): they change no table, and go to the scheduler's ``Leases`` in
event order (``agents/stream/slot_leases.py``).

``FrontierAgent.handle_batch`` applies a batch of events of ``frontier`` and ``outcomes`` (same
origin key, same partition count, so an origin's batches and outcomes meet in one partition, in
order); ``handle`` is a batch of one:

1. decode each event; a bad message is logged with topic/partition/offset, counted, skipped;
2. find the crawl's rules (waiting a bounded time for its spec, see ``SPEC_WAIT``);
3. compute the changes with the pure ``Frontier.admit``/``apply`` over ONE ``Changes`` overlay
   per partition: an event sees what the events before it changed, and a key several events
   touch is written once;
4. hand the batch's sends (terminal statuses to ``status``, misrouted URLs back to
   ``frontier``, each partition's admitted count for the page budget) and table writes to the
   ``Committer``, which returns once all of them are durable (the Faust wiring: acked by Kafka,
   changelog included); only then does the wiring acknowledge the events' offsets. A crash
   before that replays the events, and the replay finds its own state changes and repeats the
   same sends (``Frontier.admit``'s ``source``, ``Frontier.apply`` on a replayed outcome); the
   sink writes them idempotently. A message found on a partition that does not own its origin
   changes nothing here: its re-keyed copy is one of the batch's sends;
5. tell the local scheduler, in event order.

A catch-up marker inside a batch commits what came before it first, so the scheduler indexes
its partition with those outcomes applied. It counts only if every offset of its partition
before it was applied: here, in order, or before the consumer's committed offset
(``Committed``) or the log start (``LogStart``); otherwise it is ignored, and its re-delivery
or resend (``agents.stream.ownership.MARKER_PATIENCE``) counts instead. No event read out of
that order (after a rebalance, before the consumer seeks back to an event it skipped) is
acknowledged (``handle_batch`` returns them): acknowledged, Faust could commit past the skipped
one, which would then never be applied. An outcome or URL batch among them is applied all the
same, and again when read again (replay-safe).

No Faust import: the wiring passes a ``Publisher`` and calls ``handle`` inside stream iteration.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from streamcrawl.agents.frontier.frontier import Admission, Frontier
from streamcrawl.agents.frontier.settle import Effects, settle
from streamcrawl.agents.frontier.store import Changes, Value
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.control import SharedView, budget_key
from streamcrawl.agents.stream.counts import (
    Fetch,
    Revisits,
    add_admitted,
    admitted_pages,
    count,
    counts_key,
    due_width,
    message_key,
)
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.order import Committed, LogStart, OffsetOrder
from streamcrawl.agents.stream.order import Where as Where  # the agent's callers' too
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.codec import BadMessage, decode, encode
from streamcrawl.schemas.records import (
    FrontierBatch,
    OriginState,
    Outcome,
    SlotMessage,
    UrlStatus,
)

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


Sends = Mapping[str, Sequence[tuple[bytes, bytes]]]  # short topic -> (key, value), in order
Writes = Mapping[int, Mapping[bytes, Value]]  # partition -> table changes
Enter = Callable[[int], None]  # makes an event of this partition the current one (Faust)


class Committer(Protocol):
    """Makes a batch durable: ``sends`` delivered and ``writes`` in the tables and their
    changelogs; returns only once all of it is acked. ``enter(p)`` before writing partition
    ``p`` (Faust tables write the partition of the current event)."""

    def __call__(self, sends: Sends, writes: Writes, enter: Enter) -> Awaitable[None]: ...


class SchedulerHook(Protocol):
    """The local scheduler, told about state the frontier just committed."""

    def admitted(self, state: OriginState) -> None: ...

    def applied(self, origin: str, seq: int, state: OriginState) -> None: ...

    def caught_up(self, partition: int, token: bytes) -> None: ...

    def slot(self, message: SlotMessage) -> None: ...


# A catch-up marker on ``outcomes``: sent by a worker to a partition it was just assigned; when
# its own frontier agent reads it back, every outcome published before the assignment has been
# applied (Kafka keeps a partition's order), so the queue heads are exact and dispatching the
# partition's origins refetches nothing whose outcome was already on its way.
MARKER = b"\x00streamcrawl-catch-up:"


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
        commit: Committer | None = None,
        committed: Committed = lambda _topic, _partition: None,
        log_start: LogStart | None = None,
    ) -> None:
        self.store = store
        self.view = view
        self.publish = publish
        self.hook = hook
        self.metrics = metrics
        self.partitions = partitions
        self.frontier = frontier if frontier is not None else Frontier()
        self.spec_wait = spec_wait
        self.commit = commit if commit is not None else self._attach
        self.committed = committed
        self.log_start = log_start
        self._order = OffsetOrder()  # for the catch-up markers and the acks

    def first_unapplied(self, topic: str, partition: int) -> int:
        """Where to read ``topic``/``partition`` again from so that this agent applies its
        events in order (``OffsetOrder.first_unapplied``; 0: none known)."""
        return self._order.first_unapplied(topic, partition, self.committed)

    async def handle(self, where: Where, value: bytes | None) -> None:
        """Apply one event (a batch of one, see ``handle_batch``)."""
        await self.handle_batch([(where, value)])

    async def handle_batch(
        self, events: Sequence[tuple[Where, bytes | None]], enter: Enter = lambda _p: None
    ) -> set[int]:
        """Apply ``events`` in order and commit them; the indexes of the events that must not
        be acknowledged (read out of offset order, see ``OffsetOrder``). Never raises for bad
        input; Kafka errors propagate (then nothing may be acknowledged: the batch is replayed).

        ``enter(p)`` is called before an event of partition ``p`` is read and before ``p``'s
        changes are written."""
        batch = _Batch()
        refused: set[int] = set()
        for i, (where, value) in enumerate(events):
            in_order = self._order.in_order(where, self.committed)
            if not in_order and await self._order.look_up_start(where, self.log_start):
                in_order = self._order.in_order(where, self.committed)
            if not in_order:
                refused.add(i)
            if value is not None and value.startswith(MARKER):
                await self._commit(batch, enter)
                batch = _Batch()
                self._marker(where, value[len(MARKER) :], in_order)
                continue
            enter(where.partition)
            await self._event(batch, where, value)
        await self._commit(batch, enter)
        return refused

    def _marker(self, where: Where, token: bytes, in_order: bool) -> None:
        """A catch-up marker: tell the scheduler, unless an outcome before it was not applied
        (it would dispatch that outcome's URL again): then ignored (the consumer's seek reads
        it again after the skipped one, or the marker is resent)."""
        log.info(
            "catch-up marker at %s/%s@%s%s",
            where.topic,
            where.partition,
            where.offset,
            "" if in_order else " ignored: an earlier offset was not applied here",
            extra=where.extra(),
        )
        if in_order:
            self.hook.caught_up(where.partition, token)

    def _decode(
        self, short: str, where: Where, value: bytes | None
    ) -> Outcome | FrontierBatch | SlotMessage | None:
        """The event's record; None (logged, counted) for a message that is not one."""
        try:
            record: Outcome | FrontierBatch | SlotMessage = decode(
                short, value if value is not None else b""
            )
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
            return None
        return record

    async def _event(self, batch: _Batch, where: Where, value: bytes | None) -> None:
        short = where.topic.rpartition(".")[2]
        record = self._decode(short, where, value)
        if record is None:
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
            batch.send(short, [(origin.encode(), encode(record))])
            return
        if isinstance(record, SlotMessage):  # no table state: the scheduler's, after the batch
            part = batch.part(where.partition, self.store)
            part.after.append(partial(self.hook.slot, record))
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
        part = batch.part(where.partition, self.store)
        batch.ended, batch.refused, batch.fetch = [], [], None
        batch.revisits = Revisits(width=partial(_due_width, rules))
        if isinstance(record, FrontierBatch):
            self._settle(batch, part, where, rules, None, [record])
        else:
            self._apply(batch, part, where, record, rules)
        # This partition's terminal-state counts, for `status` (replay-safe by offset).
        counted = count(
            part.changes,
            short,
            where.partition,
            where.offset,
            batch.ended,
            batch.revisits,
            refused=batch.refused,
            fetch=batch.fetch,
        )
        if counted is not None:
            part.counted = True

    def _apply(
        self, batch: _Batch, part: _Part, where: Where, outcome: Outcome, rules: CrawlRules
    ) -> None:
        """Admit the outcome's own-origin links, then apply it: one state change."""
        links = []
        if outcome.links:
            links.append(
                FrontierBatch(crawl_id=outcome.crawl_id, origin=outcome.origin, urls=outcome.links)
            )
        applied = self._settle(batch, part, where, rules, outcome, links).applied
        assert applied is not None
        batch.statuses(applied.statuses)
        if outcome.kind == "page" and outcome.started_at > 0 and not applied.replayed:
            seconds = outcome.finished_at - outcome.started_at  # for the slowest origins
            batch.fetch = (outcome.crawl_id, outcome.origin, seconds)
        if applied.revisit and not applied.retried and not applied.replayed:
            batch.revisits.fetched.append((outcome.crawl_id, applied.changed, outcome.started_at))
        batch.revisits.moves = [*batch.revisits.moves, *applied.moves]
        if applied.retried:
            batch.retries += 1
        part.after.append(partial(self.hook.applied, outcome.origin, outcome.seq, applied.state))

    def _settle(
        self,
        batch: _Batch,
        part: _Part,
        where: Where,
        rules: CrawlRules,
        outcome: Outcome | None,
        links: list[FrontierBatch],
    ) -> Effects:
        """``settle`` within the crawl's page budget, its sends added to the batch.

        URLs of other origins (``Admission.misrouted``) whose partition this is too (a batch of
        links merged per partition, ``agents.stream.links.by_partition``) are admitted here,
        each origin's as its own batch, with this event's name (a replay finds them as it finds
        the key origin's); those of other partitions are re-sent keyed by their origin, not
        marked seen (a replay re-sends them)."""

        def admitted(fb: FrontierBatch, admission: Admission) -> None:
            queued, assets = len(admission.queued), admission.assets
            add_admitted(part.changes, where.partition, fb.crawl_id, queued, assets)

        effects = settle(
            self.frontier,
            part.changes,
            rules,
            outcome,
            links,
            budget=partial(self._budget, part.changes, rules=rules, partition=where.partition),
            local=lambda origin: partition_for(origin, self.partitions) == where.partition,
            source=f"{where.topic}/{where.partition}@{where.offset}".encode(),
            count_admitted=False,
            admitted=admitted,
        )
        for again in effects.elsewhere:
            batch.send("frontier", [(again.origin.encode(), encode(again))])
        for state in effects.touched:
            if outcome is None or state.origin != outcome.origin:  # that one: ``applied``
                part.after.append(partial(self.hook.admitted, state))
        batch.statuses(effects.refused)
        batch.refused.extend(effects.refused)  # ended at admission: never queued
        if effects.robots_denied:  # a dispatch counts the others (``Metrics.fetched``)
            self.metrics.robots_denied.inc(effects.robots_denied)
        batch.revisits.moves = [*batch.revisits.moves, *effects.moves]
        batch.duplicates += effects.duplicates
        batch.admitted += effects.admitted
        part.budgets |= effects.budgeted
        return effects

    def _budget(
        self, ch: Changes, crawl_id: str, *, rules: CrawlRules, partition: int
    ) -> int | None:
        """How many more URLs this batch may queue. Overshoot is bounded by what the other
        partitions admitted since they last published (one batch each, in flight)."""
        max_pages = rules.policy.max_pages
        if max_pages is None:
            return None
        here = admitted_pages(ch, partition, crawl_id)
        elsewhere = self.view.admitted_elsewhere(crawl_id, partition, self.partitions)
        return max(0, max_pages - here - elsewhere)

    async def _commit(self, batch: _Batch, enter: Enter) -> None:
        """Make the batch durable (``Committer``), then count and tell the scheduler."""
        for partition, part in batch.parts.items():
            if part.budgets:  # this partition's admitted totals, for the page budget
                enter(partition)
                batch.send(
                    "budget",
                    [
                        (
                            budget_key(c, partition),
                            str(admitted_pages(part.changes, partition, c)).encode(),
                        )
                        for c in sorted(part.budgets)
                    ],
                )
            if part.counted:  # its whole count: the last message of its `counts` partition
                enter(partition)
                record = part.changes.get(counts_key(partition))
                if record is not None:
                    batch.send("counts", [(message_key(partition, self.partitions), record)])
        writes = {p: part.changes.writes for p, part in batch.parts.items() if part.changes.writes}
        if batch.sends or writes:
            await self.commit(batch.sends, writes, enter)
        for partition, part in batch.parts.items():
            enter(partition)  # the scheduler may read the partition's tables
            for call in part.after:
                call()
        self.metrics.duplicates.inc(batch.duplicates)
        self.metrics.admitted.inc(batch.admitted)
        self.metrics.retries.inc(batch.retries)
        for state, n in batch.terminal.items():
            self.metrics.terminal.labels(state).inc(n)

    async def _attach(self, sends: Sends, writes: Writes, enter: Enter) -> None:
        """The committer without a wiring of its own: every send ``on_commit`` (acked before
        the offset commit, see ``Publisher``), then the tables in the crash-safe order."""
        for short, items in sends.items():
            await self.publish(short, items, on_commit=True)
        for partition, changes in writes.items():
            enter(partition)
            self.store.write(changes)


@dataclass
class _Part:
    """What a batch changes in one partition: the overlay, then what follows its commit."""

    changes: Changes
    budgets: set[str] = field(default_factory=set)  # crawls whose admitted count to publish
    after: list[Callable[[], None]] = field(default_factory=list)  # scheduler calls, in order
    counted: bool = False  # its terminal-state counts changed (agents/stream/counts.py)


@dataclass
class _Batch:
    """Everything a batch sends, its per-partition changes and its counts."""

    sends: dict[str, list[tuple[bytes, bytes]]] = field(default_factory=dict)
    parts: dict[int, _Part] = field(default_factory=dict)
    terminal: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    admitted: int = 0
    retries: int = 0
    ended: list[UrlStatus] = field(default_factory=list)  # the current event's statuses
    refused: list[UrlStatus] = field(default_factory=list)  # those that ended at admission
    fetch: Fetch | None = None  # the request the current event's outcome measured
    revisits: Revisits = field(default_factory=Revisits)  # the current event's, for the counts

    def part(self, partition: int, store: TableStore) -> _Part:
        part = self.parts.get(partition)
        if part is None:
            part = self.parts[partition] = _Part(Changes(store))
        return part

    def send(self, short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        self.sends.setdefault(short, []).extend(items)

    def statuses(self, statuses: Sequence[UrlStatus]) -> None:
        """Terminal statuses, sent with the batch. A crash before the commit replays the
        events, and the replay repeats every status: ``Frontier.apply`` rebuilds an outcome's
        from the outcome, ``Frontier.admit`` recognises URLs this very event ended
        (``source``)."""
        self.ended.extend(statuses)
        if statuses:
            self.send("status", [(s.origin.encode(), encode(s)) for s in statuses])
            for status in statuses:
                state = str(status.state)
                self.terminal[state] = self.terminal.get(state, 0) + 1


def _due_width(rules: CrawlRules, crawl_id: str) -> float:
    """The due bucket of ``crawl_id`` in the counts (the event's crawl: its own; another crawl
    whose revisits the event moved: the default)."""
    revisit = rules.revisit if crawl_id == rules.policy.crawl_id else None
    return due_width(revisit.min if revisit is not None else None)
