"""What every worker must see in full: crawl specs (``control``) and page budgets (``budget``).

Both are small compacted topics read from the beginning by a plain aiokafka consumer that
assigns itself every partition (no consumer group), into in-memory dicts. Why not Faust
GlobalTables: Faust 0.15 documents that a GlobalTable shared by several workers may loop in
recovery (``faust/tables/globaltable.py``), and a GlobalTable written from a partitioned agent
needs as many changelog partitions as the source topic. A direct reader has neither problem,
costs one consumer per worker, and makes a bad ``control`` message a logged, counted skip: a
spec that breaks the bounds of ``CrawlPolicy`` or whose rules do not compile is refused with one
warning naming the crawl, the field and why, and the crawl keeps the spec it had.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from mode import Service

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.plugins.registry import Registry
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.connection import KafkaConnection
from streamcrawl.agents.stream.metrics import BadMessages
from streamcrawl.schemas.codec import BadMessage, decode
from streamcrawl.schemas.records import CrawlPolicy

log = logging.getLogger(__name__)

# An idle reader's getmany: a record or a stop ends it at once, so this only sets how often an
# idle worker wakes (docs/performance.md, "An idle worker").
READ_WAIT_MS = 5000


def budget_key(crawl_id: str, partition: int) -> bytes:
    """Key of one partition's admitted count of one crawl on the budget topic."""
    return f"{crawl_id}\x00{partition}".encode()


class SharedView(Service):
    """Crawl id -> rules and (crawl id, partition) -> admitted count, for every crawl.

    ``ready`` is set once the reader has caught up with the end offsets seen at start.
    ``refresh_metadata`` fetches the cluster's metadata into the started consumer, for a topic
    that does not exist yet (the wiring's ``topology.worker.internals.refresh_metadata``: no
    public aiokafka call does it).
    """

    def __init__(
        self,
        connection: KafkaConnection,
        control_topic: str,
        budget_topic: str,
        metrics: BadMessages,
        tune_consumer: Callable[[AIOKafkaConsumer], None] = lambda _consumer: None,
        *,
        refresh_metadata: Callable[[AIOKafkaConsumer], Awaitable[None]],
        plugins: Registry | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plugins = plugins  # None: the installed entry points (docs/plugins.md)
        self.connection = connection
        self.tune_consumer = tune_consumer  # called with the consumer once it started
        self.refresh_metadata = refresh_metadata
        self.control_topic = control_topic
        self.budget_topic = budget_topic
        self.metrics = metrics
        self.policies: dict[str, CrawlPolicy] = {}
        self.budgets: dict[bytes, int] = {}
        self.ready = asyncio.Event()
        self._rules: dict[str, CrawlRules] = {}
        self._changed = asyncio.Condition()
        self._consumer: AIOKafkaConsumer | None = None
        self.listeners: list[Callable[[CrawlPolicy], None]] = []

    # -- reads ---------------------------------------------------------------------------------
    def rules(self, crawl_id: str) -> CrawlRules | None:
        """Compiled rules of a crawl, rebuilt when its policy changes; ``None`` if unknown."""
        policy = self.policies.get(crawl_id)
        if policy is None:
            return None
        rules = self._rules.get(crawl_id)
        if rules is None or rules.policy is not policy:
            rules = self._rules[crawl_id] = self._compile(policy)
        return rules

    def _compile(self, policy: CrawlPolicy) -> CrawlRules:
        """The crawl's rules; a plugin this worker lacks does not refuse the spec (another
        worker may have it): its rules end the crawl's URLs ``failed`` with ``missing_plugin``,
        said here once per spec (docs/plugins.md)."""
        rules = CrawlRules.from_policy(policy, self.plugins, missing_ok=True)
        if rules.plugins.missing is not None:
            log.error(
                "crawl %s: %s: its URLs end failed on this worker (docs/plugins.md)",
                policy.crawl_id,
                rules.plugins.missing,
                extra={"crawl_id": policy.crawl_id},
            )
        return rules

    async def wait_rules(self, crawl_id: str, timeout: float) -> CrawlRules | None:
        """The crawl's rules, waiting up to ``timeout`` s for its spec; ``None``: it never came."""

        async def arrived() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: crawl_id in self.policies)

        if crawl_id not in self.policies:
            try:
                await asyncio.wait_for(arrived(), timeout)
            except TimeoutError:
                return None
        return self.rules(crawl_id)

    def admitted_elsewhere(self, crawl_id: str, partition: int, partitions: int) -> int:
        """URLs of the crawl admitted by every partition but ``partition`` (as last published)."""
        return sum(
            self.budgets.get(budget_key(crawl_id, p), 0)
            for p in range(partitions)
            if p != partition
        )

    # -- the reader ----------------------------------------------------------------------------
    async def on_start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            **self.connection,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await self._consumer.start()
        self.tune_consumer(self._consumer)
        tps = []
        for topic in (self.control_topic, self.budget_topic):
            parts = self._consumer.partitions_for_topic(topic)
            if not parts:
                parts = await self._wait_partitions(topic)
            tps += [TopicPartition(topic, p) for p in sorted(parts)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_beginning(*tps)
        self.add_future(self._read(tps))

    async def _wait_partitions(self, topic: str) -> set[int]:
        assert self._consumer is not None
        for _ in range(60):
            await self.refresh_metadata(self._consumer)
            parts = self._consumer.partitions_for_topic(topic)
            if parts:
                return set(parts)
            await asyncio.sleep(1.0)
        raise RuntimeError(
            f"topic {topic} does not exist: run `streamcrawl admin create-topics` and check "
            "STREAMCRAWL_TOPIC_PREFIX"
        )

    async def on_stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    async def _read(self, tps: list[TopicPartition]) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        end = await consumer.end_offsets(tps)
        while not self.should_stop:
            if not self.ready.is_set() and await self._caught_up(tps, end):
                self.ready.set()
                log.info("shared view ready: %d crawls", len(self.policies))
            # a record ends the wait at once, and so does a stop (the consumer's close wakes
            # it); the timeout only bounds an idle reader's sleep
            batches = await consumer.getmany(timeout_ms=READ_WAIT_MS, max_records=1000)
            changed = False
            for messages in batches.values():
                for msg in messages:
                    changed |= self._apply(msg.topic, msg.partition, msg.offset, msg.key, msg.value)
            if changed:
                async with self._changed:
                    self._changed.notify_all()

    async def _caught_up(self, tps: list[TopicPartition], end: dict[TopicPartition, int]) -> bool:
        assert self._consumer is not None
        for tp in tps:
            if await self._consumer.position(tp) < end[tp]:
                return False
        return True

    def _apply(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> bool:
        where = {"topic": topic, "partition": partition, "offset": offset}
        if topic == self.budget_topic:
            try:
                if key is not None and value is not None:
                    self.budgets[key] = int(value)
            except ValueError:
                self.metrics.bad_messages.labels("budget").inc()
                log.warning("bad budget message at %s/%s@%s", topic, partition, offset, extra=where)
            return False
        crawl_id = (key or b"").decode("utf-8", "replace")
        if value is None:  # tombstone: the crawl was deleted
            self.policies.pop(crawl_id, None)
            return True
        try:
            policy: CrawlPolicy = decode("control", value)
            rules = self._compile(policy)
        except (BadMessage, ConfigError) as exc:
            # Refused, never applied: the crawl keeps the last spec it had, if any.
            self.metrics.bad_messages.labels("control").inc()
            log.warning(
                "refusing crawl spec of %r at %s/%s@%s: %s",
                crawl_id[:100],
                topic,
                partition,
                offset,
                exc,
                extra=where | {"crawl_id": crawl_id[:100]},
            )
            return False
        self.policies[policy.crawl_id] = policy
        self._rules[policy.crawl_id] = rules
        for listener in self.listeners:
            listener(policy)
        return True
