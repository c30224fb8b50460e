"""The topic generation pointer: which generation of the frontier topics the workers serve.

``<prefix>.generation`` (compacted, one partition) holds a few records, each under its key:

- ``pointer``: a ``Pointer``: the generation served (its number and partition count), the one
  kept for a rollback, and the target of a reshard under way with how far it got;
- ``lock``: the lease of the running ``admin reshard`` (``topology/admin/reshard/lock.py``);
- ``manifest/<generation>/<partition>``: what a reshard wrote into one partition of a
  generation (``topology/admin/reshard/manifest.py``).

No topic or no pointer: generation 1, the names every release before reshard used. Every
command that uses a generation's topics (the worker, ``seed``, ``recrawl``, ``status``,
``admin create-topics``) calls ``resolve`` once at start, which sets ``Settings.generation``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

import msgspec
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.topology.admin.config import librdkafka_config
from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.admin.topics import connected_metadata, consume_to_end, publish
from streamcrawl.topology.settings import Settings

POINTER = b"pointer"
LOCK = b"lock"


class Generation(msgspec.Struct, frozen=True, kw_only=True):
    """One generation of the frontier topics: its number and partition count."""

    number: int
    partitions: int


class Pointer(msgspec.Struct, frozen=True, kw_only=True):
    """``current``: the generation the workers serve. ``previous``: the one before it, kept
    until ``reshard --delete-old`` (``--rollback`` goes back to it). ``next``: the target of a
    reshard not finished yet, ``step`` the last step it completed (``reshard/run.py``).
    ``highest``: the highest number ever used (a number is never used twice, so a rolled-back
    generation's topics can never be mistaken for a new one's)."""

    current: Generation
    previous: Generation | None = None
    next: Generation | None = None
    step: str = ""
    highest: int = 1
    updated_at: float = 0.0


_encode = msgspec.json.Encoder().encode
_decode_pointer = msgspec.json.Decoder(Pointer).decode


SHORT = "generation"  # never a generation's own topic (``topics.GENERATION_TOPICS``)


def topic(settings: Settings) -> str:
    """``<prefix>.generation``."""
    return f"{settings.topic_prefix}.{SHORT}"


def read_records(settings: Settings) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of ``<prefix>.generation`` in offset order; [] when it does not exist.
    Raises CrawlError if Kafka is unreachable."""
    errors = ConnectionErrors()
    conf = librdkafka_config(settings) | errors.config()
    consumer = Consumer(
        conf
        | {
            "group.id": f"streamcrawl-generation-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        name = topic(settings)
        metadata = connected_metadata(consumer, settings, errors)  # every topic: creates none
        meta = metadata.topics.get(name)
        if meta is None or meta.error is not None or not meta.partitions:
            return []
        consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
        return [(m.key() or b"", m.value()) for m in consume_to_end(consumer, 1)]
    finally:
        consumer.close()


def latest(records: Iterable[tuple[bytes, bytes | None]]) -> dict[bytes, bytes]:
    """The last value of every key (a tombstone removes it)."""
    found: dict[bytes, bytes] = {}
    for key, value in records:
        if value is None:
            found.pop(key, None)
        else:
            found[key] = value
    return found


def decode_pointer(value: bytes) -> Pointer:
    try:
        return _decode_pointer(value)
    except msgspec.DecodeError as exc:
        raise CrawlError(f"the generation pointer cannot be read ({exc})") from None


def read_pointer(settings: Settings) -> Pointer | None:
    """The pointer, or None before the first reshard."""
    raw = latest(read_records(settings)).get(POINTER)
    return None if raw is None else decode_pointer(raw)


def write(settings: Settings, records: Iterable[tuple[bytes, bytes | None]]) -> None:
    """Publish records (``None``: a tombstone) on ``<prefix>.generation``, which must exist,
    and wait for the acks (``topics.publish``); raises CrawlError naming the topic."""
    publish(settings, SHORT, records, what="the reshard's records")


def write_pointer(settings: Settings, pointer: Pointer) -> None:
    stamped = msgspec.structs.replace(pointer, updated_at=time.time())
    write(settings, [(POINTER, _encode(stamped))])


def at(settings: Settings, generation: Generation) -> Settings:
    """``settings`` naming the topics of ``generation`` (with its partition count)."""
    return settings.model_copy(
        update={"generation": generation.number, "partitions": generation.partitions}
    )


def resolve(settings: Settings, *, strict: bool = False) -> Settings:
    """``settings`` at the generation the pointer says the workers serve.

    ``strict`` (the worker, ``admin create-topics``): raise ConfigError when the settings'
    partition count is not the generation's (the worker would build tables of another count)
    or a reshard is under way (its old generation is frozen, its new one not complete);
    otherwise the partition count follows the generation. Seeds and other writes of a command
    that is not strict go to the generation served; ``reshard`` copies what arrives on the old
    one before it switches.
    """
    pointer = read_pointer(settings)
    if pointer is None:  # never resharded: the first generation's names, whatever the setting
        return settings.model_copy(update={"generation": 1})
    current = pointer.current
    if not strict:
        return at(settings, current)
    if pointer.next is not None:
        raise ConfigError(
            f"a reshard to {pointer.next.partitions} partitions is under way (generation "
            f"{pointer.next.number}): run `streamcrawl admin reshard --partitions "
            f"{pointer.next.partitions}` to the end, or `--rollback`, then start the workers"
        )
    if settings.partitions != current.partitions:
        raise ConfigError(
            f"the topics are at generation {current.number} with {current.partitions} "
            f"partitions (streamcrawl admin reshard): set STREAMCRAWL_PARTITIONS="
            f"{current.partitions} (chart: kafka.partitions={current.partitions})"
        )
    return at(settings, current)
