"""The per-worker scheduler and fetcher of the Kafka wiring: reads tables, never writes them.

It keeps ``agents.frontier.scheduler.Scheduler`` (the in-memory politeness index) over the origins
of the partitions this worker owns, runs ready dispatches through ``agents.net.stages.Stages`` (in
the ``agents.net.dispatch.Dispatcher`` both wirings use) and publishes each report: the page to
``pages`` (and, for a crawl with ``CrawlPolicy.warc``, its capture to ``captures``), its links to
other origins to ``frontier`` (one batch per partition, merged with other reports' within
``agents.stream.links.WINDOW``), and only then the outcome to ``outcomes`` (carrying its own
origin's links), all keyed by origin. A page fetched without a backoff or a retry frees its origin's
concurrency slot as soon as its report is in Kafka (``Scheduler.fetched``: the delay still counts
from the request's start), so the consume round trip is not added to every request of the origin;
robots.txt, retries and backoffs keep the slot until the frontier agent (same process, the single
writer) has applied the outcome and calls ``applied`` back with the new origin state. Until then the
URL stays at its queue head (skipped by the scheduler), so a crash refetches it (at-least-once); a
report that could not be published frees the slot with the URL still queued.

Ownership follows the consumer group (``agents.stream.ownership``): nothing new is dispatched
once Faust's rebalance has begun (``rebalancing``), ``revoke`` before a partition leaves (stop
dispatching its origins, give their requests ``REVOKE_GRACE`` seconds, abandon the rest: their
URLs stay at the queue heads), ``assigned`` with the new assignment, ``rebuild``
after table recovery for the partitions newly owned (a catch-up marker first; then each origin
waits one delay: the previous owner may just have fetched it; at most ``max_origins`` origins
in memory, the others found in the table later by ``agents.stream.origin_index.Refill``).

It also lends its origins' slots to render workers' subrequests (``agents.stream.slot_leases``):
the frontier agent hands it the claims and returns read on ``outcomes`` (``slot``), the dispatch
loop lends and publishes the grants on ``grants``. Since a previous owner's loans are not
known here, while a crawl renders an origin taken over counts as fetched ``LEASE_WINDOW``
after the takeover (no crawl renders: no loan, no wait).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import msgspec
from mode import Service

from streamcrawl.agents.errors import ErrorClass
from streamcrawl.agents.frontier.scheduler import LEND_POLL, Dispatch, Scheduler
from streamcrawl.agents.frontier.store import ORIGINS
from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.dispatch import Dispatcher, Ended
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.render_stage import RenderStage
from streamcrawl.agents.net.stages import Report, Stages
from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.frontier_agent import Publisher
from streamcrawl.agents.stream.links import LinkBatches
from streamcrawl.agents.stream.messages import report_messages
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.origin_index import Refill
from streamcrawl.agents.stream.ownership import Ownership, send_marker
from streamcrawl.agents.stream.slot_leases import LEASE_WINDOW, Leases
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import (
    CrawlPolicy,
    OriginState,
    Outcome,
    RenderRequest,
    SlotGrant,
    SlotMessage,
)

log = logging.getLogger(__name__)

# The smallest default bound on fetched-but-unapplied URLs (see ``FetchService.__init__``).
MIN_MAX_UNAPPLIED = 4096

RENDER_WAIT = 120.0  # seconds a page to render waits for a render worker (Settings.render_wait)
REVOKE_GRACE = 10.0  # seconds a revoked origin's request may finish (inside the rebalance)
STOP_GRACE = 10.0  # seconds in-flight requests get on SIGTERM
PUBLISH_HOLD_MAX = 60.0  # longest an origin is held back after its report could not be sent
# Rows of the origins table walked per turn of the dispatch loop (the index is built and kept
# filled a slice at a time, so a turn never holds the event loop for long and
# the first dispatch after an assignment does not wait for a walk of the whole table).
REFILL_ROWS = 1000


class FetchService(Service):
    """Dispatch loop of one worker (``concurrency`` requests in flight, all origins together)."""

    def __init__(
        self,
        *,
        store: TableStore,
        view: SharedView,
        publish: Publisher,
        mark: Callable[[int, bytes], Awaitable[None]],
        unstick: Callable[[int], None],
        metrics: Metrics,
        partitions: int,
        concurrency: int,
        max_origins: int | None = None,
        max_unapplied: int | None = None,
        page_bytes: int = 16 * 1024 * 1024,
        halted: Callable[[], bool] = lambda: False,
        rebalancing: Callable[[], bool] = lambda: False,
        core: CrawlCore | None = None,
        render_wait: float = RENDER_WAIT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.render_wait = render_wait  # a render holds its origin's slot at most this long
        self._renders: dict[tuple[str, int], asyncio.Future[None]] = {}
        self.core = core or CrawlCore(Network())  # stages' factory; default: public addresses
        self.store = store
        self.view = view
        self.publish = publish
        # Other origins' links of many reports, together; no wait once nothing is coming.
        self.links = LinkBatches(
            publish,
            partition=partial(partition_for, partitions=partitions),
            idle=self._nothing_coming,
        )
        self.mark = mark  # sends a value to one partition of ``outcomes``
        self.unstick = unstick  # makes the consumer fetch one partition's inputs again
        self.own = Ownership()
        self.metrics = metrics
        self.partitions = partitions
        self.concurrency = concurrency
        self.max_unapplied = (
            max_unapplied if max_unapplied is not None else default_max_unapplied(concurrency)
        )
        self.halted = halted  # the app is stopping: start nothing new
        # A rebalance is under way (from aiokafka's revoke callback, before ``revoke`` is
        # called: ``topology.worker.rebalance``): start nothing new either. A request started
        # in between could end before ``revoke``, uncounted as in flight there, with its
        # outcome published while the consumer no longer applies it, and its URL fetched again
        # (tests/integration/test_rebalance_faults.py).
        self.rebalancing = rebalancing
        self.page_bytes = page_bytes  # max message size of the pages topic
        self._publish_errors = 0  # consecutive reports that could not be published at all
        self.scheduler = Scheduler(store, view.rules, max_origins=max_origins)
        self.leases = Leases(self.scheduler, view.rules)  # loans to render workers
        view.listeners.append(self._respec)
        self.refill = Refill(lambda: store.walk(ORIGINS), self.scheduler, partitions)
        self.stopping = False
        self.loop_alive = 0.0  # last time the dispatch loop ran (health)
        # The requests in flight; a report being published holds no slot (``_run``).
        self.dispatcher: Dispatcher[Report | None] = Dispatcher(concurrency)
        self._stages: Stages | None = None

    # -- called by the frontier agent (same event loop) -----------------------------------------
    def _active(self, origin: str) -> bool:
        return self.since_of(partition_for(origin, self.partitions)) is not None

    def since_of(self, partition: int) -> float | None:
        """When the origins of ``partition`` count as last fetched by a previous owner: when
        they were indexed here, plus, while a crawl renders, the ``LEASE_WINDOW`` in which a
        loan it granted may still be sent; None: not dispatched here."""
        since = self.own.since_of(partition)
        if since is None or not self._lending():
            return since
        return since + LEASE_WINDOW

    def _lending(self) -> bool:
        """Whether a crawl renders: only a render's subrequest borrows a slot, so without one
        no previous owner can have lent one, and a takeover costs no lease window."""
        return any(policy.render != "never" for policy in self.view.policies.values())

    @property
    def owned(self) -> set[int]:
        """The partitions this worker owns (dispatched once caught up)."""
        return self.own.owned

    def admitted(self, state: OriginState) -> None:
        """URLs were queued for ``state.origin`` (an origin of a partition we own)."""
        since = self.since_of(self._owner(state.origin))
        if since is not None:  # an origin new here may have been lent by a previous owner
            self.scheduler.track(state, assumed_start=since)
            self.dispatcher.wake()

    def waiting_on_apply(self) -> bool:
        """Whether an origin's next request waits for the frontier to apply an outcome (all of
        its queued URLs are settling): the frontier agent should not hold its batch open."""
        return bool(self.scheduler.blocked)

    def applied(self, origin: str, seq: int, state: OriginState) -> None:
        """The outcome of dispatch ``seq`` was committed: free the slot, re-index the origin."""
        waiting = self._renders.get((origin, seq))
        if waiting is not None and not waiting.done():
            waiting.set_result(None)  # a render worker's outcome: the render is over
        if self._active(origin):
            if self.scheduler.unexpected(origin, seq):  # evidence of a refetch across a rebalance
                log.warning(
                    "outcome of %s seq %d applied after its partition was indexed here but "
                    "not dispatched here: published late by its previous owner",
                    origin,
                    seq,
                    extra={"origin": origin, "partition": self._owner(origin)},
                )
            self.scheduler.done(origin, seq, state)
            self.dispatcher.wake()

    def slot(self, message: SlotMessage) -> None:
        """A claim or return of a loan of one of our origins' slots (``Leases.received``)."""
        grant = self.leases.received(message, time.time())
        if grant is not None:  # a replayed claim: its grant again
            self._grant([grant])
        self.dispatcher.wake()

    def _grant(self, grants: Sequence[SlotGrant]) -> None:
        """Publish ``grants`` in the background (one not delivered expires at the owner)."""
        items = [(g.worker_id.encode(), encode(g)) for g in grants]
        task = asyncio.ensure_future(self.publish("grants", items))
        task.add_done_callback(_grants_sent)

    # -- ownership ------------------------------------------------------------------------------
    def assigned(self, partitions: set[int]) -> None:
        """The group's new assignment is ``partitions`` (their tables not recovered yet)."""
        self.own.assigned(partitions)

    def rebuild(self, partitions: set[int]) -> None:
        """Take ownership of ``partitions`` (tables recovered): for each newly owned one, send a
        catch-up marker to its ``outcomes`` partition; its origins are indexed when the marker
        comes back (``caught_up``), i.e. once the outcomes already in flight were applied.
        Ignored unless ``partitions`` is the current assignment (a recovery of an earlier
        generation, see ``agents.stream.ownership``); owned partitions it does not name are
        dropped as on a revoke.
        """
        plan = self.own.recovered(partitions)
        if plan is None:
            log.warning(
                "table recovery of partitions %s ignored: not the current assignment (%s)",
                sorted(partitions),
                "a rebalance is under way" if self.own.assignment is None else self.own.assignment,
            )
            return
        if plan.drop:
            log.warning("partitions %s left without a revoke: dropped", sorted(plan.drop))
            self._forget(plan.drop)
        for p, token in plan.gate.items():
            self.add_future(send_marker(self.own, p, token, self.mark, self.unstick))

    def caught_up(self, partition: int, token: bytes) -> None:
        """Our marker came back through the frontier agent: index the partition's origins."""
        if self.own.caught_up(partition, token, time.time()):
            self.index_partitions({partition})

    def index_partitions(self, new: set[int]) -> None:
        """Index the origins with queued URLs of ``new`` partitions, as many as fit: the first
        slice now, the rest turn by turn in the dispatch loop (``Refill``).

        Each is treated as fetched now (``Ownership.since``) unless its state says later: the
        previous owner may have started a request just before the rebalance.
        """
        self.refill.restart()
        count = self.refill.run(self.since_of, REFILL_ROWS, until_full=True)
        log.info(
            "indexing the origins of partitions %s: %d so far",
            sorted(new),
            count,
            extra={"partition": sorted(new)},
        )
        self.dispatcher.wake()

    async def revoke(self, partitions: set[int]) -> None:
        """Stop dispatching the origins of ``partitions``; finish or abandon their requests."""
        gone = self.own.revoke(partitions)
        settling = self._forget(gone)
        leaving = self.dispatcher.in_flight(lambda d: self._owner(d.origin) in gone)
        if gone:  # published, not applied: the next owner applies them before it dispatches
            log.info(
                "revoked partitions %s: %d requests in flight, %d outcomes not applied yet",
                sorted(gone),
                len(leaving),
                settling,
            )
        await self._finish(leaving, REVOKE_GRACE)

    def _forget(self, gone: set[int]) -> int:
        """Drop the origins of ``gone`` partitions from memory; how many of their outcomes were
        published but not applied (their next owner applies them before it dispatches)."""
        self.refill.forget(gone)
        self.leases.forget(lambda origin: self._owner(origin) in gone)
        settling = self.scheduler.settling
        for origin in [o for o in self.scheduler.origins() if self._owner(o) in gone]:
            self.scheduler.forget(origin)
        return settling - self.scheduler.settling

    def _respec(self, _policy: CrawlPolicy) -> None:
        """A crawl's spec changed: its origins may be due sooner (``recrawl``) or now."""
        self.scheduler.refresh()
        self.dispatcher.wake()

    def _owner(self, origin: str) -> int:
        return partition_for(origin, self.partitions)

    def queue_sizes(self) -> dict[int, int]:
        """Queued URLs per owned partition: of the origins in memory, as last seen, plus the
        others as of the last complete walk of the table (``Refill.left_out``)."""
        sizes = dict.fromkeys(self.owned, 0)
        for p, n in self.refill.left_out.items():
            if p in sizes:
                sizes[p] += n
        for state in self.scheduler.states():
            p = self._owner(state.origin)
            if p in sizes:
                sizes[p] += state.tail - state.head
        return sizes

    # -- the loop -------------------------------------------------------------------------------
    async def on_start(self) -> None:
        # A crawl with --render hands its pages to the render workers: no browser here.
        self._stages = self.core.stages(self._seen, render_wait=self.render_wait)
        self.add_future(self._dispatch_loop())

    async def on_stop(self) -> None:
        self.stopping = True
        self.dispatcher.wake()
        if self.owned:
            log.info(
                "stopping with partitions %s: %d requests in flight",
                sorted(self.owned),
                len(self.dispatcher),
            )
        await self._finish(self.dispatcher.in_flight(), STOP_GRACE)
        await self.links.close()
        if self._stages is not None:
            await self._stages.close()
        await self.core.close()

    def _seen(self, crawl_id: str, url: str) -> bool:
        from streamcrawl.agents.frontier.records import seen_key

        return self.store.get(seen_key(crawl_id, url)) is not None

    async def _dispatch_loop(self) -> None:
        while not self.stopping and not self.should_stop:
            self.loop_alive = time.time()
            if self.refill.wanted():
                self.refill.run(self.since_of, REFILL_ROWS)
            room = self._room()
            if room > 0 and not self.halted() and not self.rebalancing():
                now = time.time()
                for d in self.scheduler.take(now, room):
                    self._dispatched(d, now)
            if not self.halted() and not self.rebalancing():
                self._lend(time.time())
            self.links.poke()  # what could start has: a flush waiting for reports may go now
            self.metrics.in_flight.set(self.dispatcher.fetching)
            self.metrics.unapplied.set(self.scheduler.settling)
            self.metrics.origins_tracked.set(len(self.scheduler))
            await self._wait()

    def _lend(self, now: float) -> None:
        """Lend what render workers claimed and may have now; give back expired loans."""
        grants = self.leases.lend(now, lambda origin: self.since_of(self._owner(origin)))
        if grants:
            self._grant(grants)

    def _nothing_coming(self) -> bool:
        """No request is being fetched and none may start now: no report can come soon."""
        if self.dispatcher.fetching:
            return False
        ready_at = self.scheduler.next_ready_at()
        return ready_at is None or ready_at > time.time() or self._room() <= 0

    def _room(self) -> int:
        """How many dispatches may start now: the concurrency left, and backpressure (fetched
        but unapplied URLs stay under ``max_unapplied``; ``applied`` wakes the loop when the
        frontier agent catches up). Every dispatch not yet settling counts against the bound,
        reports still being published included: when the broker is slow to ack they are the
        unapplied outcomes of the next moment (not counting them, a loaded worker was seen
        holding 408 against a bound of 256)."""
        return min(
            self.dispatcher.room(),
            self.max_unapplied - self.scheduler.settling - len(self.dispatcher),
        )

    def _dispatched(self, d: Dispatch, now: float) -> None:
        if d.after is not None:
            self.metrics.politeness_wait.observe(now - d.after)
        if d.since_end is not None:
            self.metrics.turnaround.observe(d.since_end)
        assert self._stages is not None
        self.dispatcher.start(d, self._run(d))

    async def _wait(self) -> None:
        """Sleep until a task ends, a wake-up or the next ready time (at most 1 s)."""
        ready_at = self.scheduler.next_ready_at()
        timeout = 1.0 if ready_at is None else min(1.0, max(0.0, ready_at - time.time()))
        if self._room() <= 0:
            timeout = 1.0  # the next dispatch waits for a task to end or a wake-up, not a time
        if self.leases.waiting():
            timeout = min(timeout, LEND_POLL)  # a claim may be lent any time
        for ended in await self.dispatcher.wait(timeout):
            self._reap(ended)

    def _reap(self, ended: Ended[Report | None]) -> None:
        if ended.report() is None:
            # No outcome was published: free the slot; the URL is still at its queue head.
            d = ended.dispatch
            self.scheduler.done(d.origin, d.seq, None)

    async def _run(self, d: Dispatch) -> Report | None:
        """Fetch and publish; ``None`` if nothing could be published (retried later)."""
        assert self._stages is not None
        where = {"origin": d.origin, "partition": self._owner(d.origin)}
        report = await self._stages.run(d)  # never raises: a failed stage is an outcome
        self.scheduler.ended(d.origin, time.time())
        if report.failed:
            self.metrics.stage_failures.labels(d.kind).inc()
        self.metrics.fetched(report.outcome, report.page)
        outcome = report.outcome
        task = asyncio.current_task()
        if task is not None:
            self.dispatcher.release(task)  # the request is over: its slot is free
            self.links.poke()  # a flush waiting for reports to come may go now
        if report.render is not None:
            copy = await self._rendered_elsewhere(d, report.render)
            if copy is None:
                return report  # the render worker's outcome was applied: nothing to publish
            report, outcome = copy, copy.outcome
        try:
            await self._publish(report, d)
        except Exception as exc:
            self.metrics.publish_failures.labels("report").inc()
            log.exception("cannot publish the report of %s", outcome.url, extra=where)
            if await self._publish_failure(outcome, exc, where):
                return report
            # Not even that went out (the broker is away): hold the origin back, longer each
            # time, so the URL is not refetched at the dispatch loop's pace meanwhile.
            self._publish_errors += 1
            wait = min(PUBLISH_HOLD_MAX, 2.0**self._publish_errors)
            self.scheduler.hold(d.origin, time.time() + wait)
            return None
        self._publish_errors = 0
        if early_release(outcome):
            # Free the slot once the outcome is in Kafka, not when the frontier has applied it:
            # that round trip would otherwise be added to every request of the origin. Not
            # before the publish is acked: under load a publish can take longer than the delay,
            # and an origin whose next request started meanwhile had several outcomes not yet
            # in Kafka, each fetched again after a kill -9 (docs/architecture.md, "Where this
            # differs from the reference design": slots freed when the outcome is in Kafka).
            self.scheduler.fetched(d.origin, d.seq, outcome.started_at)
            self.dispatcher.wake()
        return report

    async def _rendered_elsewhere(self, d: Dispatch, req: RenderRequest) -> Report | None:
        """Hand ``req`` to the render workers and wait until its outcome is applied (None: the
        origin's slot stays taken meanwhile, ``applied`` frees it); past ``render_wait``, or if
        it cannot be handed on, the page's HTTP copy with ``render_error``, to publish here."""
        value = encode(req)
        if len(value) > self.page_bytes:
            return self._http_copy(d, req, f"{len(value)} bytes, over the render topic's limit")
        waiting = self._renders[d.origin, d.seq] = asyncio.get_running_loop().create_future()
        try:
            try:
                await self.publish("render", [(d.origin.encode(), value)])
            except Exception as exc:
                self.metrics.publish_failures.labels("render").inc()
                return self._http_copy(d, req, f"cannot publish it: {type(exc).__name__}: {exc}")
            wait = max(0.0, req.expires_at - time.time())
            try:
                await asyncio.wait_for(asyncio.shield(waiting), wait)
            except TimeoutError:
                error = f"no render worker answered within {self.render_wait:g} s"
                return self._http_copy(d, req, error, timeout=True)
            return None
        finally:
            self._renders.pop((d.origin, d.seq), None)

    def _http_copy(
        self, d: Dispatch, req: RenderRequest, why: str, *, timeout: bool = False
    ) -> Report:
        error = ErrorClass.RENDER_TIMEOUT if timeout else ErrorClass.RENDER_CRASH
        log.warning("render of %s: %s", req.final_url, why, extra={"origin": d.origin})
        assert self._stages is not None
        return RenderStage(self._stages).http_copy(req, d.rules, f"{error}: {why}")

    async def _publish_failure(
        self, outcome: Outcome, exc: Exception, where: dict[str, object]
    ) -> bool:
        """Publish a bare ``internal`` retry outcome for a report that could not be published,
        so the frontier counts the attempt (``retries``, then ``failed``) instead of the URL
        staying at its queue head to be fetched again without end. False if that failed too."""
        if outcome.kind != "page":
            return False  # robots.txt: nothing to count; the origin is held back
        error = f"internal: cannot publish the report: {type(exc).__name__}: {exc}"
        bare = msgspec.structs.replace(
            outcome, state="retry", error=error[:500], links=(), final_url=None
        )
        try:
            await self.publish("outcomes", [(bare.origin.encode(), encode(bare))])
        except Exception:
            self.metrics.publish_failures.labels("outcome").inc()
            log.warning("cannot publish the failure of %s either", outcome.url, extra=where)
            return False
        return True

    async def _publish(self, report: Report, d: Dispatch) -> None:
        """Page, capture and link batches first, the outcome last: once the outcome is applied
        the URL leaves its queue, so everything it produced must already be in Kafka. The links
        of the outcome's own origin ride in the outcome (``Outcome.links``) as far as they fit,
        the others go with other reports' (``LinkBatches``); every value stays within its
        topic's message size (``report_messages``, ``frontier_values``)."""
        messages = report_messages(report, page_bytes=self.page_bytes)
        if messages.trimmed:
            self.metrics.messages_split.inc()
            log.info("the report of %s was split to fit Kafka messages", report.outcome.url)
        sends = []
        key = messages.origin.encode()
        if messages.pages:
            sends.append(self.publish("pages", [(key, v) for v in messages.pages]))
        if messages.captures:  # a crawl with CrawlPolicy.warc: for `streamcrawl warc`
            self.metrics.capture_bytes.inc(sum(len(v) for v in messages.captures))
            sends.append(self.publish("captures", [(key, v) for v in messages.captures]))
        if messages.batches:
            delay = d.rules.delay_for(d.robots)  # when the origin's next request may start:
            due = report.outcome.started_at + delay if delay > 0 else None
            queued = due is not None and self.scheduler.queued_besides(d.origin)
            sends.append(self.links.send(messages.batches, due=due, queued=queued))
        if sends:
            await asyncio.gather(*sends)
        await self.publish("outcomes", [(key, messages.outcome)])

    async def _finish(self, tasks: Sequence[asyncio.Task[Report | None]], grace: float) -> None:
        """Wait up to ``grace`` s for ``tasks``, then cancel the rest (abandoned: refetched)."""
        ended = await self.dispatcher.finish(tasks, grace)
        for e in ended:
            self._reap(e)
        abandoned = sum(e.abandoned for e in ended)
        if abandoned:
            log.warning("abandoned %d requests in flight (their URLs will be refetched)", abandoned)


def _grants_sent(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("grants not published: %s (their loans expire)", task.exception())


def default_max_unapplied(concurrency: int) -> int:
    """How many fetched URLs may wait for the frontier to apply their outcomes before fetching
    pauses: the fetcher never runs unboundedly ahead of the single table writer (the consumer's
    read-ahead and the scheduler's skip sets would grow with the crawl). The bound caps the rate
    at bound / apply latency (Little's law), and with many origins the rate is set by
    politeness, not by concurrency: the bound's value is measured in docs/performance.md, "The
    politeness-bound row". A settling URL costs an entry of the scheduler's skip set; its
    outcome is in Kafka already, so a crash does not fetch it again."""
    return max(4 * concurrency, MIN_MAX_UNAPPLIED)


def early_release(outcome: Outcome) -> bool:
    """Whether the origin's slot is freed once the outcome is in Kafka (not when it is
    applied): a page fetched without a backoff or a retry, that set no cookie (the next request
    of the origin must carry the cookies the frontier stores from it)."""
    return (
        outcome.kind == "page"
        and not outcome.backoff
        and outcome.state != "retry"
        and not outcome.set_cookies
    )
