"""The Faust and aiokafka internals the worker reaches were checked against one release series
each (``topology.worker.internals``): another series fails here, so an upgrade re-reads them."""

from __future__ import annotations

import asyncio
from importlib.metadata import version

from faust.types import TP

from streamcrawl.topology.worker.internals import CHECKED_AGAINST, seek_uncommitted_to_start


def test_the_installed_faust_and_aiokafka_are_the_series_checked() -> None:
    installed = {name: ".".join(version(name).split(".")[:2]) for name in CHECKED_AGAINST}
    assert installed == CHECKED_AGAINST


class _Consumer:
    """Faust's consumer as ``seek_uncommitted_to_start`` reaches it: a ``perform_seek`` that
    records committed offsets as Faust's does (0 and none read as None), the assignment, log
    starts and the seeks made."""

    def __init__(self, committed: dict[TP, int | None], starts: dict[TP, int]) -> None:
        self._committed = committed
        self._committed_offset: dict[TP, int | None] = {}
        self.starts = starts
        self.seeks: list[dict[TP, int]] = []

    async def perform_seek(self) -> None:
        self._committed_offset.update(
            {tp: offset or None for tp, offset in self._committed.items() if offset is not None}
        )

    def assignment(self) -> set[TP]:
        return set(self._committed)

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return {tp: self.starts[tp] for tp in tps}

    async def seek_wait(self, offsets: dict[TP, int]) -> None:
        self.seeks.append(offsets)


def test_after_a_recovery_partitions_without_a_commit_are_read_from_their_log_start() -> None:
    """The seek that ends a recovery leaves a partition without a commit where it was read up
    to (an event the stream skipped meanwhile would never be read again): the wrapper seeks the
    inputs' such partitions to their log start, and nothing else."""
    frontier, outcomes, other = TP("p.frontier", 0), TP("p.outcomes", 1), TP("p.changelog", 0)
    committed = {frontier: 12, outcomes: None, TP("p.outcomes", 2): 0, other: None}
    consumer = _Consumer(committed, {outcomes: 0, TP("p.outcomes", 2): 5})
    seek_uncommitted_to_start(consumer, {"p.frontier", "p.outcomes"})
    seek_uncommitted_to_start(consumer, {"p.frontier", "p.outcomes"})  # installed once
    asyncio.run(consumer.perform_seek())
    assert consumer.seeks == [{outcomes: 0, TP("p.outcomes", 2): 5}]
