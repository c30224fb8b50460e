"""The requests in flight of both wirings' dispatch loops (``agents.net.dispatch``): ended tasks
come back in completion order, once; the loop wakes on a task's end, a wake-up or its timeout;
a stop waits out the grace, then cancels; waiting costs nothing per task in flight."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.dispatch import Dispatcher
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import CrawlPolicy

RULES = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", seeds=("http://a.test/",)))


def dispatch(seq: int) -> Dispatch:
    return Dispatch("page", "http://a.test", seq, None, RULES)


async def after(gate: asyncio.Event, value: int) -> int:
    await gate.wait()
    return value


async def sleeping(seconds: float, value: int) -> int:
    await asyncio.sleep(seconds)
    return value


async def test_ended_tasks_come_back_in_completion_order() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(8)
    gates = [asyncio.Event() for _ in range(4)]
    for seq, gate in enumerate(gates):
        dispatcher.start(dispatch(seq), after(gate, 10 * seq))
    for seq in (2, 0, 3):
        gates[seq].set()
        await asyncio.sleep(0.01)
    ended = await dispatcher.wait(None)
    assert [e.dispatch.seq for e in ended] == [2, 0, 3]
    assert [e.report() for e in ended] == [20, 0, 30]
    assert not any(e.abandoned for e in ended)
    assert len(dispatcher) == 1 and dispatcher.room() == 7


async def test_a_task_that_ends_wakes_the_wait_without_a_timeout() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(8)
    dispatcher.start(dispatch(1), sleeping(0.05, 1))
    started = time.monotonic()
    ended = await dispatcher.wait(None)
    assert [e.report() for e in ended] == [1]
    assert time.monotonic() - started < 1.0


async def test_tasks_that_end_in_one_turn_of_the_event_loop_come_back_in_one_wait() -> None:
    """The second task ends while the first one's done callback runs: it is handed back with
    the first, not in a turn of the dispatch loop of its own."""
    dispatcher: Dispatcher[int] = Dispatcher(8)
    gate = asyncio.Event()

    async def one_step_later() -> int:
        await gate.wait()
        await asyncio.sleep(0)
        return 2

    dispatcher.start(dispatch(1), after(gate, 1))
    dispatcher.start(dispatch(2), one_step_later())
    waiting = asyncio.create_task(dispatcher.wait(None))
    await asyncio.sleep(0)
    gate.set()
    assert [e.dispatch.seq for e in await waiting] == [1, 2]


async def test_a_wake_up_ends_the_wait_and_one_before_it_is_dropped() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(8)
    dispatcher.start(dispatch(1), after(asyncio.Event(), 1))  # never ends by itself
    asyncio.get_running_loop().call_later(0.05, dispatcher.wake)
    started = time.monotonic()
    assert await dispatcher.wait(None) == []
    assert time.monotonic() - started < 1.0
    # The loop looks at its state before each wait: an earlier wake-up does not end the next.
    dispatcher.wake()
    started = time.monotonic()
    assert await dispatcher.wait(0.1) == []
    assert time.monotonic() - started >= 0.09
    assert len(dispatcher) == 1
    await dispatcher.finish(dispatcher.in_flight(), 0.0)


async def test_the_wait_ends_at_its_timeout() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(8)
    dispatcher.start(dispatch(1), after(asyncio.Event(), 1))
    started = time.monotonic()
    assert await dispatcher.wait(0.05) == []
    assert 0.04 <= time.monotonic() - started < 1.0
    await dispatcher.finish(dispatcher.in_flight(), 0.0)


async def test_a_released_task_holds_no_slot_until_it_ends() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(2)
    gate = asyncio.Event()
    first = dispatcher.start(dispatch(1), after(gate, 1))
    dispatcher.start(dispatch(2), after(asyncio.Event(), 2))
    assert dispatcher.room() == 0 and dispatcher.fetching == 2
    dispatcher.release(first)  # its request is over; it publishes
    assert dispatcher.room() == 1 and dispatcher.fetching == 1 and len(dispatcher) == 2
    gate.set()
    assert [e.dispatch.seq for e in await dispatcher.wait(None)] == [1]
    assert dispatcher.fetching == 1 and len(dispatcher) == 1
    await dispatcher.finish(dispatcher.in_flight(), 0.0)


async def test_finish_waits_out_the_grace_then_cancels_the_rest() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(8)
    slow = dispatcher.start(dispatch(1), after(asyncio.Event(), 1))
    dispatcher.start(dispatch(2), sleeping(0.02, 2))
    dispatcher.start(dispatch(3), after(asyncio.Event(), 3))  # not asked to finish
    started = time.monotonic()
    ended = await dispatcher.finish(dispatcher.in_flight(lambda d: d.seq < 3), 0.2)
    assert time.monotonic() - started >= 0.19
    assert [(e.dispatch.seq, e.abandoned, e.report()) for e in ended] == [
        (2, False, 2),
        (1, True, None),
    ]
    assert slow.cancelled()
    assert len(dispatcher) == 1  # dispatch 3 goes on
    assert await dispatcher.wait(0.0) == []  # each task is handed back once
    await dispatcher.finish(dispatcher.in_flight(), 0.0)


async def test_a_task_the_loop_took_during_the_grace_is_not_handed_back_again() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(8)
    dispatcher.start(dispatch(1), sleeping(0.02, 1))
    dispatcher.start(dispatch(2), after(asyncio.Event(), 2))
    finishing = asyncio.create_task(dispatcher.finish(dispatcher.in_flight(), 0.2))
    taken = await dispatcher.wait(None)  # the loop, while a revoke finishes the same tasks
    assert [e.dispatch.seq for e in taken] == [1]
    assert [(e.dispatch.seq, e.abandoned) for e in await finishing] == [(2, True)]
    assert len(dispatcher) == 0


async def test_a_task_that_raised_or_was_cancelled_has_no_report() -> None:
    dispatcher: Dispatcher[int] = Dispatcher(8)

    async def raising() -> int:
        raise RuntimeError("bug")

    dispatcher.start(dispatch(1), raising())
    cancelled = dispatcher.start(dispatch(2), after(asyncio.Event(), 2))
    cancelled.cancel()
    await asyncio.sleep(0.01)
    ended = await dispatcher.wait(None)
    assert sorted(e.dispatch.seq for e in ended) == [1, 2]
    assert [e.report() for e in ended] == [None, None]
    assert len(dispatcher) == 0


class CountingTask(asyncio.Task[Any]):
    """A task that counts the done callbacks put on it."""

    def __init__(self, coro: Coroutine[Any, Any, Any], **kwargs: Any) -> None:
        super().__init__(coro, **kwargs)
        self.callbacks = 0

    def add_done_callback(self, fn: Callable[..., object], **kwargs: Any) -> None:
        self.callbacks += 1
        super().add_done_callback(fn, **kwargs)


async def test_waiting_costs_nothing_per_task_in_flight() -> None:
    """One callback per task, put on when it starts: ``asyncio.wait`` over the tasks in flight
    put one on (and took it off) every task at every turn, O(requests in flight) per page."""
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()
    loop.set_task_factory(lambda loop, coro, **kw: CountingTask(coro, loop=loop, **kw))
    try:
        dispatcher: Dispatcher[int] = Dispatcher(64)
        tasks = [dispatcher.start(dispatch(i), after(asyncio.Event(), i)) for i in range(50)]
        for _ in range(20):
            await dispatcher.wait(0.0)
    finally:
        loop.set_task_factory(factory)
    assert [t.callbacks for t in tasks if isinstance(t, CountingTask)] == [1] * 50
    await dispatcher.finish(dispatcher.in_flight(), 0.0)
