"""Which events the frontier agent read in offset order (``FrontierAgent.handle_batch``): a
catch-up marker counts, and an event is acknowledged, only if every offset of its partition
before it was applied (``agents.stream.frontier_agent``'s docstring says why)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

# The consumer's committed offset of a topic partition (the next one to read), None if unknown
# or 0: every event before it was applied (``topology.worker.acks`` refuses the acks of the others).
Committed = Callable[[str, int], int | None]

# The first offset a topic partition's log still holds (retention deletes the segments before
# it): where the consumer resumes when the committed offset is missing (the group's offsets
# expired) or below it, so no event before it can ever be applied. One broker round trip.
LogStart = Callable[[str, int], Awaitable[int]]

# How long a looked-up log start stands before an event refused again looks it up anew: the
# log start only grows, so an old one is a safe floor, just maybe too low (the consumer fell
# behind retention and jumped ahead). Bounds the round trips to one per partition this often.
LOG_START_TTL = 10.0


@dataclass(frozen=True)
class Where:
    """Position of the event being handled, for logs and routing."""

    topic: str
    partition: int
    offset: int

    def extra(self, origin: str | None = None) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "origin": origin,
        }


@dataclass
class OffsetOrder:
    """Per (topic, partition): an offset every offset below which was applied here, before the
    committed offset or before the log start; and the log start, with when it was looked up."""

    applied: dict[tuple[str, int], int] = field(default_factory=dict)
    starts: dict[tuple[str, int], tuple[int, float]] = field(default_factory=dict)

    def in_order(self, where: Where, committed: Committed) -> bool:
        """Whether every offset of ``where``'s partition before it was applied: here (events
        of one partition come in order, but a rebalance can deliver a later one before the
        consumer seeks back to an earlier one it skipped) or before the committed offset, or
        before the log start (``look_up_start``, only once an event would be refused)."""
        key = (where.topic, where.partition)
        upto = self.applied.get(key, 0)
        if where.offset > upto:
            start = self.starts.get(key)
            upto = max(upto, committed(*key) or 0, 0 if start is None else start[0])
            if where.offset > upto:
                return False
        self.applied[key] = max(upto, where.offset + 1)
        return True

    def first_unapplied(self, topic: str, partition: int, committed: Committed) -> int:
        """The offset from which ``topic``/``partition`` must be read again for its events to
        be applied in order: past those applied here and those before the committed offset
        (0: none known)."""
        key = (topic, partition)
        return max(self.applied.get(key, 0), committed(*key) or 0)

    async def look_up_start(self, where: Where, log_start: LogStart | None) -> bool:
        """Look up the log start of ``where``'s partition, unless it was less than
        ``LOG_START_TTL`` ago; whether it was. A failed look-up is logged and changes nothing
        (the event stays refused, as with a log that starts at 0)."""
        key = (where.topic, where.partition)
        start = self.starts.get(key)
        now = time.monotonic()
        if log_start is None or (start is not None and now - start[1] < LOG_START_TTL):
            return False
        self.starts[key] = (0 if start is None else start[0], now)  # one try per TTL
        try:
            offset = await asyncio.wait_for(log_start(*key), LOG_START_TTL)
        except Exception as exc:  # a broker error or timeout: refused as before, tried again
            log.warning("cannot look up the log start of %s/%s: %r", *key, exc, extra=where.extra())
            return False
        self.starts[key] = (max(offset, self.starts[key][0]), now)
        log.info("log start of %s/%s: %s", *key, offset, extra=where.extra())
        return True
