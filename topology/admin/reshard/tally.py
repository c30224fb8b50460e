"""The partitions' counts at the new partition count: pure.

A partition's ``PartitionCounts`` (``agents/stream/counts.py``) sums what its events ended; the
events do not say which origin each count came from, so the counts cannot follow the origins.
They are merged instead, old partition ``p`` into new partition ``p % new_count``, so every sum
``status`` shows stays what it was. Only ``admitted`` (the URLs a partition queued, its share of
the page budget, and what ``status`` subtracts the ended from to show the queue) is recomputed
per new partition, from the URLs each one now holds queued: ``admitted = queued + ended -
refused``, so a partition's queue reads right; the crawl's total admitted is kept exactly
(the difference, if the old counts had drifted, goes to the lowest partition that has the crawl).

``offsets`` (the last event counted per input topic, replay detection) restart: the new topics'
offsets start at 0. An event copied to the new topics that its old partition had counted
already keeps that (``counted``: the new partition's offsets up to which the copied events were
counted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from streamcrawl.agents.stream.counts import SLOWEST, CrawlCounts, PartitionCounts, note_error

Queued = Mapping[int, Counter[str]]  # new partition -> crawl id -> URLs queued


def merge(
    old: Mapping[int, PartitionCounts],
    new_count: int,
    queued: Queued,
    counted: Mapping[int, dict[str, int]] | None = None,
) -> dict[int, PartitionCounts]:
    """The counts of every new partition that has any (module docstring)."""
    counted = counted or {}
    merged: dict[int, PartitionCounts] = {}
    for p in sorted(old):
        q = p % new_count
        target = merged.setdefault(q, PartitionCounts(partition=q))
        for crawl_id, counts in old[p].crawls.items():
            target.crawls[crawl_id] = add(target.crawls.get(crawl_id), counts)
        target.updated_at = max(target.updated_at, old[p].updated_at)
    totals = _admitted(old.values())
    for q, by_crawl in queued.items():
        for crawl_id in by_crawl:
            if crawl_id in totals:
                merged.setdefault(q, PartitionCounts(partition=q)).crawls.setdefault(
                    crawl_id, CrawlCounts()
                )
    for crawl_id, total in totals.items():
        _share(merged, crawl_id, total, queued)
    for q, offsets in counted.items():
        merged.setdefault(q, PartitionCounts(partition=q)).offsets = dict(offsets)
    return merged


def add(into: CrawlCounts | None, more: CrawlCounts) -> CrawlCounts:
    """``into`` + ``more``: counts summed, time spans joined, the slowest origins of both,
    the errors of both (within ``MAX_CRAWL_ERRORS``)."""
    if into is None:
        into = CrawlCounts()
    states = Counter(into.states)
    states.update(more.states)
    due = Counter(into.due)
    due.update(more.due)
    slowest = sorted([*into.slowest, *more.slowest], key=lambda s: -s.latency)[:SLOWEST]
    errors = CrawlCounts(errors=dict(into.errors))
    for error, n in more.errors.items():
        note_error(errors, error, n)
    return CrawlCounts(
        states=dict(states),
        first_fetched_at=_min(into.first_fetched_at, more.first_fetched_at),
        last_fetched_at=_max(into.last_fetched_at, more.last_fetched_at),
        admitted=None,  # set by _share
        revisits=into.revisits + more.revisits,
        changed=into.changed + more.changed,
        first_revisit_at=_min(into.first_revisit_at, more.first_revisit_at),
        last_revisit_at=_max(into.last_revisit_at, more.last_revisit_at),
        due=dict(due),
        due_width=into.due_width or more.due_width,
        refused=into.refused + more.refused,
        slowest=slowest,
        errors=errors.errors,
    )


def _admitted(records: Iterable[PartitionCounts]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for record in records:
        for crawl_id, counts in record.crawls.items():
            if counts.admitted is not None:
                totals[crawl_id] = totals.get(crawl_id, 0) + counts.admitted
    return totals


def _share(merged: dict[int, PartitionCounts], crawl_id: str, total: int, queued: Queued) -> None:
    holders = sorted(q for q, record in merged.items() if crawl_id in record.crawls)
    for q in holders:
        counts = merged[q].crawls[crawl_id]
        ended = sum(counts.states.values()) - counts.refused
        counts.admitted = queued.get(q, Counter())[crawl_id] + ended
    drift = total - sum(merged[q].crawls[crawl_id].admitted or 0 for q in holders)
    if drift and holders:
        first = merged[holders[0]].crawls[crawl_id]
        first.admitted = (first.admitted or 0) + drift


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)
