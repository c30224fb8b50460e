"""The fetch service's view of a rebalance (``topology.worker.rebalance``): under way from Faust's
start of it until its assignment arrived and it ended, even when a recovery of the previous
generation ends it early."""

from __future__ import annotations

from dataclasses import dataclass

from streamcrawl.topology.worker.rebalance import RebalanceGate


@dataclass
class App:
    """What faust.App's ``on_rebalance_start``/``on_rebalance_end`` change."""

    rebalancing: bool = False
    rebalancing_count: int = 0

    def on_rebalance_start(self) -> None:
        self.rebalancing = True
        self.rebalancing_count += 1

    def on_rebalance_end(self) -> None:
        self.rebalancing = False


def test_a_rebalance_is_under_way_from_its_start_to_its_end() -> None:
    app = App()
    gate = RebalanceGate(app)
    app.on_rebalance_start()  # the first join
    assert gate()
    gate.assigned()
    assert gate()  # tables recovering
    app.on_rebalance_end()
    assert not gate()


def test_a_recovery_of_the_previous_generation_does_not_end_the_next_rebalance() -> None:
    app = App()
    gate = RebalanceGate(app)
    app.on_rebalance_start()
    gate.assigned()
    app.on_rebalance_start()  # the next rebalance begins while that recovery still runs
    app.on_rebalance_end()  # the earlier recovery completes and ends "the" rebalance
    assert gate()  # still under way: its assignment has not arrived
    gate.assigned()
    # The flag stays clear from here (the early end cleared it): the fetch service's revoke
    # has run by now, and each partition waits for its catch-up marker (agents.stream.ownership)
    assert not gate()
