"""Renders of one origin in flight share one browser context, made once and closed after the
last (``Renderer._context``), whatever the order they start and end in."""

from __future__ import annotations

import asyncio
from typing import Any

from streamcrawl.agents.render.browser import Renderer


class _Context:
    def __init__(self, n: int) -> None:
        self.n, self.closed = n, 0

    async def route(self, _pattern: str, _handler: Any) -> None:
        return None

    async def close(self) -> None:
        self.closed += 1


class _Browser:
    """Makes contexts slowly (the creation is awaited while another render starts)."""

    def __init__(self) -> None:
        self.made: list[_Context] = []

    async def new_context(self, **_: Any) -> _Context:
        await asyncio.sleep(0.01)
        self.made.append(_Context(len(self.made)))
        return self.made[-1]


def test_two_renders_of_one_origin_that_start_together_share_one_context() -> None:
    renderer = Renderer()
    browser = renderer._browser = _Browser()  # type: ignore[assignment]
    seen: list[tuple[int, int]] = []

    async def render(hold: float) -> None:
        async with renderer._context("http://a.test") as context:
            await asyncio.sleep(hold)
            seen.append((context.n, context.closed))  # still open while this render runs

    async def main() -> None:
        await asyncio.gather(render(0.05), render(0.01))
        async with renderer._context("http://a.test") as later:  # after both: a new one
            seen.append((later.n, later.closed))

    asyncio.run(main())
    assert seen == [(0, 0), (0, 0), (1, 0)]
    assert [c.closed for c in browser.made] == [1, 1]
