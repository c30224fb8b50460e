"""A local aiohttp test server that records every request, for tests of every stage and the CLI.

Usage, async::

    async with RecordingServer({"/": html("<a href=/a>a</a>"), "/a": redirect("/b")}) as srv:
        await fetch(session, srv.url("/"), ...)
        assert srv.paths() == ["/"]

Usage, sync (the server runs its own event loop in a background thread, e.g. for CLI
subprocess tests)::

    with RecordingServer(routes) as srv:
        subprocess.run(["streamcrawl", "crawl", srv.url("/")])
        assert min(srv.gaps()) >= 1.0

A route value is a ``Reply``, a ``(status, headers, body)`` tuple, or an async handler
``(web.Request) -> web.StreamResponse``. Routes are looked up by ``path_qs`` first, then by path,
then by the longest key ending in ``/`` (other than ``/``) that the path starts with; unknown
paths answer 404. ``srv.routes`` may be changed while the server runs. Several servers on
several ports are several origins.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import brotli
from aiohttp import web

from streamcrawl.agents.net.guard import AddressGuard, parse_networks
from tests import arrivals

# The SSRF guard of sessions that fetch from these servers (they listen on 127.0.0.1).
LOOPBACK_GUARD = AddressGuard(parse_networks(["127.0.0.0/8"]))

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Marker header: the prepare hook removes it and the Content-Type aiohttp adds by default, so a
# test can serve a body without any Content-Type.
_DROP_CT = "X-Test-Drop-Content-Type"
_SENT = web.AppKey("sent", dict[str, int])


@dataclass(frozen=True)
class Request:
    """One logged request: arrival time (the kernel's receive time of its first bytes, on the
    clock of ``time.time()``: ``tests/arrivals.py``), method, path with query, headers, and
    when its handler ran (``time.time()``: what the servers logged before, kept to show how
    far it lags)."""

    t: float
    method: str
    path: str
    headers: dict[str, str]
    handled: float = 0.0


@dataclass(frozen=True)
class Reply:
    """A canned response. ``delay`` seconds pass before the status line is sent."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | str = b""
    delay: float = 0.0
    drop_content_type: bool = False


def html(
    body: str | bytes, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> Reply:
    """An HTML page, ``text/html; charset=utf-8`` unless ``headers`` says otherwise."""
    hdrs = {"Content-Type": "text/html; charset=utf-8", **(headers or {})}
    return Reply(status=status, headers=hdrs, body=body)


def text(body: str | bytes, content_type: str = "text/plain", *, status: int = 200) -> Reply:
    """A page with any content type, e.g. ``text/plain`` for robots.txt or ``image/png``."""
    return Reply(status=status, headers={"Content-Type": content_type}, body=body)


def redirect(location: str, status: int = 301) -> Reply:
    """A redirect to ``location`` (sent verbatim, so relative targets stay relative)."""
    return Reply(status=status, headers={"Location": location})


def slow(delay: float, reply: Reply | None = None) -> Reply:
    """``reply`` (default: a tiny HTML page) sent after ``delay`` seconds."""
    base = reply or html("<title>slow</title>")
    return Reply(base.status, base.headers, base.body, delay, base.drop_content_type)


def retry_after(status: int = 429, value: str = "5") -> Reply:
    """A 429/503 with a ``Retry-After`` header (delta-seconds or HTTP-date)."""
    return Reply(status=status, headers={"Retry-After": value, "Content-Type": "text/plain"})


def no_content_type(body: str | bytes, status: int = 200) -> Reply:
    """A body sent without any Content-Type header."""
    return Reply(status=status, body=body, drop_content_type=True)


def compressed(
    body: bytes, encoding: str = "gzip", content_type: str = "text/html; charset=utf-8"
) -> Reply:
    """``body`` encoded with gzip, deflate (zlib) or br, with the matching Content-Encoding."""
    encoders: dict[str, Callable[[bytes], bytes]] = {
        "gzip": gzip.compress,
        "deflate": zlib.compress,
        # Quality 4: the default (11) takes seconds on a multi-megabyte bomb.
        "br": lambda data: brotli.compress(data, quality=4),
    }
    return Reply(
        headers={"Content-Type": content_type, "Content-Encoding": encoding},
        body=encoders[encoding](body),
    )


def bomb(decoded_size: int, encoding: str = "gzip") -> Reply:
    """A decompression bomb: ``decoded_size`` zero bytes, a few KB on the wire."""
    return compressed(b"\0" * decoded_size, encoding)


def stream(
    total: int,
    *,
    chunk: int = 64 * 1024,
    content_type: str = "text/html",
    content_length: bool = False,
    chunk_delay: float = 0.0,
) -> Handler:
    """A handler that streams ``total`` bytes in chunks (chunked encoding unless
    ``content_length``). It stops quietly when the client goes away and records the bytes it
    managed to send in ``srv.sent[path]``, so a test can check that a body was not downloaded.
    """

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": content_type})
        if content_length:
            resp.content_length = total
        await resp.prepare(request)
        sent_log = request.app[_SENT]
        sent = 0
        piece = b"x" * chunk
        try:
            while sent < total:
                n = min(chunk, total - sent)
                await resp.write(piece[:n])
                sent += n
                sent_log[request.path_qs] = sent
                if chunk_delay:
                    await asyncio.sleep(chunk_delay)
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client closed the connection: what the test wanted to see
        return resp

    return handler


def reset() -> Handler:
    """A handler that drops the connection without answering (connection reset)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        # aiohttp needs a response object; it is never sent.
        return web.Response(status=500)

    return handler


class RecordingServer:
    """An aiohttp server on 127.0.0.1 (a free port) that logs every request it receives."""

    def __init__(self, routes: Mapping[str, Any] | None = None, *, host: str = "127.0.0.1"):
        self.routes: dict[str, Any] = dict(routes or {})
        self.log: list[Request] = []
        self.sent: dict[str, int] = {}
        self.host = host
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._listener: arrivals.StampingListener | None = None

    # -- addresses and log views -------------------------------------------------------------
    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    def url(self, path: str = "/") -> str:
        """The absolute URL of ``path`` on this server."""
        return self.origin + path

    def paths(self) -> list[str]:
        """Requested paths (with query), in arrival order."""
        return [r.path for r in self.log]

    def gaps(self, where: Callable[[Request], bool] | None = None) -> list[float]:
        """Differences between consecutive sorted arrival times (of the requests ``where``
        accepts, default all), to check politeness delays."""
        times = sorted(r.t for r in self.log if where is None or where(r))
        return [b - a for a, b in itertools.pairwise(times)]

    def requests(self, path: str) -> list[Request]:
        """Logged requests for one path (with query)."""
        return [r for r in self.log if r.path == path]

    # -- request handling --------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        arrived = self._listener.arrival(peer) if self._listener else time.time()
        headers = dict(request.headers)
        self.log.append(Request(arrived, request.method, request.path_qs, headers, time.time()))
        spec = self.routes.get(request.path_qs, self.routes.get(request.path))
        if spec is None:
            spec = self._prefix_route(request.path)
        if spec is None:
            return web.Response(status=404, text="not found")
        if callable(spec):
            resp: web.StreamResponse = await spec(request)
            return resp
        if isinstance(spec, tuple):
            spec = Reply(spec[0], spec[1], spec[2])
        if spec.delay:
            await asyncio.sleep(spec.delay)
        headers = dict(spec.headers)
        if spec.drop_content_type:
            headers[_DROP_CT] = "1"
        body = spec.body.encode() if isinstance(spec.body, str) else spec.body
        return web.Response(status=spec.status, headers=headers, body=body)

    def _prefix_route(self, path: str) -> Any:
        """The route of the longest key ending in "/" that ``path`` starts with (a handler
        for a whole subtree, e.g. a generated calendar), else None."""
        keys = [k for k in self.routes if k.endswith("/") and k != "/" and path.startswith(k)]
        return self.routes[max(keys, key=len)] if keys else None

    @staticmethod
    async def _on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        if _DROP_CT in response.headers:
            del response.headers[_DROP_CT]
            response.headers.pop("Content-Type", None)

    # -- async lifecycle ---------------------------------------------------------------------
    async def start(self) -> RecordingServer:
        """Bind a free port and start serving."""
        app = web.Application()
        app[_SENT] = self.sent
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_response_prepare.append(self._on_prepare)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self._listener = arrivals.listen(self.host, self.port)
        self.port = self._listener.getsockname()[1]
        site = web.SockSite(self._runner, self._listener, shutdown_timeout=0.1)
        await site.start()
        return self

    def unstamped(self) -> int:
        """Requests' reads that had no kernel arrival stamp (their time is the handler's)."""
        return self._listener.unstamped() if self._listener else 0

    async def stop(self) -> None:
        """Stop serving and close open connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> RecordingServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- background-thread lifecycle, for sync tests -----------------------------------------
    def start_in_thread(self) -> RecordingServer:
        """Run the server on its own event loop in a daemon thread; returns once it listens."""
        ready = threading.Event()
        errors: list[BaseException] = []

        async def main() -> None:
            self._stopped = asyncio.Event()
            try:
                await self.start()
            except BaseException as exc:  # reported to the starting thread below
                errors.append(exc)
                ready.set()
                return
            ready.set()
            await self._stopped.wait()
            await self.stop()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(main())
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, name=f"RecordingServer-{id(self)}", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def stop_thread(self) -> None:
        """Stop a server started with ``start_in_thread`` and join its thread."""
        if self._thread is None or self._loop is None or self._stopped is None:
            return
        self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(10)
        self._thread = None

    def __enter__(self) -> RecordingServer:
        return self.start_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.stop_thread()
