"""Fakes of a Faust stream, its events and their messages, and ``run_for`` to drive the frontier
agent's plumbing (``topology.worker.batching.run_batches``) over them without a broker:
tests/unit/test_batching.py and tests/bench/test_faust_floor.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.topology.worker.batching import run_batches


@dataclass(eq=False)  # hashable, as Faust's (its consumer keeps a WeakSet of them)
class Message:
    topic: str
    partition: int
    offset: int
    value: bytes


class Event:
    def __init__(self, partition: int, offset: int) -> None:
        self.message = Message("x.outcomes", partition, offset, b"v")


class Stream:
    """Yields ``events`` and then blocks forever, as a quiet topic (or a suspended flow) does."""

    def __init__(self, events: list[Event]) -> None:
        self.pending = events
        self.acked: list[tuple[int, int]] = []
        self.untracked: list[tuple[int, int]] = []

    def noack(self) -> Stream:
        return self

    async def events(self) -> AsyncIterator[Event]:
        for event in self.pending:
            yield event
        await asyncio.Event().wait()

    async def ack(self, event: Event) -> bool:
        self.acked.append((event.message.partition, event.message.offset))
        return True

    def untrack(self, event: Event) -> None:
        self.untracked.append((event.message.partition, event.message.offset))


async def run_for(stream: Stream, frontier: Any, seconds: float, **kw: Any) -> None:
    """Run the batch loop for ``seconds``, or until it raises (then re-raise)."""
    kw.setdefault("untrack", stream.untrack)
    task = asyncio.ensure_future(run_batches(stream, frontier, Metrics(), **kw))
    await asyncio.wait({task}, timeout=seconds)
    if task.done():
        task.result()
    task.cancel()
