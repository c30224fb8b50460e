"""Wire encoding of the Kafka values: JSON UTF-8, one ``schemas/records.py`` Struct per topic.

``encode`` is what every producer uses; ``decode`` is what every consumer uses, and it rejects
anything that is not a known record of a known schema version, so a reader never acts on a
message it does not understand (it logs and skips it, or stops, as its caller decides).
"""

from __future__ import annotations

from typing import Any

import msgspec

from streamcrawl.schemas.records import SCHEMA_VERSION, WIRE_RECORDS

KNOWN_VERSIONS = frozenset({SCHEMA_VERSION})

_encoder = msgspec.json.Encoder()
_decoders: dict[str, msgspec.json.Decoder[Any]] = {
    topic: msgspec.json.Decoder(record) for topic, record in WIRE_RECORDS.items()
}


class _Envelope(msgspec.Struct):
    """Only the version, read when a full decode fails, to say *why* it failed."""

    v: Any = None


_envelope = msgspec.json.Decoder(_Envelope)


class BadMessage(ValueError):
    """A Kafka value that is not valid JSON, not the topic's record shape, or of unknown version."""


def encode(record: msgspec.Struct) -> bytes:
    """The JSON UTF-8 bytes of a wire record (field order = the Struct's, ``None`` as null)."""
    return _encoder.encode(record)


def topic_record(topic: str) -> str:
    """The short topic name (``pages``) of ``topic``, which may carry the prefix (``sc.pages``).

    Raises ``BadMessage`` if no wire record is published on that topic.
    """
    if topic in WIRE_RECORDS:
        return topic
    short = topic.rpartition(".")[2]
    if short in WIRE_RECORDS:
        return short
    raise BadMessage(f"no wire record for topic {topic!r} (known: {', '.join(WIRE_RECORDS)})")


def decode(topic: str, data: bytes | bytearray | memoryview | str) -> Any:
    """Decode one value of ``topic`` into its record; raises ``BadMessage`` if it cannot.

    The returned object is an instance of ``WIRE_RECORDS[topic]`` whose ``v`` is a known
    version. Unknown fields are ignored (a newer writer may add optional fields without a version
    bump); missing required fields, wrong types and unknown versions are rejected.
    """
    short = topic_record(topic)
    try:
        record = _decoders[short].decode(data)
    except msgspec.DecodeError as exc:
        raise BadMessage(f"bad {short} message: {_why(data, exc)}") from None
    if record.v not in KNOWN_VERSIONS:
        raise BadMessage(f"bad {short} message: unknown schema version v={record.v!r}")
    return record


def _why(data: bytes | bytearray | memoryview | str, exc: msgspec.DecodeError) -> str:
    """Prefer 'unknown version' over a shape error when the version is the real cause."""
    try:
        version = _envelope.decode(data).v
    except msgspec.DecodeError:
        return str(exc)
    if version is not None and version not in KNOWN_VERSIONS:
        return f"unknown schema version v={version!r}"
    return str(exc)
