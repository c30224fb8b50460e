"""Finds origins with queued work in the store for a scheduler whose memory is bounded.

``Scheduler`` keeps at most ``max_origins`` origins in memory; the others with work stay in the
``origins`` table (RocksDB). ``Refill`` walks that table round and round, a bounded number of
rows per call, and puts origins of the partitions the worker dispatches back in memory while
there is room. A pass over the whole table that met no origin left out (and during which the
scheduler sent none back) ends the overflow: everything with work is in memory again.

It also counts the queued URLs of the origins it leaves in the store, per partition, as of its
last complete pass (``left_out``; the origins in memory are counted exactly by the wiring). So
that this count exists even while memory stays full, the first pass after an assignment goes
on to the end of the table (a census: it only counts once there is no room), a bounded number
of rows per call of the dispatch loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from streamcrawl.agents.frontier.records import decode_origin
from streamcrawl.agents.frontier.scheduler import Scheduler
from streamcrawl.agents.frontier.store import ORIGINS
from streamcrawl.agents.stream.tables import partition_for

Rows = Callable[[], Iterator[tuple[bytes, bytes]]]  # a fresh walk over the origins table
Since = Callable[[int], float | None]  # partition -> when it became ours (None: not ours)


class Refill:
    """A cursor over the ``origins`` table that fills the scheduler's free places."""

    def __init__(self, rows: Rows, scheduler: Scheduler, partitions: int) -> None:
        self._rows = rows
        self.scheduler = scheduler
        self.partitions = partitions
        self._it: Iterator[tuple[bytes, bytes]] | None = None
        self._missed = False  # this pass left an origin with work out
        self._spills = 0  # scheduler.spills when this pass started
        self._counting: dict[int, int] = {}
        self.left_out: dict[int, int] = {}  # partition -> queued URLs in the store only
        self.census = False  # the pass since the last assignment has not reached the end

    def wanted(self) -> bool:
        """Whether a ``run`` now would do anything."""
        return self.scheduler.overflow and (self.census or not self.scheduler.full())

    def restart(self) -> None:
        """Start a new pass (partitions were assigned: their origins are new to the walk)."""
        self._it = None
        self.scheduler.overflow = True
        self.census = True

    def run(self, since: Since, rows: int, *, until_full: bool = False) -> int:
        """Look at up to ``rows`` rows; track origins with work of partitions ``since`` says
        are ours while the scheduler has room (``until_full``: stop when it has none, even in
        a census). Returns how many it tracked."""
        added = 0
        for _ in range(rows):
            full = self.scheduler.full()
            if not self.scheduler.overflow or (full and (until_full or not self.census)):
                break
            row = self._next()
            if row is None:
                self._end_pass()
                continue
            key, raw = row
            if key[:1] != ORIGINS:
                continue  # the partition's counters ride in the same table
            origin = key[1:].decode()
            if origin in self.scheduler:
                continue
            partition = partition_for(origin, self.partitions)
            start = since(partition)
            if start is None:
                continue
            state = decode_origin(raw)
            if state.head >= state.tail and not state.lanes:
                continue  # no work: nothing queued, no revisits waiting
            if self.scheduler.track(state, assumed_start=start):
                added += 1
            else:
                self._missed = True
                self._counting[partition] = self._counting.get(partition, 0) + (
                    state.tail - state.head
                )
        return added

    def _next(self) -> tuple[bytes, bytes] | None:
        if self._it is None:
            self._it = self._rows()
            self._missed = False
            self._spills = self.scheduler.spills
            self._counting = {}
        try:
            key, value = next(self._it)
        except StopIteration:
            return None
        except RuntimeError:  # a dict table changed under the walk (tests): walk it again
            self._it = None
            self._missed = True
            return None
        return bytes(key), bytes(value)

    def _end_pass(self) -> None:
        if self._it is not None:
            self.left_out = self._counting
            self.census = False
        if not self._missed and self.scheduler.spills == self._spills:
            self.scheduler.overflow = False
        self._it = None

    def forget(self, partitions: set[int]) -> None:
        """Partitions were revoked: their origins are no longer counted, and the walk starts
        again (a walk must not outlive the table partitions it was reading)."""
        if self._it is not None:
            self._it = None
            self._missed = True
        for p in partitions:
            self.left_out.pop(p, None)
            self._counting.pop(p, None)
