"""Open a page in Debian's Chromium (driven by playwright, which never downloads a browser of its
own) and record what it asked for: the tests that check what a person sees of a crawl's offline
copy or of its archive replayed (docs/assets.md)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from streamcrawl.agents.render.browser import default_chromium

# Skipped where there is no Chromium; under CI=true a skip fails the run (tests/services.py).
needs_chromium = pytest.mark.skipif(
    not os.access(default_chromium(), os.X_OK), reason="no Chromium"
)

# No name is resolved and nothing runs in the background: the page reaches what its URLs name
# as literal addresses (file://, 127.0.0.1) and nothing else.
QUIET = [
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--dns-prefetch-disable",
    "--no-pings",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
]


@dataclass
class Visit:
    """What a page asked for while it loaded: every request's URL, the requests that failed
    (URL, error text), the responses with a status of 400 or more (URL, status), and a few
    values the test asked the page for."""

    requests: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, int]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""


@asynccontextmanager
async def chromium(args: Sequence[str] = ()) -> AsyncIterator[Any]:
    """A headless Debian Chromium (playwright's ``Browser``), closed on exit."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=default_chromium(), args=[*QUIET, *args])
        try:
            yield browser
        finally:
            await browser.close()


async def visit(browser: Any, url: str, expressions: dict[str, str]) -> Visit:
    """Load ``url`` until its load event and the network is idle, evaluate each JavaScript
    ``expressions`` value in it, and take a screenshot."""
    out = Visit()
    page = await browser.new_page(viewport={"width": 800, "height": 600})
    try:
        page.on("request", lambda r: out.requests.append(r.url))
        page.on("requestfailed", lambda r: out.failed.append((r.url, str(r.failure))))
        page.on("response", lambda r: r.status >= 400 and out.errors.append((r.url, r.status)))
        await page.goto(url, wait_until="load", timeout=20_000)
        await page.wait_for_load_state("networkidle", timeout=20_000)
        for name, expression in expressions.items():
            out.values[name] = await page.evaluate(expression)
        out.screenshot = await page.screenshot()
    finally:
        await page.close()
    return out


def style(selector: str, prop: str) -> str:
    """The JavaScript for ``selector``'s computed ``prop``."""
    return f"getComputedStyle(document.querySelector({selector!r})).{prop}"


def natural_width(selector: str) -> str:
    """The JavaScript for an image's ``naturalWidth`` (0: not loaded or not decoded)."""
    return f"document.querySelector({selector!r}).naturalWidth"
