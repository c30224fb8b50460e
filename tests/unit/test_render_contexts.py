"""An origin's renders share one browser context (``Renderer._context``): made once however the
renders start and end, kept ``keep_context`` seconds after the last with its pages, which the
origin's next render navigates again (``Renderer._load``), and closed after that, least recently
used first beyond ``max_kept``, its pages before it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamcrawl.agents.render.browser import Renderer, RenderSettings
from streamcrawl.agents.render.page import PageRoutes, Served


class _Page:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name, self.urls = log, name, []  # type: list[str]
        self.fail_reset = False

    async def route(self, _pattern: str, _handler: Any) -> None:
        return None

    async def goto(self, url: str, **_: Any) -> None:
        if url == "about:blank" and self.fail_reset:
            raise RuntimeError("target crashed")
        self.urls.append(url)

    async def close(self, **_: Any) -> None:
        self.log.append(f"close {self.name}")


class _Context:
    def __init__(self, n: int, log: list[str]) -> None:
        self.n, self.closed, self.log, self.pages = n, 0, log, []  # type: list[_Page]

    async def route(self, _pattern: str, _handler: Any) -> None:
        return None

    async def new_page(self) -> _Page:
        self.pages.append(_Page(self.log, f"page {self.n}.{len(self.pages)}"))
        return self.pages[-1]

    async def close(self) -> None:
        self.closed += 1
        self.log.append(f"close context {self.n}")


class _Browser:
    """Makes contexts slowly (the creation is awaited while another render starts)."""

    def __init__(self) -> None:
        self.made: list[_Context] = []
        self.log: list[str] = []

    async def new_context(self, **_: Any) -> _Context:
        await asyncio.sleep(0.01)
        self.made.append(_Context(len(self.made), self.log))
        return self.made[-1]


def _renderer(**settings: Any) -> tuple[Renderer, _Browser]:
    renderer = Renderer(RenderSettings(**settings))
    browser = renderer._browser = _Browser()  # type: ignore[assignment]
    return renderer, browser


async def _settled(_self: Renderer, page: Any, routes: PageRoutes) -> str:
    await page.goto(routes.url)
    return f"<html>{routes.url}</html>"


async def _nothing(_request: Any) -> str:
    return "closed"


async def _load(renderer: Renderer, origin: str, url: str) -> str:
    routes = PageRoutes(url, Served(200, {}, b""), _nothing)
    async with renderer._context(origin) as shared:
        return await renderer._load(shared, routes)


def test_two_renders_of_one_origin_that_start_together_share_one_context() -> None:
    renderer, browser = _renderer(keep_context=0)
    seen: list[tuple[int, int]] = []

    async def render(hold: float) -> None:
        async with renderer._context("http://a.test") as shared:
            await asyncio.sleep(hold)
            context = shared.context.result()
            seen.append((context.n, context.closed))  # still open while this render runs

    async def main() -> None:
        await asyncio.gather(render(0.05), render(0.01))
        async with renderer._context("http://a.test") as later:  # after both: a new one
            seen.append((later.context.result().n, later.context.result().closed))

    asyncio.run(main())
    assert seen == [(0, 0), (0, 0), (1, 0)]
    assert [c.closed for c in browser.made] == [1, 1]


def test_the_next_render_of_an_origin_navigates_the_page_kept_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Renderer, "_settled_dom", _settled)
    renderer, browser = _renderer(keep_context=0.2)

    async def main() -> list[str]:
        first = await _load(renderer, "http://a.test", "http://a.test/1")
        second = await _load(renderer, "http://a.test", "http://a.test/2")
        assert browser.log == []  # kept: nothing closed between the two
        await asyncio.sleep(0.4)  # then closed, its page first
        return [first, second]

    assert asyncio.run(main()) == ["<html>http://a.test/1</html>", "<html>http://a.test/2</html>"]
    assert renderer.pages_opened == 1 and len(browser.made) == 1
    (page,) = browser.made[0].pages
    assert page.urls == ["http://a.test/1", "about:blank", "http://a.test/2", "about:blank"]
    assert browser.log == ["close page 0.0", "close context 0"]
    assert renderer._contexts == {}


def test_a_page_that_fails_its_render_or_its_reset_is_closed_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def failing(_self: Renderer, page: Any, routes: PageRoutes) -> str:
        if routes.url.endswith("/bad"):
            raise RuntimeError("render failed")
        page.fail_reset = routes.url.endswith("/no-reset")
        return "<html></html>"

    monkeypatch.setattr(Renderer, "_settled_dom", failing)
    renderer, browser = _renderer(keep_context=5)

    async def main() -> None:
        with pytest.raises(RuntimeError):
            await _load(renderer, "http://a.test", "http://a.test/bad")
        await _load(renderer, "http://a.test", "http://a.test/no-reset")
        await _load(renderer, "http://a.test", "http://a.test/ok")
        await renderer._drop("http://a.test", renderer._contexts["http://a.test"])

    asyncio.run(main())
    assert renderer.pages_opened == 3
    assert browser.log == ["close page 0.0", "close page 0.1", "close page 0.2", "close context 0"]


def test_kept_contexts_beyond_max_kept_close_least_recently_used_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Renderer, "_settled_dom", _settled)
    renderer, browser = _renderer(keep_context=30, max_kept=2)

    async def main() -> None:
        for origin in ("http://a.test", "http://b.test", "http://a.test", "http://c.test"):
            await _load(renderer, origin, origin + "/")

    asyncio.run(main())
    assert browser.log == ["close page 1.0", "close context 1"]  # b: used least recently
    assert list(renderer._contexts) == ["http://a.test", "http://c.test"]
    assert renderer.pages_opened == 3


def test_a_render_taking_up_a_kept_context_cancels_its_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Renderer, "_settled_dom", _settled)
    renderer, browser = _renderer(keep_context=0.1)

    async def main() -> None:
        await _load(renderer, "http://a.test", "http://a.test/1")
        async with renderer._context("http://a.test"):
            await asyncio.sleep(0.3)  # past the first expiry, while a render holds it
            assert browser.log == []
        await asyncio.sleep(0.3)

    asyncio.run(main())
    assert browser.log == ["close page 0.0", "close context 0"]
