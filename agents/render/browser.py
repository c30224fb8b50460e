"""The process's one browser: Chromium from the system, driven by Playwright, without a network.

``Renderer`` launches Chromium (``RenderSettings.chromium``, ``/usr/bin/chromium`` by default:
Debian's package; Playwright never downloads a browser here) with its proxy set to a loopback
port that this process holds bound and never listens on, no bypass for loopback, and a host
resolver that resolves nothing: a request the route handler (``page.py``) does not answer can
only fail. Service workers are blocked, so no request escapes the page's routes.

Lifecycle: one browser per process; one context per origin batch: shared by the renders of that
origin in flight and kept ``keep_context`` seconds after the last, with its pages, so that the
origin's next render navigates a page already open (Chromium then reuses the page's renderer
process instead of starting one per render: docs/rendering.md, "What a render costs"); a page is
reset to ``about:blank`` between renders and closed after a failed one; pages are closed before
their context; the browser replaced after ``recycle_after`` renders or when its processes' memory
passes ``max_pss``, and after a crash; a page or browser that does not close in time is killed.

``playwright`` and ``psutil`` (the ``render`` extra) are imported only when a browser starts:
a crawl without ``--render`` never loads them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final

from streamcrawl.agents.errors import ConfigError, ErrorClass, RenderError
from streamcrawl.agents.render.page import MEDIA_TYPES, PageRoutes, Rendered, Serve, Served

log = logging.getLogger(__name__)

ENV_CHROMIUM: Final = "STREAMCRAWL_CHROMIUM"
DEFAULT_CHROMIUM: Final = "/usr/bin/chromium"
_CLOSE_TIMEOUT: Final = 5.0  # seconds for a page, context or browser to close before a kill
_MARK: Final = "--streamcrawl-renderer="  # a switch Chromium ignores: finds our processes
# Seconds between two reads of the browser's memory (a read walks each process's smaps: a few
# milliseconds a process, too dear for every render).
MEMORY_CHECK_S: Final = 5.0


def default_chromium() -> str:
    """``STREAMCRAWL_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    return os.environ.get(ENV_CHROMIUM) or DEFAULT_CHROMIUM


@dataclass(frozen=True)
class RenderSettings:
    """The process's rendering settings (docs/rendering.md, "Limits").

    ``navigation_timeout``: seconds until the document's DOMContentLoaded; ``settle_timeout``:
    seconds more for the network to go idle (then the DOM is taken as it is) and for the DOM to
    be read; ``recycle_after``: renders before the browser is replaced; ``max_pss``: bytes of
    the browser's processes (proportional set size: a page its processes share counted once,
    where summed RSS counts it in each) above which it is replaced, read at most every
    ``MEMORY_CHECK_S``; ``concurrency``: pages at once;
    ``media``: load images, fonts and media; ``max_subrequests``: per page, then refused;
    ``keep_context``: seconds an origin's context and its open pages stay after its last render
    (0: closed at once); ``max_kept``: origins whose contexts are kept so, the least recently
    used closed first."""

    chromium: str = field(default_factory=default_chromium)
    navigation_timeout: float = 15.0
    settle_timeout: float = 5.0
    recycle_after: int = 200
    max_pss: int = 1 << 30
    concurrency: int = 2
    media: bool = False
    max_subrequests: int = 100
    keep_context: float = 10.0
    max_kept: int = 8


class Renderer:
    """Renders pages in one Chromium; ``render`` may be called concurrently. Call ``close``
    once done (the browser and the Playwright driver stop). ``launches``: browsers started so
    far (the first and every replacement); ``refused``: the renders' subrequests refused, by
    reason (the page's rules or ``serve``'s answer), for the render worker's metrics."""

    def __init__(self, settings: RenderSettings | None = None) -> None:
        self.settings = settings if settings is not None else RenderSettings()
        self.renders = 0  # by the current browser
        self.launches = 0
        self.pages_opened = 0  # by every browser: renders less pages reused
        self.refused: collections.Counter[str] = collections.Counter()  # subrequests, by why
        self._mark = uuid.uuid4().hex
        self._playwright: Any = None
        self._browser: Any = None
        self._closed_port: socket.socket | None = None
        self._contexts: dict[str, _Shared] = {}  # by origin, the least recently used first
        self._expiring: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self.settings.concurrency)
        self._idle = asyncio.Condition()
        self._in_flight = 0
        self._memory, self._memory_checked = 0, 0.0  # pss(), and when it was read

    async def render(
        self,
        origin: str,
        url: str,
        document: Served,
        serve: Serve,
        loads: frozenset[str] = frozenset(),
    ) -> Rendered:
        """Render ``document`` (the response the crawl fetched for ``url``), every subrequest
        answered by ``serve``; ``loads``: the resource types of ``MEDIA_TYPES`` it loads (all
        of them with ``RenderSettings.media``). Raises ``RenderError`` (``render_timeout``,
        ``render_crash``); the renderer is usable after either."""
        async with self._slots, self._turn():
            loads = MEDIA_TYPES if self.settings.media else loads
            routes = PageRoutes(url, document, serve, loads, self.settings.max_subrequests)
            started = time.perf_counter()
            try:
                async with self._context(origin) as shared:
                    html = await self._load(shared, routes)
            finally:  # a failed render's refusals count too
                self.refused.update(s.refused for s in routes.subrequests if s.refused)
            elapsed = (time.perf_counter() - started) * 1000.0
            return Rendered(html, elapsed, routes.subrequests, routes.navigation)

    async def close(self) -> None:
        """Stop the browser and the driver; ``render`` may start them again."""
        await self._stop_browser()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
        if self._closed_port is not None:
            self._closed_port.close()
            self._closed_port = None

    def rss(self) -> int:
        """Resident bytes of the browser's processes (0: none running)."""
        return sum(_rss(p) for p in self._processes())

    def pss(self) -> int:
        """Proportional set size of the browser's processes, in bytes (0: none running)."""
        return sum(_pss(p) for p in self._processes())

    def browser_pids(self) -> list[int]:
        """The process ids of the current browser (its main process first)."""
        return [p.pid for p in self._processes()]

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """One render's turn: a browser replaced only while no render is in flight."""
        async with self._idle:
            if self._due():
                await self._idle.wait_for(lambda: self._in_flight == 0)
                if self._due():
                    await self._stop_browser()
            if self._browser is None:
                await self._launch()
            self._in_flight += 1
        try:
            yield
        finally:
            async with self._idle:
                self._in_flight -= 1
                self.renders += 1
                self._idle.notify_all()

    def _due(self) -> bool:
        """Whether the browser is to be replaced: dead, used enough, or too large."""
        if self._browser is None:
            return False
        if not self._browser.is_connected() or self.renders >= self.settings.recycle_after:
            return True
        now = time.monotonic()
        if now - self._memory_checked >= MEMORY_CHECK_S:
            self._memory_checked, self._memory = now, self.pss()
        return self._memory > self.settings.max_pss

    async def _launch(self) -> None:
        if self._playwright is None:
            try:
                self._playwright = await _start_playwright(self.settings.chromium)
            except ConfigError as exc:  # no browser here: the page keeps its HTTP copy
                raise RenderError(str(exc), error_class=ErrorClass.RENDER_CRASH) from None
        if self._closed_port is None:
            self._closed_port = closed_port()
        port = self._closed_port.getsockname()[1]
        from playwright.async_api import Error as PlaywrightError

        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=self.settings.chromium, args=isolated_args(port, self._mark)
            )
        except PlaywrightError as exc:
            raise RenderError(
                f"cannot start Chromium at {self.settings.chromium}: {exc}"[:500],
                error_class=ErrorClass.RENDER_CRASH,
            ) from exc
        self.renders = 0
        self._memory, self._memory_checked = 0, time.monotonic()
        self.launches += 1
        log.info("browser started (%s)", self._browser.version)

    async def _stop_browser(self) -> None:
        """Close the browser (killed if it does not close in time); contexts go with it."""
        browser, self._browser = self._browser, None
        for shared in self._contexts.values():
            shared.cancel_expiry()
        self._contexts.clear()
        if browser is None:
            return
        pids = self.browser_pids()
        try:
            await asyncio.wait_for(browser.close(), _CLOSE_TIMEOUT)
        except Exception as exc:
            log.warning("browser did not close (%r): killed", exc)
            _kill(pids)

    @contextlib.asynccontextmanager
    async def _context(self, origin: str) -> AsyncIterator[_Shared]:
        """The origin's context, shared by its renders in flight and kept after the last
        (``_release``). Two renders of one origin that start together share one context: the
        first one's creation is in the table before it is awaited (each awaiting its own once
        made two, and the first to finish closed the other's under it)."""
        shared = self._contexts.pop(origin, None)
        if shared is None:
            shared = _Shared(asyncio.ensure_future(self._new_context()))
        self._contexts[origin] = shared  # the most recently used last
        shared.users += 1
        shared.cancel_expiry()
        try:
            await asyncio.shield(shared.context)
            yield shared
        finally:
            shared.users -= 1
            if shared.users == 0:
                await self._release(origin, shared)

    async def _release(self, origin: str, shared: _Shared) -> None:
        """A context its last render in flight left: kept ``keep_context`` seconds for the
        origin's next batch (the least recently used beyond ``max_kept`` closed), or closed."""
        keep = self.settings.keep_context
        if keep > 0 and self._contexts.get(origin) is shared and shared.usable():
            loop = asyncio.get_running_loop()
            shared.expiry = loop.call_later(keep, self._expire, origin, shared)
            idle = [(o, s) for o, s in self._contexts.items() if s.users == 0]
            for old_origin, old in idle[: max(0, len(idle) - self.settings.max_kept)]:
                await self._drop(old_origin, old)
            return
        if self._contexts.get(origin) is shared:
            del self._contexts[origin]
        await self._close_shared(shared)

    def _expire(self, origin: str, shared: _Shared) -> None:
        task = asyncio.ensure_future(self._drop(origin, shared))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)

    async def _drop(self, origin: str, shared: _Shared) -> None:
        """Close a kept context unless a render took it up again or it is gone already."""
        shared.cancel_expiry()
        if shared.users == 0 and self._contexts.get(origin) is shared:
            del self._contexts[origin]
            await self._close_shared(shared)

    async def _new_context(self) -> Any:
        try:
            context = await self._browser.new_context(service_workers="block")
            # A page's own routes come first; this one refuses what no page routes (a popup a
            # script opened), before the browser tries its closed proxy.
            await context.route("**/*", _refuse)
        except Exception as exc:
            raise _crash(exc) from exc
        return context

    async def _close_shared(self, shared: _Shared) -> None:
        """Close a context its last render left, its kept pages first (none if its creation
        failed)."""
        if not shared.context.done():
            await asyncio.wait([shared.context])
        if not shared.usable():
            return
        tabs, shared.tabs = shared.tabs, []
        for tab in tabs:
            await self._close(tab.page.close(run_before_unload=False))
        await self._close(shared.context.result().close())

    async def _load(self, shared: _Shared, routes: PageRoutes) -> str:
        """Load the document in a page of the context (one kept open, else a new one), let it
        settle, read the DOM; the page is reset to be kept, or closed whatever happens."""
        tab = shared.tabs.pop() if shared.tabs else await self._new_tab(shared.context.result())
        tab.routes = routes
        try:
            html = await self._settled_dom(tab.page, routes)
        except BaseException:
            tab.routes = None
            await self._close(tab.page.close(run_before_unload=False))
            raise
        tab.routes = None
        if await self._reset(tab):
            shared.tabs.append(tab)
        else:
            await self._close(tab.page.close(run_before_unload=False))
        return html

    async def _new_tab(self, context: Any) -> _Tab:
        try:
            page = await context.new_page()
        except Exception as exc:
            raise _crash(exc) from exc
        self.pages_opened += 1
        tab = _Tab(page)
        try:
            await page.route("**/*", tab.handle)
        except Exception as exc:
            await self._close(page.close(run_before_unload=False))
            raise _crash(exc) from exc
        return tab

    async def _reset(self, tab: _Tab) -> bool:
        """Unload the page's document (its scripts stop) to keep the page for the origin's
        next render; False: close it instead."""
        if self.settings.keep_context <= 0 or self._browser is None:
            return False
        try:
            await asyncio.wait_for(tab.page.goto("about:blank"), _CLOSE_TIMEOUT)
        except Exception as exc:
            log.info("page not reset (%r): closed", exc)
            return False
        return True

    async def _settled_dom(self, page: Any, routes: PageRoutes) -> str:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        settings = self.settings
        try:
            # Committed, then parsed: Playwright's own load states wait for a navigation a
            # script starts while the document loads (aborted here), so the page's own
            # readyState is asked instead.
            timeout = settings.navigation_timeout * 1000
            await page.goto(routes.url, wait_until="commit", timeout=timeout)
            await page.wait_for_function("document.readyState !== 'loading'", timeout=timeout)
            await routes.settled(settings.settle_timeout)  # a page that keeps polling is taken
            return str(await asyncio.wait_for(page.content(), settings.settle_timeout))
        except (PlaywrightTimeout, TimeoutError) as exc:
            raise RenderError(
                f"no DOM of {routes.url} in time: {str(exc).splitlines()[0]}"[:500],
                error_class=ErrorClass.RENDER_TIMEOUT,
            ) from exc
        except PlaywrightError as exc:
            raise _crash(exc) from exc

    async def _close(self, closing: Any) -> None:
        """Await a page's or context's close; one that hangs or fails takes the browser down
        (replaced before the next render)."""
        try:
            await asyncio.wait_for(closing, _CLOSE_TIMEOUT)
        except Exception as exc:
            log.warning("browser page or context did not close (%r): browser replaced", exc)
            await self._stop_browser()

    def _processes(self) -> list[Any]:
        if self._browser is None:
            return []
        return _marked(self._mark)


def check_render(chromium: str | None = None) -> None:
    """``ConfigError`` (one line, what to install) when this process cannot render: no
    Chromium at the configured path, or no ``playwright`` (the render extra). Imports
    nothing."""
    import importlib.util

    path = chromium or default_chromium()
    if not os.access(path, os.X_OK):
        raise ConfigError(_no_chromium(path))
    if importlib.util.find_spec("playwright") is None:
        raise ConfigError(_NO_EXTRA)


def _no_chromium(path: str) -> str:
    return (
        f"no Chromium at {path}: install Debian's chromium (apt-get install chromium) "
        f"or name the binary in {ENV_CHROMIUM}"
    )


_NO_EXTRA: Final = (
    "--render needs the render extra (playwright is not installed): "
    "pip install 'streamcrawl[render]'"
)


async def _refuse(route: Any) -> None:
    from playwright.async_api import Error as PlaywrightError

    with contextlib.suppress(PlaywrightError):
        await route.abort("blockedbyclient")


@dataclass
class _Shared:
    """One origin's context (its creation, awaited by every render that shares it), the
    renders in flight that use it, its pages kept open between renders, and when it is closed
    if no render takes it up."""

    context: asyncio.Future[Any]
    users: int = 0
    tabs: list[_Tab] = field(default_factory=list)
    expiry: asyncio.TimerHandle | None = None

    def usable(self) -> bool:
        """Whether the context was made (its creation neither failed nor was cancelled)."""
        c = self.context
        return c.done() and not c.cancelled() and c.exception() is None

    def cancel_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


@dataclass
class _Tab:
    """A page and the render it serves: a kept page's requests between renders are refused."""

    page: Any
    routes: PageRoutes | None = None

    async def handle(self, route: Any) -> None:
        if self.routes is None:
            await _refuse(route)
        else:
            await self.routes.handle(route)


def _crash(exc: BaseException) -> RenderError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return RenderError(f"browser failed: {text}"[:500], error_class=ErrorClass.RENDER_CRASH)


async def _start_playwright(chromium: str) -> Any:
    """Playwright's driver, once the browser binary is known to exist."""
    if not os.access(chromium, os.X_OK):
        raise ConfigError(_no_chromium(chromium))
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        raise ConfigError(_NO_EXTRA) from None
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    return await async_playwright().start()


def closed_port() -> socket.socket:
    """A loopback port bound and never listened on: a connection to it is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def isolated_args(proxy_port: int, mark: str) -> list[str]:
    """Chromium switches that leave it no network: everything through a proxy that refuses,
    loopback included, and no name resolved."""
    return [
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--dns-prefetch-disable",
        "--no-pings",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-domain-reliability",
        "--disable-sync",
        f"{_MARK}{mark}",
    ]


def _marked(mark: str) -> list[Any]:
    """The browser launched with ``mark`` and its child processes (main process first)."""
    import psutil

    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if f"{_MARK}{mark}" in proc.cmdline():
                return [proc, *proc.children(recursive=True)]
    return []


def _rss(proc: Any) -> int:
    import psutil

    try:
        return int(proc.memory_info().rss)
    except psutil.Error:
        return 0


def _pss(proc: Any) -> int:
    import psutil

    try:
        return int(proc.memory_full_info().pss)
    except (psutil.Error, AttributeError):  # no PSS on this system: its RSS
        return _rss(proc)


def _kill(pids: list[int]) -> None:
    """SIGKILL what is left of a browser's processes."""
    import signal

    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
