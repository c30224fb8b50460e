"""How the Cassandra sink groups its rows into requests: small unlogged batches.

A request costs the worker more than its rows: the driver plans, encodes, sends, reads and
decodes each one and runs its callbacks on its own thread: with one request per page row and
one per url_status row, the driver's thread was a large share of a saturated worker's profile
(docs/performance.md, "The sink's requests"). So rows share requests: ``pack`` puts them, in
order, into groups of at most ``MAX_PARTITIONS`` partitions and ``BATCH_BYTES`` (estimated):
page rows first (a page of the bench's site, ~3 KB with its links, fills most of one), then the
small state rows in the room they left, then groups of state rows alone. A row over
``BATCH_BYTES`` (a page with its body, or with many links) is a request of its own.

The bounds are Cassandra's warnings (5.0 defaults): ``batch_size_warn_threshold`` 5 KiB and
``unlogged_batch_across_partitions_warn_threshold`` 10; a batch under both is logged by no
one. A batch is UNLOGGED: no atomicity is wanted, every row carries its own timestamp, so a
batch retried whole (or half applied before a failure) leaves the same rows.

Pure: rows are ``(statement name, values, estimated bytes, partition)``; no driver import.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Final

MAX_PARTITIONS: Final = 10
BATCH_BYTES: Final = 4096

Row = tuple[str, tuple[Any, ...], int, Hashable]  # name, values, estimated bytes, partition
Group = list[tuple[str, tuple[Any, ...]]]  # (name, values) of one request


class _Open:
    """A group still taking rows."""

    __slots__ = ("partitions", "rows", "size")

    def __init__(self) -> None:
        self.rows: Group = []
        self.size = 0
        self.partitions: set[Hashable] = set()

    def fits(self, nbytes: int, partition: Hashable) -> bool:
        if not self.rows:
            return True
        if self.size + nbytes > BATCH_BYTES:
            return False
        return partition in self.partitions or len(self.partitions) < MAX_PARTITIONS

    def add(self, name: str, values: tuple[Any, ...], nbytes: int, partition: Hashable) -> None:
        self.rows.append((name, values))
        self.size += nbytes
        self.partitions.add(partition)


def pack(big: Sequence[Row], small: Iterable[Row]) -> list[Group]:
    """The requests of a write: the rows of ``big`` (pages) in groups of their own kind, then
    the rows of ``small`` (states, crawl origins; one partition's rows together) in the room
    left, from the first group on, then in groups of their own. Next fit, in order: a group
    that could not take a row takes no later one. Every row is in exactly one group."""
    groups: list[_Open] = []
    for name, values, nbytes, partition in big:
        if not groups or not groups[-1].fits(nbytes, partition):
            groups.append(_Open())
        groups[-1].add(name, values, nbytes, partition)
    at = 0
    for name, values, nbytes, partition in small:
        while at < len(groups) and not groups[at].fits(nbytes, partition):
            at += 1
        if at == len(groups):
            groups.append(_Open())
        groups[at].add(name, values, nbytes, partition)
    return [group.rows for group in groups]
