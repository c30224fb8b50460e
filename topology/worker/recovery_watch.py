"""A table recovery that stopped reading: its changelog partition sought again, else the
worker stops.

After an assignment Faust replays each active changelog partition from the offset of the
worker's table copy up to the highwater it read when the recovery began, and serves none of
the assignment until every one is complete (``faust.tables.recovery.Recovery``). Seen once in
the kill -9 loops (faust-streaming 0.15, aiokafka 0.14; the logs are described in
docs/architecture.md, "A recovery that stops reading"): a new owner's fetches of one changelog
partition brought no record for the 3.7 minutes the test had left, Faust logged "No event
received for active tp ... since recovery start" every 5 s and nothing else, and the
assignment's origins were never crawled again. Faust only logs it.

``RecoveryWatch`` looks every ``CHECK_S`` seconds: an active changelog partition with records
left whose read offset has not moved for ``STALL_S`` seconds, while the broker answers the
health probe, is sought again to that offset and resumed (what the recovery does when it
begins: the seek also drops whatever aiokafka holds fetched for it). After ``RESEEKS`` seeks of
one partition that brought nothing, the worker crashes: its partitions go to the group's other
members and its supervisor restarts it, rather than it holding them unserved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from faust.types import TP
from mode import Service

from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.topology.worker.internals import recovery_left, seek_changelog

log = logging.getLogger(__name__)

CHECK_S = 5.0  # how often a running recovery is looked at
STALL_S = 20.0  # a partition with records left that read none for this long is stuck
RESEEKS = 2  # seeks of one stuck partition before the worker gives up


class RecoveryStalled(RuntimeError):
    """A changelog partition brought no record after every seek: the worker stops."""


@dataclass
class Stalls:
    """Which changelog partitions of the running recovery stopped reading (no I/O)."""

    stall_s: float = STALL_S
    reseeks: int = RESEEKS
    since: dict[TP, tuple[int, float]] = field(default_factory=dict)  # tp -> offset, since
    sought: dict[TP, int] = field(default_factory=dict)  # tp -> seeks that brought nothing

    def reset(self) -> None:
        """A new recovery (an assignment) or none running: forget every partition."""
        self.since.clear()
        self.sought.clear()

    def check(
        self, now: float, left: Mapping[TP, int], paused: bool = False
    ) -> tuple[dict[TP, int], list[TP]]:
        """``left``: each partition with records left -> the offset read so far (-1: none).
        Returns the partitions to seek again (-> the offset to seek to) and those that stayed
        stuck after ``reseeks`` seeks. ``paused`` (the broker does not answer): nothing counts
        as stuck, every clock starts again."""
        for tp in self.since.keys() - left.keys():  # complete
            del self.since[tp]
            self.sought.pop(tp, None)
        seek: dict[TP, int] = {}
        stuck: list[TP] = []
        for tp, offset in left.items():
            last = self.since.get(tp)
            moved = last is not None and last[0] != offset
            if moved:
                self.sought.pop(tp, None)  # it reads again
            if paused or last is None or moved:
                self.since[tp] = (offset, now)
            elif now - last[1] >= self.stall_s:
                if self.sought.get(tp, 0) >= self.reseeks:
                    stuck.append(tp)
                else:
                    self.sought[tp] = self.sought.get(tp, 0) + 1
                    self.since[tp] = (offset, now)
                    # Faust's own first seek: to the last offset applied (read again and
                    # skipped), or the start
                    seek[tp] = max(offset, 0)
        return seek, stuck


class RecoveryWatch(Service):
    """Runs ``Stalls`` over the app's recovery; ``broker_down()``: the health probe's view."""

    def __init__(
        self, app: Any, metrics: Metrics, broker_down: Callable[[], bool], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.app = app
        self.metrics = metrics
        self.broker_down = broker_down
        self.stalls = Stalls()

    async def on_start(self) -> None:
        self.add_future(self._run())

    async def _run(self) -> None:
        while not self.should_stop:
            await asyncio.sleep(CHECK_S)
            try:
                await self.check()
            except Exception:  # a seek refused mid-rebalance: the next look tries again
                log.exception("cannot look at or seek the table recovery")

    def assigned(self) -> None:
        """An assignment: its recovery starts from scratch."""
        self.stalls.reset()

    async def check(self) -> None:
        """Look once: seek the stuck partitions again, or crash the worker."""
        left = recovery_left(self.app)
        if left is None:
            self.stalls.reset()
            return
        seek, stuck = self.stalls.check(time.monotonic(), left, self.broker_down())
        for tp, offset in seek.items():
            log.warning(
                "table recovery: changelog %s[%d] read nothing for %.0f s with records left "
                "(read up to offset %d): seeking it again to %d (seek %d of %d)",
                tp.topic, tp.partition, self.stalls.stall_s, left[tp], offset,
                self.stalls.sought[tp], self.stalls.reseeks,
                extra={"partition": tp.partition},
            )  # fmt: skip
            self.metrics.recovery_reseeks.inc()
            await seek_changelog(self.app, tp, offset)
        if stuck:
            names = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in stuck)
            exc = RecoveryStalled(
                f"table recovery read nothing from {names} after {self.stalls.reseeks} seeks: "
                "stopping the worker so that its partitions go to another member (a restart "
                "recovers them again)"
            )
            log.error("%s", exc)
            await self.app.crash(exc)
