"""A partition whose catch-up marker does not come back is read again from the first offset
the frontier agent has not applied (``topology.worker.app._unsticker``,
``agents.stream.order.OffsetOrder.first_unapplied``): Faust's recovery seek can drop a
partition's records fetched again during it, and nothing after them is then applied."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from streamcrawl.agents.stream.order import OffsetOrder, Where
from streamcrawl.topology.settings import load_settings
from streamcrawl.topology.worker.app import FRONTIER_INPUTS, _unsticker

OUTCOMES = "t.outcomes"


def test_the_first_unapplied_offset_is_past_the_applied_and_the_committed_ones() -> None:
    order = OffsetOrder()
    committed: dict[tuple[str, int], int] = {}
    assert order.first_unapplied(OUTCOMES, 0, lambda t, p: committed.get((t, p))) == 0
    # The marker of an earlier ownership was applied here (offset 0), then the partition was
    # another worker's, which committed up to 15; the records 15-17 were never delivered.
    assert order.in_order(Where(OUTCOMES, 0, 0), lambda t, p: None)
    committed[(OUTCOMES, 0)] = 15
    assert not order.in_order(Where(OUTCOMES, 0, 18), lambda t, p: 15)
    assert order.first_unapplied(OUTCOMES, 0, lambda t, p: committed.get((t, p))) == 15
    # Read again from 15, everything is in order, and the next read starts after 18.
    for offset in (15, 16, 17, 18):
        assert order.in_order(Where(OUTCOMES, 0, offset), lambda t, p: 15)
    assert order.first_unapplied(OUTCOMES, 0, lambda t, p: committed.get((t, p))) == 19


class Consumer:
    def __init__(self) -> None:
        self.resumed: list[set[TP]] = []
        self.sought: list[dict[TP, int]] = []

    def resume_partitions(self, tps: set[TP]) -> None:
        self.resumed.append(tps)

    async def seek_wait(self, offsets: dict[TP, int]) -> None:
        self.sought.append(offsets)


class Agent:
    def __init__(self, first: dict[tuple[str, int], int]) -> None:
        self.first = first

    def first_unapplied(self, topic: str, partition: int) -> int:
        return self.first.get((topic, partition), 0)


async def test_unstick_resumes_the_inputs_and_reads_them_again_where_unapplied() -> None:
    settings = load_settings(topic_prefix="t", partitions=4)
    consumer = Consumer()
    app: Any = SimpleNamespace(consumer=consumer)
    agent: list[Any] = []
    unstick = _unsticker(app, settings, agent)
    inputs = {TP(f"t.{short}", 2) for short in FRONTIER_INPUTS}

    unstick(2)  # the agent is not made yet: resume only
    await asyncio.sleep(0)
    assert consumer.resumed == [inputs] and consumer.sought == []

    agent.append(Agent({("t.outcomes", 2): 15, ("t.frontier", 2): 7}))
    unstick(2)
    await asyncio.sleep(0)
    assert consumer.resumed[-1] == inputs
    # each input from its first unapplied offset; one with none known is left where it is
    assert consumer.sought == [{TP("t.outcomes", 2): 15, TP("t.frontier", 2): 7}]
