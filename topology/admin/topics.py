"""Kafka administration for the Kafka wiring: the topics, and the compacted ``control`` topic.

Topics (docs/architecture.md, "The Kafka topology"), all with ``settings.partitions`` partitions:

=====================  =========================================================================
``<prefix>.frontier``  FrontierBatch, keyed by origin
``<prefix>.outcomes``  Outcome, keyed by origin; and SlotMessage (a render worker's claim or
                       return of a loan of the origin's politeness slot, read by its owner)
``<prefix>.pages``     Page, keyed by origin; zstd, ``max.message.bytes`` from the settings
``<prefix>.status``    UrlStatus (terminal URL states), keyed by origin; consumed by the sink
``<prefix>.control``   CrawlPolicy keyed by crawl id; ``cleanup.policy=compact``
``<prefix>.counts``    PartitionCounts (agents/stream/counts.py): partition p = frontier partition
                       p's terminal-state counts; compacted; read by ``status``
``<prefix>.captures``  Capture (a fetch's HTTP exchanges, crawls with ``CrawlPolicy.warc`` only),
                       keyed by origin; zstd, ``max.message.bytes`` as ``pages``; read by
                       ``streamcrawl warc`` (group ``warc_group``)
``<prefix>.render``    RenderRequest (a fetched page a crawl renders), keyed by origin; zstd,
                       ``max.message.bytes`` as ``pages``; read by ``streamcrawl render-worker``
                       (group ``render_group``)
``<prefix>.grants``    SlotGrant (the owner's loan), keyed by the render worker's id; each render
                       worker reads its own key's partition, in no group
=====================  =========================================================================

Each also gets ``min.insync.replicas`` from the settings (``durability_configs``), as do Faust's
table changelogs, which are created here too, and the ``budget`` topic Faust creates.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Generator, Iterable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.cimpl import NewTopic

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.schemas.codec import BadMessage, decode, encode
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.admin import errors as kafka_errors
from streamcrawl.topology.admin import safety
from streamcrawl.topology.admin.config import librdkafka_config, librdkafka_producer_config
from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.settings import Settings

log = logging.getLogger(__name__)

TOPICS = (
    "frontier",
    "outcomes",
    "pages",
    "status",
    "control",
    "counts",
    "captures",
    "render",
    "grants",
)
# Faust's table changelogs. Created here, not left to the worker: a worker that creates them
# itself can read the broker's metadata before the new topic is in it and then crash-loops on
# "changelog topic has 0 partitions" (seen with a KRaft broker).
TABLES = ("seen", "pending", "origins")
CONNECT_TIMEOUT_S = 10.0


# The topics whose partitions are the frontier's (an origin's partition is its murmur2 mod the
# count, and the tables are co-partitioned with them): each generation of `admin reshard` has
# its own (``<prefix>.g<N>.<short>``); the others keep their names across generations.
GENERATION_TOPICS = ("frontier", "outcomes", "counts", "budget")


def topic_name(settings: Settings, short: str) -> str:
    """``<prefix>.<short>``, e.g. ``streamcrawl.pages``; ``<prefix>.g<N>.<short>`` for the
    frontier topics of generation N > 1 (``GENERATION_TOPICS``)."""
    if settings.generation > 1 and short in GENERATION_TOPICS:
        return f"{settings.topic_prefix}.g{settings.generation}.{short}"
    return f"{settings.topic_prefix}.{short}"


def app_id(settings: Settings) -> str:
    """The Faust app id, which is also the consumer group of the workers (and names the
    changelogs): ``<prefix>-worker``, ``<prefix>-g<N>-worker`` from generation 2 on."""
    if settings.generation > 1:
        return f"{settings.topic_prefix}-g{settings.generation}-worker"
    return f"{settings.topic_prefix}-worker"


def sink_group(settings: Settings) -> str:
    """The consumer group of the sink (``pages`` + ``status`` into Cassandra); reset it to
    replay the sink."""
    return f"{settings.topic_prefix}-sink"


def warc_group(settings: Settings) -> str:
    """The consumer group of the WARC writers (``streamcrawl warc``, ``captures`` into WARC
    files); several writers share it, each writing its own files."""
    return f"{settings.topic_prefix}-warc"


def render_group(settings: Settings) -> str:
    """The consumer group of the render workers (``streamcrawl render-worker``, ``render``)."""
    return f"{settings.topic_prefix}-render"


def changelog_name(settings: Settings, table: str) -> str:
    """Faust's name for the changelog topic of ``table``."""
    return f"{app_id(settings)}-{table}-changelog"


def durability_configs(settings: Settings) -> dict[str, str]:
    """The configs of every topic the project creates (changelogs and ``budget`` included):
    the replicas an acks=all write must reach (``safety.topic_warnings`` checks the values)."""
    return {"min.insync.replicas": str(settings.min_insync_replicas)}


def topic_configs(settings: Settings) -> dict[str, dict[str, str]]:
    """The topic-level configs each topic must have (short name -> config)."""
    durable = durability_configs(settings)
    configs: dict[str, dict[str, str]] = {short: dict(durable) for short in TOPICS}
    configs["pages"] = durable | {
        "compression.type": "zstd",
        "max.message.bytes": str(settings.max_message_bytes),
    }
    # Raw payloads (still gzip when they came so), as big as pages: the same limit.
    configs["captures"] = dict(configs["pages"])
    configs["render"] = dict(configs["pages"])  # a fetched page's body, for a render worker
    configs["control"] = durable | {"cleanup.policy": "compact"}
    # Partition p's last message is its whole count (agents/stream/counts.py); compaction only
    # bounds the topic's size, so rolled segments are cleaned early.
    configs["counts"] = durable | {
        "cleanup.policy": "compact",
        "segment.ms": "600000",
        "min.cleanable.dirty.ratio": "0.1",
    }
    return configs


def unreachable(settings: Settings, exc: BaseException | None = None) -> CrawlError:
    """The one-line error for a broker that does not answer within ``CONNECT_TIMEOUT_S``."""
    return kafka_errors.unreachable(settings, CONNECT_TIMEOUT_S, exc)


def connected_metadata(
    client: AdminClient | Consumer,
    settings: Settings,
    errors: ConnectionErrors,
    topic: str | None = None,
) -> Any:
    """The cluster's metadata (of ``topic`` alone when given), asked every second until
    ``CONNECT_TIMEOUT_S``; the client's settings must include ``errors.config()``.

    Raises CrawlError as soon as the brokers refused our credentials or certificate (librdkafka
    keeps retrying those: without ``errors`` the call would only time out), else at the end.
    """
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            return client.list_topics(topic, timeout=1.0)
        except KafkaException as exc:
            last = exc
        client.poll(0)  # serves error_cb
        failure = errors.failure(settings)
        if failure is not None:
            raise failure
        if time.monotonic() > deadline:
            raise unreachable(settings, last)


def flush_or_explain(producer: Producer, settings: Settings, errors: ConnectionErrors) -> None:
    """``flush`` until every message is delivered; raises CrawlError at once for refused
    credentials or certificate, else after ``CONNECT_TIMEOUT_S`` with messages left."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while producer.flush(1.0) > 0:
        failure = errors.failure(settings)
        if failure is not None:
            raise failure
        if time.monotonic() > deadline:
            raise unreachable(settings)


def existing_partitions(
    admin: AdminClient, settings: Settings, errors: ConnectionErrors | None = None
) -> dict[str, int]:
    """Partition count of every topic that exists; raises CrawlError if Kafka is unreachable
    (explained when ``errors`` is the client's ``error_cb``, see ``connected_metadata``)."""
    metadata = connected_metadata(admin, settings, errors or ConnectionErrors())
    return {name: len(meta.partitions) for name, meta in metadata.topics.items() if not meta.error}


def wait_for_topics(admin: AdminClient, names: list[str], timeout: float = 10.0) -> None:
    """Wait until the broker's metadata lists every topic in ``names`` with its partitions.

    ``create_topics(...).result()`` returns once the controller recorded a topic; the broker
    that answers metadata and config requests can trail it briefly, and a describe or
    produce in that window fails with "unknown topic or partition".
    """
    deadline = time.monotonic() + timeout
    while True:
        metadata = admin.list_topics(timeout=CONNECT_TIMEOUT_S)
        ready = {n for n, meta in metadata.topics.items() if not meta.error and meta.partitions}
        if set(names) <= ready or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def create_topics(settings: Settings, warn: Callable[[str], None] = log.warning) -> list[str]:
    """Create the missing topics and align topic configs; returns one line per topic.

    Idempotent: existing topics are kept (their configs set to ours when they differ). Raises
    ``ConfigError`` before changing anything if an existing topic has a different partition
    count than ``settings.partitions`` (keys would move to other partitions) or the
    replication settings cannot work on this cluster (``safety``, whose warnings go to
    ``warn``), and ``CrawlError`` if Kafka cannot be reached or refuses a request.
    """
    errors = ConnectionErrors()
    admin = AdminClient(librdkafka_config(settings) | errors.config())
    metadata = connected_metadata(admin, settings, errors)
    topics = {name: meta for name, meta in metadata.topics.items() if not meta.error}
    existing = {name: len(meta.partitions) for name, meta in topics.items()}
    changelog = durability_configs(settings) | {"cleanup.policy": "compact"}
    wanted = {changelog_name(settings, t): changelog for t in TABLES}
    configs = topic_configs(settings)
    wanted |= {topic_name(settings, short): configs[short] for short in TOPICS}
    # From generation 2 on `pages`, `status`, `captures` and `control` keep their partitions
    # (reshard only grows them): their consumers do not depend on the count.
    stable = {topic_name(settings, s) for s in TOPICS if s not in GENERATION_TOPICS}

    def bound(name: str) -> bool:
        return settings.generation == 1 or name not in stable

    _check_partitions(settings, {n: existing[n] for n in wanted if n in existing and bound(n)})
    replicas = {
        n: min((len(p.replicas) for p in topics[n].partitions.values()), default=0)
        for n in wanted
        if n in topics
    }
    rf, isr = settings.replication_factor, settings.min_insync_replicas
    acks = librdkafka_producer_config(settings)["acks"]  # every producer's (config.py)
    for line in [
        *safety.topic_warnings(rf, isr, acks, len(metadata.brokers)),
        *safety.existing_topic_warnings(rf, isr, replicas),
    ]:
        warn(line)
    done: list[str] = []
    missing = [n for n in wanted if n not in existing]
    if missing:
        done += _create(admin, settings, [(n, wanted[n]) for n in missing])
    for name, config in wanted.items():
        if name in existing:
            done.append(_align_configs(admin, settings, name, config))
    return done


def _check_partitions(settings: Settings, existing: dict[str, int]) -> None:
    for name, count in sorted(existing.items()):
        if count != settings.partitions:
            raise ConfigError(
                f"topic {name} has {count} partitions, settings say {settings.partitions}: "
                "partitions can only grow with `kafka-topics --alter --partitions N` (which "
                "moves origins to other partitions: stop the workers and delete their state "
                f"first); set STREAMCRAWL_PARTITIONS={count} or --partitions {count} to use "
                "the topics as they are"
            )


def _create(
    admin: AdminClient, settings: Settings, topics: list[tuple[str, dict[str, str]]]
) -> list[str]:
    new = [
        NewTopic(
            name,
            num_partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            config=config,
        )
        for name, config in topics
    ]
    futures = admin.create_topics(new, request_timeout=CONNECT_TIMEOUT_S)
    done = []
    created = []
    for name, config in topics:
        try:
            futures[name].result()
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:  # a concurrent create-topics
                done.append(_align_configs(admin, settings, name, config))
                continue
            raise CrawlError(f"cannot create topic {name}: {err.str()}") from None
        created.append(name)
        extra = "".join(f", {k}={v}" for k, v in sorted(config.items()))
        done.append(
            f"created {name} ({settings.partitions} partitions, replication "
            f"{settings.replication_factor}{extra})"
        )
    wait_for_topics(admin, created)
    return done


def _align_configs(
    admin: AdminClient, settings: Settings, name: str, config: dict[str, str]
) -> str:
    """Set the topic configs that differ from ``config``; returns what was done."""
    if not config:
        return f"exists {name} ({settings.partitions} partitions)"
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    try:
        current = admin.describe_configs([resource])[resource].result()
    except KafkaException as exc:
        raise CrawlError(f"cannot read the configs of topic {name}: {exc}") from None
    differ = {k: v for k, v in config.items() if k not in current or current[k].value != v}
    if not differ:
        return f"exists {name} ({settings.partitions} partitions, configs up to date)"
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in differ.items()
    ]
    change = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([change])[change].result()
    except KafkaException as exc:
        raise CrawlError(f"cannot update the configs of topic {name}: {exc}") from None
    was = ", ".join(
        f"{k}={v} (was {current[k].value if k in current else 'unset'})"
        for k, v in sorted(differ.items())
    )
    return f"updated {name}: {was}"


def read_control(settings: Settings) -> dict[str, CrawlPolicy]:
    """The latest policy of every crawl on the compacted control topic (crawl id -> policy).

    Reads from the beginning up to the end offsets seen at start, with a throwaway consumer
    group and no commits. A tombstone removes the crawl; undecodable values are logged and
    skipped. Raises CrawlError if Kafka is unreachable or the topic does not exist.
    """
    policies: dict[str, CrawlPolicy] = {}
    for msg in read_messages(settings, "control", group="cli", from_beginning=True):
        crawl_id = (msg.key() or b"").decode("utf-8", "replace")
        value = msg.value()
        if value is None:
            policies.pop(crawl_id, None)
            continue
        try:
            policies[crawl_id] = decode("control", value)
        except BadMessage as exc:
            log.warning("skipping control message at offset %s: %s", msg.offset(), exc)
    return policies


def read_messages(
    settings: Settings, short: str, *, group: str, from_beginning: bool, follow: bool = False
) -> Generator[Message, None, None]:
    """The messages of topic ``short`` from its oldest (``from_beginning``) or from its end, up
    to the end offsets seen at start, or for good with ``follow``.

    A throwaway consumer group (``streamcrawl-<group>-<random>``) that never commits, so it
    cannot disturb the workers; the consumer closes when the generator does. Raises CrawlError
    if Kafka is unreachable or the topic does not exist.
    """
    errors = ConnectionErrors()
    conf = (
        librdkafka_config(settings)
        | errors.config()
        | {
            "group.id": f"streamcrawl-{group}-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
        }
    )
    consumer = Consumer(conf)
    try:
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        partitions = assign_all(consumer, settings, errors, topic_name(settings, short), start)
        yield from consume_to_end(consumer, partitions, follow=follow)
    finally:
        consumer.close()


def assign_all(
    consumer: Consumer, settings: Settings, errors: ConnectionErrors, name: str, offset: int
) -> int:
    """Assign every partition of topic ``name`` at ``offset``; returns the partition count.

    ``errors`` is the consumer's ``error_cb`` (see ``connected_metadata``).
    """
    metadata = connected_metadata(consumer, settings, errors, name)
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None or not topic.partitions:
        raise CrawlError(
            f"topic {name} does not exist: run `streamcrawl admin create-topics` "
            "(and check STREAMCRAWL_TOPIC_PREFIX / --topic-prefix)"
        )
    consumer.assign([TopicPartition(name, p, offset) for p in topic.partitions])
    return len(topic.partitions)


def consume_to_end(consumer: Consumer, partitions: int, *, follow: bool = False) -> Any:
    """Yield messages until every assigned partition reported end-of-partition once.

    With ``follow`` it never stops (until interrupted). Needs ``enable.partition.eof``.
    Raises CrawlError on a fatal consumer error.
    """
    at_end: set[int] = set()
    while follow or len(at_end) < partitions:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        err = msg.error()
        if err is None:
            yield msg
        elif err.code() == KafkaError._PARTITION_EOF:
            at_end.add(msg.partition() or 0)
        elif err.fatal() or not err.retriable():
            raise CrawlError(f"Kafka consumer error on {msg.topic()}: {err.str()}")
        else:
            log.warning("Kafka consumer: %s", err.str())


def publish_control(settings: Settings, policy: CrawlPolicy) -> None:
    """Publish ``policy`` on the control topic keyed by its crawl id; waits for the ack."""
    publish(settings, "control", [(policy.crawl_id.encode("utf-8"), encode(policy))])


def publish(
    settings: Settings,
    short: str,
    messages: Iterable[tuple[bytes, bytes | None]],
    what: str = "",
) -> None:
    """Publish ``(key, value)`` messages on topic ``short`` (a ``None`` value: a tombstone)
    and wait for every ack.

    Raises CrawlError naming the topic (and ``what`` was published) if Kafka is unreachable,
    refuses the client, or refuses a message.
    """
    errors = ConnectionErrors()
    producer = Producer(librdkafka_producer_config(settings) | errors.config())
    failures: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    name = topic_name(settings, short)
    for key, value in messages:
        producer.produce(name, key=key, value=value, on_delivery=delivered)
    flush_or_explain(producer, settings, errors)
    if failures:
        raise CrawlError(f"cannot publish {what + ' ' if what else ''}to {name}: {failures[0]}")
