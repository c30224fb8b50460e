"""Whether the worker group is rebalancing, as the fetch service needs to know it.

A rebalance begins in aiokafka's revoke callback, where faust-streaming sets
``app.rebalancing`` and counts it (``App.on_rebalance_start``); it ends when the recovery of
the new assignment has resumed the streams (``App.on_rebalance_end``). The flag alone can clear
too early: ``Recovery.on_recovery_completed`` (faust-streaming 0.15) checks that its generation
is still the current one before it resumes the streams and ends the rebalance, but the
generation changes only when the next assignment arrives, so a recovery that ends while the next
rebalance is revoking clears the flag of that rebalance. So a rebalance counts as under way
from its start until its assignment arrived and the flag is clear. (By its assignment, every
member has revoked: the fetch service dropped its partitions, and gates each again until its
catch-up marker is back, ``agents.stream.ownership``.)
"""

from __future__ import annotations

from typing import Any


class RebalanceGate:
    """True while a rebalance is under way (``__call__``); ``assigned`` on each assignment."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.assigned_in: int = app.rebalancing_count  # the rebalance of the last assignment

    def assigned(self) -> None:
        """The group's new assignment arrived (``on_partitions_assigned``)."""
        self.assigned_in = self.app.rebalancing_count

    def __call__(self) -> bool:
        return bool(self.app.rebalancing) or self.app.rebalancing_count != self.assigned_in
