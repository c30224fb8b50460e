"""Run dispatches as tasks under a concurrency bound; hand them back as they end.

Both wirings' dispatch loops (``topology.embedded.runner`` and
``agents.stream.fetch_service``) keep their requests here and sleep in ``Dispatcher.wait``.
Each task wakes the loop from its own done callback, registered once when it starts: waiting
on every task in flight (``asyncio.wait``) would add and remove a callback per task at every
turn of the loop, O(requests in flight) per page.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streamcrawl.agents.frontier.scheduler import Dispatch

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Ended(Generic[R]):
    """A dispatch whose task is done, no longer counted in flight."""

    dispatch: Dispatch
    task: asyncio.Task[R]
    abandoned: bool = False  # cancelled by ``Dispatcher.finish`` when its grace ran out

    def report(self) -> R | None:
        """The task's result; ``None`` if it was cancelled or raised."""
        if self.task.cancelled() or self.task.exception() is not None:
            return None
        return self.task.result()


class Dispatcher(Generic[R]):
    """The requests in flight of one dispatch loop, at most ``concurrency`` holding a slot.

    A task ends once: ``wait`` or ``finish`` hands it back, whichever comes first (a revoke may
    finish tasks while the loop waits), and never again.
    """

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._inflight: dict[asyncio.Task[R], Dispatch] = {}
        self._released: set[asyncio.Task[Any]] = set()  # in flight, holding no slot
        self._ended: list[asyncio.Task[R]] = []  # done, in completion order, not handed back
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        """Dispatches in flight, released ones included."""
        return len(self._inflight)

    @property
    def fetching(self) -> int:
        """Dispatches in flight that hold a slot (not released)."""
        return len(self._inflight) - len(self._released)

    def room(self) -> int:
        """How many more dispatches the concurrency bound lets start now (may be negative)."""
        return self.concurrency - self.fetching

    def in_flight(self, where: Callable[[Dispatch], bool] | None = None) -> list[asyncio.Task[R]]:
        """The tasks in flight, of the dispatches ``where`` accepts (all without it)."""
        return [t for t, d in self._inflight.items() if where is None or where(d)]

    def start(self, d: Dispatch, work: Coroutine[Any, Any, R]) -> asyncio.Task[R]:
        """Run ``work`` (the dispatch ``d``) as a task in flight."""
        task = asyncio.create_task(work)
        task.add_done_callback(self._task_ended)
        self._inflight[task] = d
        return task

    def release(self, task: asyncio.Task[Any]) -> None:
        """``task`` goes on but holds no slot any more (its request is over: it publishes)."""
        if task in self._inflight:
            self._released.add(task)

    def wake(self) -> None:
        """End the current ``wait`` early: the loop has something new to look at."""
        self._wake.set()

    def _task_ended(self, task: asyncio.Task[R]) -> None:
        self._ended.append(task)
        # One callback later: the tasks that end in this same turn of the event loop are then in
        # ``_ended`` too when the loop resumes, and come back in one wait, not one wait each.
        task.get_loop().call_soon(self._wake.set)

    async def wait(self, timeout: float | None) -> list[Ended[R]]:
        """Sleep until a task ends, ``wake`` is called or ``timeout`` s pass (``None``: no
        limit); the tasks that ended, in completion order. Wake-ups before the call are
        dropped: the loop looks at its state before each wait. If tasks have already ended it
        only yields once, so that the other tasks still run."""
        self._wake.clear()
        if self._ended:
            await asyncio.sleep(0)
        else:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
        done, self._ended = self._ended, []
        return [self._take(task) for task in done if task in self._inflight]

    async def finish(self, tasks: Iterable[asyncio.Task[R]], grace: float) -> list[Ended[R]]:
        """Wait up to ``grace`` s for ``tasks``, then cancel the rest (``abandoned``); those of
        them still in flight then, the done ones first in completion order. The cancelled ones
        leave the count at once: ``wait`` cannot hand them back too."""
        wanted = set(tasks)
        if not wanted:
            return []
        _, pending = await asyncio.wait(wanted, timeout=grace)
        # Each task's own done callback ran before asyncio.wait's: ``_ended`` has the done ones.
        ended = [self._take(t) for t in self._ended if t in wanted and t in self._inflight]
        ended += [self._take(t, abandoned=True) for t in pending if t in self._inflight]
        for task in pending:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*pending, return_exceptions=True)
        return ended

    def _take(self, task: asyncio.Task[R], abandoned: bool = False) -> Ended[R]:
        d = self._inflight.pop(task)
        self._released.discard(task)
        return Ended(d, task, abandoned)
