"""Wire encoding of the Kafka values: JSON UTF-8, one ``schemas/records.py`` Struct per topic.

``encode`` is what every producer uses; ``decode`` is what every consumer uses, and it rejects
anything that is not a known record of a known schema version, or that breaks a bound of its
record (``schemas/records.py``: seeds per spec, string lengths, limits), so a reader never acts
on a message it does not understand or should not take (it logs and skips it, or stops, as its
caller decides). ``check`` applies the same bounds to a record built in this process (the CLI).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from streamcrawl.schemas.records import ALSO_ON, SCHEMA_VERSION, WIRE_RECORDS

# Version 1 to 7 records (from producers not yet upgraded) decode into the same Structs (the
# fields added since take their defaults) and are held to the current bounds.
KNOWN_VERSIONS = frozenset({1, 2, 3, 4, 5, 6, 7, SCHEMA_VERSION})

_encoder = msgspec.json.Encoder()
_decoders: dict[str, msgspec.json.Decoder[Any]] = {
    topic: msgspec.json.Decoder(record) for topic, record in WIRE_RECORDS.items()
}
# A topic's other records (``records.ALSO_ON``), tried in order when its first does not fit,
# each with the version that introduced it there.
_also: dict[str, tuple[tuple[msgspec.json.Decoder[Any], int], ...]] = {
    topic: tuple((msgspec.json.Decoder(record), since) for record, since in others)
    for topic, others in ALSO_ON.items()
}


class _Envelope(msgspec.Struct):
    """Only the version and crawl id, read when a full decode fails, to say *why* it failed."""

    v: Any = None
    crawl_id: Any = None


_envelope = msgspec.json.Decoder(_Envelope)


class BadMessage(ValueError):
    """A Kafka value that is not valid JSON, not the topic's record shape or bounds, or of
    unknown version.

    ``crawl_id`` (shortened) and ``field`` (e.g. ``seeds`` or ``urls[3].url``) say where, when
    known; the message names both.
    """

    def __init__(
        self, message: str, *, crawl_id: str | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.crawl_id = crawl_id
        self.field = field


R = TypeVar("R", bound=msgspec.Struct)
_AT = re.compile(r" - at `\$\.?(.*)`$")


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

    The returned object is an instance of ``WIRE_RECORDS[topic]`` (or, when that does not fit,
    of one of the topic's other records, ``records.ALSO_ON``, of a version that has it) whose
    ``v`` is a known version. Unknown fields are ignored (a newer writer may add optional fields
    without a version bump); missing required fields, wrong types and unknown versions are rejected.
    """
    short = topic_record(topic)
    try:
        record = _decoders[short].decode(data)
    except msgspec.DecodeError as exc:
        record = _other(short, data)
        if record is None:  # the error said is the first record's: the topic's own
            raise _bad(short, data, exc) from None
    if record.v not in KNOWN_VERSIONS:
        raise BadMessage(
            f"bad {short} message: unknown schema version v={record.v!r}",
            crawl_id=_shorten(getattr(record, "crawl_id", None)),
        )
    return record


def _other(short: str, data: bytes | bytearray | memoryview | str) -> Any:
    """The value as one of the topic's other records, of a version that has it; else None."""
    for decoder, since in _also.get(short, ()):
        try:
            record = decoder.decode(data)
        except msgspec.DecodeError:
            continue
        if isinstance(record.v, int) and record.v >= since:
            return record
    return None


def check(record: R) -> R:
    """``record`` if it keeps every bound of its type (as ``decode`` would check on the wire);
    raises ``BadMessage`` naming the field otherwise. Struct constructors check no bounds."""
    try:
        return msgspec.convert(msgspec.to_builtins(record), type(record))
    except msgspec.ValidationError as exc:
        crawl_id = _shorten(getattr(record, "crawl_id", None))
        field, why = _split(str(exc))
        message = _message(f"invalid {type(record).__name__}", crawl_id, field, why)
        raise BadMessage(message, crawl_id=crawl_id, field=field) from None


def _bad(short: str, data: bytes | bytearray | memoryview | str, exc: Exception) -> BadMessage:
    """The error for an undecodable value: 'unknown version' wins over a shape error when the
    version is the real cause; the crawl id and field are named when they can be read."""
    try:
        envelope = _envelope.decode(data)
    except msgspec.DecodeError:
        return BadMessage(f"bad {short} message: {exc}")
    crawl_id = _shorten(envelope.crawl_id)
    if envelope.v is not None and envelope.v not in KNOWN_VERSIONS:
        why = f"unknown schema version v={envelope.v!r}"
        return BadMessage(f"bad {short} message: {why}", crawl_id=crawl_id)
    field, why = _split(str(exc))
    message = _message(f"bad {short} message", crawl_id, field, why)
    return BadMessage(message, crawl_id=crawl_id, field=field)


def _message(what: str, crawl_id: str | None, field: str | None, why: str) -> str:
    where = ", ".join(
        part
        for part in (
            f"crawl {crawl_id!r}" if crawl_id is not None else "",
            f"field {field}" if field else "",
        )
        if part
    )
    return what + (f" ({where})" if where else "") + f": {why}"


def _split(error: str) -> tuple[str | None, str]:
    """msgspec's 'Expected `int` >= 1 - at `$.max_pages`' -> ('max_pages', 'Expected ...')."""
    match = _AT.search(error)
    if match is None:
        return None, error
    return match.group(1) or None, error[: match.start()]


def _shorten(value: object, limit: int = 100) -> str | None:
    """A crawl id fit for a log line: a hostile one may be megabytes long, or not a string."""
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
