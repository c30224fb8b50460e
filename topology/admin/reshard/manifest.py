"""The manifest of a reshard: what each new partition must hold, per origin: pure.

Per new partition: the entries of each table, and per origin its entries and a checksum of
them; seen marks with no known origin and the counters are one group each (``UNKNOWN``,
``COUNTS``). A checksum is the sum modulo 2**128 of each entry's blake2b-128 over its table,
key and value: independent of the order the entries are read in (a changelog is read in offset
order, the plan in key order), and it changes when an entry is missing, added or altered.

``admin reshard`` writes the manifest before it switches, reads back the new changelogs (what
the workers restore their tables from) and compares; it switches only when every partition
matches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from streamcrawl.agents.frontier.store import SEEN
from streamcrawl.topology.admin.reshard import layout

UNKNOWN = ""  # the group of seen marks whose origin is not known
COUNTS = "#counts"  # the group of the partition's counters
MODULUS = 1 << 128


class Group(msgspec.Struct, array_like=True):
    """An origin's (or a group's) entries in one partition and their checksum (hex)."""

    entries: int = 0
    checksum: str = "0"


class PartitionManifest(msgspec.Struct, kw_only=True):
    """What one partition of a generation must hold."""

    generation: int
    partition: int
    tables: dict[str, int] = {}
    groups: dict[str, Group] = {}


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(PartitionManifest).decode


def digest(table: str, key: bytes, value: bytes) -> int:
    """One entry's contribution to its group's checksum."""
    h = hashlib.blake2b(digest_size=16)
    h.update(table.encode() + b"\x00" + len(key).to_bytes(4, "big") + key)
    h.update(value)
    return int.from_bytes(h.digest(), "big")


@dataclass
class Builder:
    """Adds entries up to a ``PartitionManifest``."""

    generation: int
    partition: int
    tables: dict[str, int] = field(default_factory=dict)
    sums: dict[str, list[int]] = field(default_factory=dict)  # group -> [entries, sum]

    def add(self, table: str, key: bytes, value: bytes, group: str) -> None:
        self.tables[table] = self.tables.get(table, 0) + 1
        acc = self.sums.setdefault(group, [0, 0])
        acc[0] += 1
        acc[1] = (acc[1] + digest(table, key, value)) % MODULUS

    def build(self) -> PartitionManifest:
        groups = {g: Group(n, format(s, "x")) for g, (n, s) in sorted(self.sums.items())}
        return PartitionManifest(
            generation=self.generation,
            partition=self.partition,
            tables=dict(sorted(self.tables.items())),
            groups=groups,
        )


def encode(manifest: PartitionManifest) -> bytes:
    return _encode(manifest)


def decode(raw: bytes) -> PartitionManifest:
    return _decode(raw)


def differences(expected: PartitionManifest, found: PartitionManifest, limit: int = 3) -> list[str]:
    """What ``found`` lacks or has more of than ``expected``, up to ``limit`` lines; [] when
    they agree."""
    lines: list[str] = []
    for table in sorted(set(expected.tables) | set(found.tables)):
        want, got = expected.tables.get(table, 0), found.tables.get(table, 0)
        if want != got:
            lines.append(f"table {table}: {got} entries, expected {want}")
    for group in sorted(set(expected.groups) | set(found.groups)):
        want_group, got_group = expected.groups.get(group), found.groups.get(group)
        if want_group != got_group:
            name = {UNKNOWN: "seen marks of ended URLs", COUNTS: "counts"}.get(group, group)
            lines.append(f"{name}: {got_group or Group()}, expected {want_group or Group()}")
    return lines[:limit]


def manifest_key(generation: int, partition: int) -> bytes:
    """Its key on ``<prefix>.generation``."""
    return f"manifest/{generation}/{partition}".encode()


def of_tables(
    generation: int, partition: int, tables: Mapping[str, Mapping[bytes, bytes]]
) -> PartitionManifest:
    """The manifest of one partition's tables (table -> key -> value): origin-keyed entries in
    their origin's group, seen marks in the group of the origin whose queue or lanes hold their
    URL (else ``UNKNOWN``), counters in ``COUNTS``. Both sides of the check use it: the state
    planned and the state read back."""
    owners = layout.seen_origins({t: dict(rows) for t, rows in tables.items()})
    builder = Builder(generation, partition)
    for table, rows in tables.items():
        for key, value in rows.items():
            if key[:1] == SEEN:
                group = owners.get(key, UNKNOWN)
            else:
                group = layout.key_origin(key) or COUNTS
            builder.add(table, key, value, group)
    return builder.build()


def of_entries(
    generation: int, partition: int, rows: Iterable[tuple[str, bytes, bytes, str]]
) -> PartitionManifest:
    """The manifest of (table, key, value, group) rows."""
    builder = Builder(generation, partition)
    for table, key, value, group in rows:
        builder.add(table, key, value, group)
    return builder.build()
