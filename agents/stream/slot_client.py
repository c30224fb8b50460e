"""The render worker's side of slot leases: its ``Lender``, over Kafka.

A render worker owns no origin's slot. ``RemoteSlots.borrow`` asks the owner of origin B for a
loan (a ``SlotMessage`` claim on ``outcomes`` keyed by B, reaching the worker whose partition
holds B: ``agents.stream.slot_leases``) and waits for its ``SlotGrant`` on ``grants``, keyed
by this worker's id: the worker reads only its own key's partition, in no group, from where
it was when the worker started. A grant carries B's delay and robots.txt as the owner holds
them (``origin_state`` hands them to ``OtherOrigins``); never a credential: B's headers and
credential are this process's own settings, as a fetch worker's (``OtherOrigins.request``).

No grant by the deadline (the render's settle timeout): the claim is withdrawn (a return
without ``sent_at``) and the subrequest refused (``slot_timeout``); a grant that comes after
its ``send_by`` is given back unused, its request not sent. ``returned`` sends the return
with the time the request was on the wire (docs/rendering.md, "Other origins in the Kafka
wiring").
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from streamcrawl.agents.errors import CrawlError
from streamcrawl.agents.frontier.scheduler import Loan
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.connection import KafkaConnection
from streamcrawl.agents.stream.frontier_agent import Publisher
from streamcrawl.agents.stream.tables import partition_for
from streamcrawl.schemas.codec import BadMessage, decode, encode
from streamcrawl.schemas.records import OriginState, SlotGrant, SlotMessage

log = logging.getLogger(__name__)

POLL_MS = 100  # the longest the grants consumer waits: a grant's latency


class RemoteSlots:
    """Loans of other origins' slots from their owners, for one render worker (a ``Lender``;
    ``lends_own`` False: a render runs inside its page's dispatch, which holds the page's
    origin's slot)."""

    lends_own = False

    def __init__(
        self,
        publish: Publisher,
        connection: KafkaConnection,
        grants_topic: str,
        partitions_for: Callable[[str], Awaitable[set[int]]],
        worker_id: str | None = None,
    ) -> None:
        self.publish = publish
        self.connection = connection
        self.worker_id = worker_id or uuid.uuid4().hex
        self.topic = grants_topic
        # The partition its grants are keyed to, from the topic's own count at ``start`` (it
        # keeps the count it was created with, whatever the frontier's is after a reshard).
        self.partitions_for = partitions_for
        self.tp = TopicPartition(grants_topic, 0)
        self._waiting: dict[str, asyncio.Future[SlotGrant]] = {}
        self._loans: dict[int, SlotMessage] = {}  # token -> its claim
        self._tokens = itertools.count(1)
        self._robots: dict[str, SlotGrant] = {}  # origin -> its last grant with robots.txt
        self._sends: set[asyncio.Task[None]] = set()
        self._consumer: AIOKafkaConsumer | None = None
        self._reading: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read this worker's grants from the end of its partition (before any claim)."""
        self._consumer = AIOKafkaConsumer(
            **self.connection, enable_auto_commit=False, fetch_max_wait_ms=POLL_MS
        )
        count = len(await self.partitions_for(self.topic))
        if count == 0:
            raise CrawlError(f"no topic {self.topic}: run `streamcrawl admin create-topics`")
        self.tp = TopicPartition(self.topic, partition_for(self.worker_id, count))
        await self._consumer.start()
        self._consumer.assign([self.tp])
        await self._consumer.seek_to_end(self.tp)
        await self._consumer.position(self.tp)  # resolved now: no grant of ours is missed
        self._reading = asyncio.ensure_future(self._read())

    async def stop(self) -> None:
        """Stop reading; wait for the returns still being sent."""
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
        await asyncio.gather(*self._sends, return_exceptions=True)
        if self._consumer is not None:
            await self._consumer.stop()

    async def borrow(
        self, origin: str, rules: CrawlRules, delay: float, deadline: float
    ) -> Loan | None:
        """A loan of ``origin``'s slot from its owner, waited for until ``deadline`` (None:
        no grant by then, the claim withdrawn)."""
        claim = SlotMessage(
            kind="claim",
            claim_id=uuid.uuid4().hex,
            crawl_id=rules.policy.crawl_id,
            origin=origin,
            worker_id=self.worker_id,
            not_after=deadline,
        )
        grant = await self._granted(claim, deadline)
        if grant is None or time.time() > grant.send_by:
            if grant is not None:
                log.info("grant of %s came after its send_by: not used", origin)
            self._send(claim, sent_at=None, delay=delay)
            return None
        if grant.robots_expires > 0:
            self._robots[origin] = grant
        loan = Loan(origin, next(self._tokens))
        self._loans[loan.token] = claim
        return loan

    def returned(self, loan: Loan, sent_at: float, delay: float) -> None:
        """The request of ``loan`` ended, on the wire at ``sent_at``: tell the owner."""
        claim = self._loans.pop(loan.token, None)
        if claim is not None:
            self._send(claim, sent_at=sent_at, delay=delay)

    def fetched(self, origin: str, seq: int, started_at: float) -> None:
        """Not called (``lends_own`` is False): the render's page holds its own slot."""

    def origin_state(self, origin: str) -> OriginState:
        """What this worker knows of ``origin``: the robots.txt of its last grant."""
        grant = self._robots.get(origin)
        if grant is None:
            return OriginState(origin=origin)
        return OriginState(
            origin=origin,
            robots_status=grant.robots_status,
            robots_body=grant.robots_body,
            robots_expires=grant.robots_expires,
        )

    async def _granted(self, claim: SlotMessage, deadline: float) -> SlotGrant | None:
        waiting = asyncio.get_running_loop().create_future()
        self._waiting[claim.claim_id] = waiting
        try:
            await self.publish("outcomes", [(claim.origin.encode(), encode(claim))])
            return await asyncio.wait_for(waiting, max(0.0, deadline - time.time()))
        except (TimeoutError, KafkaError):
            return None
        finally:
            self._waiting.pop(claim.claim_id, None)

    def _send(self, claim: SlotMessage, *, sent_at: float | None, delay: float) -> None:
        """Send the return of ``claim`` in the background (a failed one: the owner's expiry)."""
        back = SlotMessage(
            kind="return",
            claim_id=claim.claim_id,
            crawl_id=claim.crawl_id,
            origin=claim.origin,
            worker_id=self.worker_id,
            sent_at=sent_at,
            delay=delay,
        )
        task = asyncio.ensure_future(self._publish_return(back))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _publish_return(self, back: SlotMessage) -> None:
        try:
            await self.publish("outcomes", [(back.origin.encode(), encode(back))])
        except KafkaError as exc:
            log.warning("return of a loan of %s not sent: %s", back.origin, exc)

    async def _read(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while True:
            batch = await consumer.getmany(self.tp, timeout_ms=POLL_MS)
            for message in batch.get(self.tp, []):
                self._take(message.value or b"")

    def _take(self, value: bytes) -> None:
        try:
            grant = decode("grants", value)
        except BadMessage as exc:
            log.warning("skipping bad grants message: %s", exc)
            return
        assert isinstance(grant, SlotGrant)
        waiting = self._waiting.get(grant.claim_id)
        if grant.worker_id == self.worker_id and waiting is not None and not waiting.done():
            waiting.set_result(grant)
