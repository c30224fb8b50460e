"""``execute_many``: a window of statements in flight, one event-loop wake-up per group."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from streamcrawl.agents.sinks.cassandra.driver import execute_many


class FakeFuture:
    """A driver ResponseFuture whose callbacks run on another thread, like the driver's."""

    _col_names = None
    _col_types = None
    has_more_pages = False

    def __init__(self, session: FakeSession, statement: Any) -> None:
        self.session, self.statement = session, statement

    def add_callbacks(
        self, callback: Any, errback: Any, callback_args: Any = (), errback_args: Any = ()
    ) -> None:
        def finish() -> None:
            with self.session.lock:
                self.session.in_flight -= 1
            if self.statement == "bad":
                errback(RuntimeError("refused"), *errback_args)
            else:
                callback([self.statement], *callback_args)

        threading.Timer(0.001, finish).start()


class FakeSession:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0

    def execute_async(self, statement: Any, paging_state: Any = None) -> FakeFuture:
        if statement == "unsendable":
            raise ConnectionError("no host")
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        return FakeFuture(self, statement)


async def test_results_in_order_within_the_window_with_one_wake_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    wakeups: list[object] = []
    original = loop.call_soon_threadsafe

    def counting(callback: Any, *args: Any, **kwargs: Any) -> Any:
        wakeups.append(callback)
        return original(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    session = FakeSession()
    calls = [(f"s{i}", None) for i in range(50)] + [("bad", None), ("unsendable", None)]
    results = await execute_many(session, calls, window=4)
    assert [rs.current_rows for ok, rs in results[:50]] == [[f"s{i}"] for i in range(50)]
    assert all(ok for ok, _ in results[:50])
    assert results[50][0] is False and isinstance(results[50][1], RuntimeError)
    assert results[51][0] is False and isinstance(results[51][1], ConnectionError)
    assert session.most <= 4
    assert len(wakeups) == 1  # not one per statement


async def test_nothing_to_run() -> None:
    assert await execute_many(FakeSession(), [], window=4) == []
