"""How the Cassandra sink groups its rows into requests: unlogged batches within the cluster's
warnings.

A request costs the worker more than its rows: the driver plans, encodes, sends, reads and
decodes each one and runs its callbacks on its own thread: with one request per page row and
one per url_status row, the driver's thread was a large share of a saturated worker's profile
(docs/performance.md, "The sink's requests"). So rows share requests: ``pack`` puts them, in
order, into groups of at most ``Bounds.partitions`` partitions and ``Bounds.nbytes``
(estimated): page rows first, then the small state rows in the room they left, then groups of
state rows alone. A row over ``Bounds.nbytes`` (a page with its body, or with many links) is a
request of its own.

The bounds are the cluster's own warnings, read by the sink when it starts
(``driver.batch_bounds``, ``node_bounds``): ``unlogged_batch_across_partitions_warn_threshold``
and 80 % of ``batch_size_warn_threshold`` (of the fail threshold if that is lower), so a batch
is logged by no node. Cassandra's defaults (10 partitions, 5 KiB: ``DEFAULT_BOUNDS``, also used
when the thresholds cannot be read) hold about one page row per request; a cluster whose
operator raised them for a crawl (docs/operations.md, "Cassandra's batch warnings") takes
several pages and their states per request (docs/performance.md, "The sink's requests"). A
batch is UNLOGGED: no atomicity is wanted, every row carries its own timestamp, so a batch
retried whole (or half applied before a failure) leaves the same rows.

Pure: rows are ``(statement name, values, estimated bytes, partition)``; no driver import.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

SHARE: Final = 0.8  # of the byte threshold: the estimate's margin (it is generous, not exact)
# A batch's partitions at most, whatever the cluster allows (docs/performance.md, "The sink's
# requests": more measured no cheaper).
MAX_PARTITIONS: Final = 50

Row = tuple[str, tuple[Any, ...], int, Hashable]  # name, values, estimated bytes, partition
Group = list[tuple[str, tuple[Any, ...]]]  # (name, values) of one request


@dataclass(frozen=True)
class Bounds:
    """What one batch may hold: partitions, and bytes as ``sink.py`` estimates them."""

    partitions: int
    nbytes: int


DEFAULT_BOUNDS: Final = Bounds(partitions=10, nbytes=4096)  # Cassandra's default warnings


SETTINGS: Final = (  # their names in system_views.settings (4.0; 4.1 and later keep them)
    "batch_size_warn_threshold_in_kb",
    "batch_size_fail_threshold_in_kb",
    "unlogged_batch_across_partitions_warn_threshold",
)


def node_bounds(settings: Mapping[str, str]) -> tuple[Bounds, str]:
    """The batches' bounds under one node's ``SETTINGS`` (name -> value, as the node's
    ``system_views.settings`` gives them): ``SHARE`` of the lower of its warn and fail
    thresholds, its partitions' warn threshold, at most ``MAX_PARTITIONS``. A setting missing
    or unreadable, or 0 or less, counts as Cassandra's default (5 KiB, 50 KiB, 10). Also
    returns the thresholds taken, for the log."""
    warn, fail, parts = (_positive(settings.get(name)) for name in SETTINGS)
    warn, fail, parts = warn or 5.0, fail or 50.0, parts or float(DEFAULT_BOUNDS.partitions)
    kib = min(warn, fail)
    partitions = min(int(parts), MAX_PARTITIONS)
    text = f"warns over {warn:g} KiB or {parts:g} partitions, refuses over {fail:g} KiB"
    return Bounds(max(partitions, 1), max(int(kib * 1024 * SHARE), 1)), text


def _positive(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else 0.0
    except ValueError:
        return None
    return number if number > 0 else None


def lowest(bounds: Iterable[Bounds]) -> Bounds:
    """The bounds every one of ``bounds`` allows (the nodes of a cluster: any may coordinate a
    batch); ``DEFAULT_BOUNDS`` for none."""
    found = list(bounds)
    if not found:
        return DEFAULT_BOUNDS
    return Bounds(min(b.partitions for b in found), min(b.nbytes for b in found))


class _Open:
    """A group still taking rows."""

    __slots__ = ("bounds", "partitions", "rows", "size")

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.rows: Group = []
        self.size = 0
        self.partitions: set[Hashable] = set()

    def fits(self, nbytes: int, partition: Hashable) -> bool:
        if not self.rows:
            return True
        if self.size + nbytes > self.bounds.nbytes:
            return False
        return partition in self.partitions or len(self.partitions) < self.bounds.partitions

    def add(self, name: str, values: tuple[Any, ...], nbytes: int, partition: Hashable) -> None:
        self.rows.append((name, values))
        self.size += nbytes
        self.partitions.add(partition)


def pack(big: Sequence[Row], small: Iterable[Row], bounds: Bounds = DEFAULT_BOUNDS) -> list[Group]:
    """The requests of a write: the rows of ``big`` (pages) in groups of their own kind, then
    the rows of ``small`` (states, crawl origins; one partition's rows together) in the room
    left, from the first group on, then in groups of their own; each group within ``bounds``.
    Next fit, in order: a group that could not take a row takes no later one. Every row is in
    exactly one group."""
    groups: list[_Open] = []
    for name, values, nbytes, partition in big:
        if not groups or not groups[-1].fits(nbytes, partition):
            groups.append(_Open(bounds))
        groups[-1].add(name, values, nbytes, partition)
    at = 0
    for name, values, nbytes, partition in small:
        while at < len(groups) and not groups[at].fits(nbytes, partition):
            at += 1
        if at == len(groups):
            groups.append(_Open(bounds))
        groups[at].add(name, values, nbytes, partition)
    return [group.rows for group in groups]
