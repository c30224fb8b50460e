"""Which partitions a worker dispatches, and the catch-up gate each passes first.

The group's rebalances reach the fetch service (``agents.stream.fetch_service``) as three
calls, in this order for one generation: ``revoke`` (every owned partition leaves: the
rebalance is under way), ``assigned`` (the generation's assignment is known; every previous
owner has finished its revoke), ``recovered`` (the tables of that assignment are complete).
Only then is a newly owned partition gated: a catch-up marker goes to its ``outcomes``
partition, and its origins are dispatched once the marker comes back (``caught_up``), i.e. once
every outcome published before it (its previous owner's last ones included) has been applied
here (the frontier agent ignores a marker read before an earlier offset of its partition was
applied: ``agents.stream.frontier_agent``).

A recovery can complete for a generation that is already over: faust-streaming 0.15 sends
``on_rebalance_complete`` before it checks the generation (``Recovery.on_recovery_completed``),
so a recovery that ends while the next rebalance is revoking reports the old assignment. A
marker sent then may precede outcomes the old owner is still publishing, and a partition it
named may already belong to another worker; so ``recovered`` ignores any assignment but the
current one. A partition owned here that the current assignment no longer names is dropped
like a revoked one (its origins must not stay in the scheduler, dispatched by two workers).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from streamcrawl.agents.stream.frontier_agent import MARKER

log = logging.getLogger(__name__)

MARKER_PATIENCE = 10.0  # seconds before a catch-up marker that has not come back is resent
MARKER_ATTEMPTS = 30


@dataclass
class Plan:
    """What a recovery changes: partitions to gate (with their marker tokens), to drop."""

    gate: dict[int, bytes]
    drop: set[int]


@dataclass
class Ownership:
    """Owned partitions, their catch-up gates and when each was indexed."""

    owned: set[int] = field(default_factory=set)
    # The current generation's assignment; None while a rebalance is under way (revoked, the
    # next assignment not known yet).
    assignment: set[int] | None = None
    gated: dict[int, bytes] = field(default_factory=dict)  # owned, waiting for this marker
    since: dict[int, float] = field(default_factory=dict)  # owned -> when its origins indexed

    def since_of(self, partition: int) -> float | None:
        """When the origins of ``partition`` were indexed here; None: not dispatched here."""
        if partition in self.owned and partition not in self.gated:
            return self.since.get(partition, 0.0)
        return None

    def revoke(self, partitions: set[int]) -> set[int]:
        """A rebalance began and ``partitions`` leave: the owned ones among them."""
        self.assignment = None
        gone = partitions & self.owned
        self._drop(gone)
        return gone

    def assigned(self, partitions: set[int]) -> None:
        """The group's new assignment (tables not recovered yet)."""
        self.assignment = set(partitions)

    def recovered(self, partitions: set[int]) -> Plan | None:
        """The tables of ``partitions`` are complete: gate the newly owned ones and drop the
        owned ones it does not name. None (nothing changes) if ``partitions`` is not the
        current assignment: a recovery of an earlier generation."""
        if self.assignment is None or partitions != self.assignment:
            return None
        plan = Plan(
            {p: uuid.uuid4().hex.encode() for p in partitions - self.owned},
            self.owned - partitions,
        )
        self._drop(plan.drop)
        self.owned = set(partitions)
        self.gated.update(plan.gate)
        return plan

    def waiting(self, partition: int, token: bytes) -> bool:
        """Whether ``partition`` still waits for the marker ``token``."""
        return self.gated.get(partition) == token

    def caught_up(self, partition: int, token: bytes, now: float) -> bool:
        """Marker ``token`` came back: True if it opens ``partition`` (indexed from ``now``)."""
        if not self.waiting(partition, token):
            return False  # another worker's marker, or one of an earlier assignment
        del self.gated[partition]
        self.since[partition] = now
        return True

    def _drop(self, partitions: set[int]) -> None:
        self.owned -= partitions
        for p in partitions:
            self.gated.pop(p, None)
            self.since.pop(p, None)


async def send_marker(
    own: Ownership,
    partition: int,
    token: bytes,
    mark: Callable[[int, bytes], Awaitable[None]],
    unstick: Callable[[int], None],
) -> None:
    """Send the marker ``token`` to ``partition`` with ``mark``; if it has not come back after
    ``MARKER_PATIENCE`` seconds, ask the consumer to fetch the partition again from the first
    offset the frontier agent has not applied (``unstick``) and send it again, until it is
    back or the partition was revoked.

    Seen after a ``kill -9`` failover: Faust 0.15 sometimes never delivers one newly
    assigned partition to the frontier agent, and nothing of that partition is applied; and
    after a SIGTERM handover, records of a partition dropped by Faust's recovery seek
    (``topology/worker/app.py``, ``_unsticker``).
    """
    for attempt in range(MARKER_ATTEMPTS):
        if not own.waiting(partition, token):
            return  # caught up, or revoked meanwhile
        try:
            await mark(partition, MARKER + token)
        except Exception:  # retried below; a later rebalance also sends a new marker
            log.exception(
                "cannot send the catch-up marker to partition %s",
                partition,
                extra={"partition": partition},
            )
        await asyncio.sleep(MARKER_PATIENCE)
        if own.waiting(partition, token):
            log.warning(
                "catch-up marker of partition %s not back after %.0f s (attempt %d): "
                "resuming the partition's fetch and sending it again",
                partition,
                MARKER_PATIENCE,
                attempt + 1,
                extra={"partition": partition},
            )
            unstick(partition)
