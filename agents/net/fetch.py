"""The fetch stage: one HTTP GET with timeouts, a size cap, and redirects followed by hand.

``fetch`` is the only I/O of a page fetch. Its contract:

- It returns a ``FetchResult`` for 2xx and for 3xx it does not follow, and when it stops early
  (``stopped``: ``"too_large"``, ``"skipped_content_type"``, or the state ``hop_check`` returned).
- It raises ``AddressBlocked`` when the SSRF guard of the session (``make_session``) refuses
  every address of the host, before any connection is opened.
- It raises ``FetchRetryable`` for timeouts, resets, refused connections, DNS failures, 408, 429
  and 5xx (with ``retry_after`` from Retry-After), and ``FetchPermanent`` for other 4xx, redirect
  loops, too many redirects, bad redirect targets, undecodable content encodings and responses
  aiohttp cannot parse (``bad_response``: e.g. a header line over ``MAX_HEADER_FIELD``).
- ``policy.timeout`` is a deadline for each request as a whole (aiohttp's ``total``: connect,
  headers and body), not only between two reads: a server that drips one byte a second ends
  in a timeout.
- No other exception escapes, except what ``hop_check`` itself raises (a caller bug must not
  pass for a network error) and ``asyncio.CancelledError``.

Bodies are read raw (``auto_decompress=False``) and decoded by ``agents.net.response``, so
that the cap applies to the DECODED size and a decompression bomb costs at most ``max_body``
bytes of memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Final

import aiohttp
import msgspec

from streamcrawl.agents.content.charset import BodyTooLarge
from streamcrawl.agents.errors import ErrorClass, FetchError, FetchPermanent, FetchRetryable
from streamcrawl.agents.net.capture import Recorder, record_rest
from streamcrawl.agents.net.guard import AddressGuard, GuardedConnector, blocked_error
from streamcrawl.agents.net.proxy import Proxy
from streamcrawl.agents.net.redirects import REDIRECT_STATUSES, resolve_redirect
from streamcrawl.agents.net.request import RequestContext
from streamcrawl.agents.net.response import (
    TEXT_TYPES,
    decode_text,
    error_class_of,
    join_headers,
    looks_like_html,
    parse_content_type,
    raise_for_status,
    read_body,
)
from streamcrawl.agents.policy.assets import ANY_TYPE
from streamcrawl.agents.policy.requests import crawler_headers
from streamcrawl.schemas.records import CrawlPolicy

log = logging.getLogger(__name__)

# Real sites send cookies and CSP headers longer than aiohttp's 8 KiB default.
MAX_HEADER_FIELD: Final = 32 * 1024

_ERROR_CHARS: Final = 500  # an exception's repr can hold a whole response header

HopCheck = Callable[[str], str | None]
"""Receives the ABSOLUTE redirect target; returns None to follow it, or a terminal state."""


class FetchResult(msgspec.Struct, kw_only=True):
    """The outcome of one fetch that did not raise."""

    url: str  # the requested URL
    final_url: str  # the URL whose response this is, after followed redirects
    status: int
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    content_type: str | None  # media type only, lower-case
    charset: str | None  # the codec ``text`` was decoded with
    body: bytes  # decoded content; empty when not read
    text: str | None  # decoded text, for text/HTML/XML media types
    started_at: float  # epoch seconds
    elapsed_ms: float
    # When the LAST request's headers were on the wire (epoch seconds, observed just after the
    # write): politeness counts the next request's delay from here, not from when this fetch
    # was dispatched, which a busy event loop can put well before the actual send.
    sent_at: float = 0.0
    redirects: tuple[str, ...] = ()  # redirect targets followed, in order
    stopped: str | None = None  # "too_large", "skipped_content_type", or a hop_check state
    redirect_target: str | None = None  # absolute target of a redirect that was not followed


class SentAt:
    """Per-request trace context (``trace_request_ctx``) of a session from ``make_session``:
    ``at`` is when the request headers were written (epoch seconds; 0.0: not sent), never
    earlier: politeness counts from it."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = 0.0

    def stamp(self) -> None:
        self.at = time.time()


async def _mark_sent(
    _session: aiohttp.ClientSession,
    ctx: object,
    _params: aiohttp.TraceRequestHeadersSentParams,
) -> None:
    sent = getattr(ctx, "trace_request_ctx", None)
    if isinstance(sent, SentAt):
        sent.stamp()
        # aiohttp (3.14) calls this hook just before it writes the request, and the write
        # follows in the same step of the task: a callback scheduled now runs after the bytes
        # were handed to the socket. Stamped in the hook alone, a request preempted before its
        # write started the next one's delay early (docs/architecture.md, "Where this differs
        # from the reference design": politeness counts from the wire).
        asyncio.get_running_loop().call_soon(sent.stamp)


class _HopCheckFailed(Exception):
    """Carries an exception raised by the caller's hop_check past our error mapping."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def client_timeout(policy: CrawlPolicy) -> aiohttp.ClientTimeout:
    """Per-request timeouts from the policy: total, connect, and between two reads."""
    return aiohttp.ClientTimeout(
        total=policy.timeout, sock_connect=policy.connect_timeout, sock_read=policy.timeout
    )


def conditional_headers(etag: str | None, last_modified: str | None) -> dict[str, str]:
    """The validators of a revisit, byte for byte as the server sent them (RFC 9110 13.1):
    ``If-None-Match`` from the ETag, ``If-Modified-Since`` from Last-Modified."""
    headers = {}
    if etag is not None:
        headers["If-None-Match"] = etag
    if last_modified is not None:
        headers["If-Modified-Since"] = last_modified
    return headers


def hop(
    session: aiohttp.ClientSession,
    url: str,
    headers: Mapping[str, str],
    timeout: aiohttp.ClientTimeout,
    sent: SentAt | None,
    request: RequestContext | None = None,
) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
    """One GET of a redirect chain followed by hand (``allow_redirects=False``: the caller
    decides on each Location); ``sent`` gets when the request was written; ``request`` says
    whether it goes through the proxy."""
    proxy = request.proxy_kwargs(url) if request is not None else {}
    return session.get(
        url,
        headers=headers,
        allow_redirects=False,
        timeout=timeout,
        trace_request_ctx=sent,
        **proxy,  # type: ignore[arg-type]
    )


# The DNS resolver ``make_session`` takes, named here so that the wirings need not import aiohttp.
Resolver = aiohttp.abc.AbstractResolver


def make_session(
    *,
    guard: AddressGuard,
    limit: int = 100,
    resolver: Resolver | None = None,
    proxy: Proxy | None = None,
) -> aiohttp.ClientSession:
    """One pooled session for a process: no cookies of its own (a crawl's jar is sent per
    request: ``agents/net/request.py``), no proxy env, no automatic decompression, and every
    connection checked by ``guard`` (the SSRF guard, ``agents/net/guard.py``). Nothing of a
    crawl is in it: each request carries its crawl's headers and timeouts, so one session
    serves every crawl a worker runs.

    ``resolver`` replaces aiohttp's DNS resolver (tests answer internal addresses with one).
    ``proxy``: the process's egress proxy; the guard still judges each request's target.

    Call it inside a running event loop; close it with ``await session.close()``.
    ``enable_cleanup_closed`` is not set: aiohttp 3.14 ignores it (with a warning) on every Python
    except 3.13.0, whose SSL transport leak it works around.
    """
    connector = GuardedConnector(
        guard,
        proxy=(proxy.host, proxy.port) if proxy is not None else None,
        limit=limit,
        limit_per_host=0,
        ttl_dns_cache=300,
        resolver=resolver,
    )
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_mark_sent)
    return aiohttp.ClientSession(
        trace_configs=[trace],
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        trust_env=False,
        max_line_size=MAX_HEADER_FIELD,
        max_field_size=MAX_HEADER_FIELD,
    )


async def fetch(
    session: aiohttp.ClientSession,
    url: str,
    policy: CrawlPolicy,
    *,
    hop_check: HopCheck,
    hop_delay: float = 0.0,
    validators: Mapping[str, str] | None = None,
    recorder: Recorder | None = None,
    request: RequestContext | None = None,
) -> FetchResult:
    """GET ``url`` under ``policy``; see the module docstring for what is returned or raised.

    ``request`` says what each request carries (the crawl's headers for the origin, its
    cookies, its credential, the proxy: ``agents/net/request.py``); without it, the crawler's
    own headers only. ``validators`` (``conditional_headers``) go with the first request only:
    a redirect's target is another URL, which the validators of this one do not describe.
    ``recorder`` (a crawl that archives) gets every response's exchange, those that end in an
    error too.

    Each redirect target is resolved against the current URL and passed to ``hop_check``; a
    target already visited in this fetch raises ``redirect_loop``, more than
    ``policy.max_redirects`` hops raise ``too_many_redirects``. A followed hop (always to the
    same origin: the caller's ``hop_check`` stops cross-origin ones) is sent ``hop_delay``
    seconds after the previous request, as politeness asks of any two requests to an origin.
    """
    chain = _Chain(
        url,
        policy,
        request if request is not None else plain_request(policy),
        hop_delay,
        recorder,
    )
    try:
        return await chain.run(session, hop_check, validators or {})
    except FetchError:
        raise
    except _HopCheckFailed as exc:
        raise exc.error from None
    except aiohttp.ClientHttpProxyError as exc:
        # The proxy refused the CONNECT (or answered it with an error): the proxy's, not the
        # origin's, answer; retried with the origin's backoff.
        raise FetchRetryable(
            f"proxy refused {url}: {exc.status} {exc.message}"[:_ERROR_CHARS],
            error_class=ErrorClass.PROXY,
        ) from exc
    except aiohttp.ClientResponseError as exc:
        # Only raised here for a response aiohttp could not parse (a 64 KiB header line,
        # a bad status line): the server will send it again, so retrying is of no use.
        raise FetchPermanent(
            f"malformed response from {url}: {exc.message}"[:_ERROR_CHARS],
            error_class=ErrorClass.BAD_RESPONSE,
        ) from exc
    except Exception as exc:
        raise _network_error(url, exc) from exc


def _network_error(url: str, exc: Exception) -> FetchError:
    """The fetch error an exception of the network (or the guard) stands for."""
    blocked = blocked_error(exc)
    if blocked is not None:
        return blocked
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        error_class = ErrorClass.PROXY
    else:
        error_class = error_class_of(exc)
    log.debug("fetch %s failed: %s (%r)", url, error_class, exc)
    return FetchRetryable(
        f"{error_class} fetching {url}: {exc!r}"[:_ERROR_CHARS], error_class=error_class
    )


def plain_request(policy: CrawlPolicy) -> RequestContext:
    """A request with the crawler's own headers only (no crawl options, no proxy)."""
    return RequestContext(origin="", headers=crawler_headers(policy.user_agent))


class _Chain:
    """One fetch: its requests, one per followed redirect, and what they found."""

    def __init__(
        self,
        url: str,
        policy: CrawlPolicy,
        request: RequestContext,
        hop_delay: float,
        recorder: Recorder | None,
    ) -> None:
        self.url = self.current = url
        self.policy = policy
        self.request = request
        self.hop_delay = hop_delay
        self.recorder = recorder
        self.started_at = time.time()
        self.t0 = time.perf_counter()
        self.sent = SentAt()
        self.hops: list[str] = []
        self.visited = {url.partition("#")[0]}
        self.timeout = client_timeout(policy)

    async def run(
        self, session: aiohttp.ClientSession, hop_check: HopCheck, validators: Mapping[str, str]
    ) -> FetchResult:
        extra: Mapping[str, str] = validators
        while True:
            await self._wait_for_hop()
            headers = self.request.headers_for(self.current, extra)
            async with hop(
                session, self.current, headers, self.timeout, self.sent, self.request
            ) as resp:
                self.request.received(resp, self.current)
                if self.recorder is not None:
                    self.recorder.begin(resp, self.sent.at or self.started_at)
                location = resp.headers.get("Location")
                if resp.status in REDIRECT_STATUSES and location:
                    stop = await self._redirect(resp, location, hop_check)
                    if stop is not None:
                        return stop
                    extra = {}
                    continue
                if self.recorder is not None and resp.status >= 400:
                    await record_rest(resp, self.recorder, self.policy.max_body)  # archived
                raise_for_status(resp, self.current)
                return await _read_result(resp, self.policy, self.result, self.recorder)

    async def _wait_for_hop(self) -> None:
        if self.hops and self.hop_delay > 0:
            wait = self.sent.at + self.hop_delay - time.time()
            if wait > 0:
                await asyncio.sleep(wait)

    async def _redirect(
        self, resp: aiohttp.ClientResponse, location: str, hop_check: HopCheck
    ) -> FetchResult | None:
        """Follow a redirect to ``location`` (``None``), or the result that stops here."""
        if self.recorder is not None:
            await record_rest(resp, self.recorder, self.policy.max_body)
        target = resolve_redirect(self.current, location)
        if target is None:
            raise FetchPermanent(f"bad redirect {location!r}", error_class=ErrorClass.BAD_REDIRECT)
        if target in self.visited:
            raise FetchPermanent(
                f"redirect loop at {target}",
                error_class=ErrorClass.REDIRECT_LOOP,
                status=resp.status,
            )
        if len(self.hops) >= self.policy.max_redirects:
            raise FetchPermanent(
                f"more than {self.policy.max_redirects} redirects from {self.url}",
                error_class=ErrorClass.TOO_MANY_REDIRECTS,
                status=resp.status,
            )
        try:
            stop = hop_check(target)
        except Exception as exc:
            raise _HopCheckFailed(exc) from exc
        if stop is not None:
            resp.close()
            return self.result(resp, stopped=stop, redirect_target=target)
        self.hops.append(target)
        self.visited.add(target)
        self.current = target
        return None

    def result(
        self,
        resp: aiohttp.ClientResponse,
        *,
        content_type: str | None = None,
        charset: str | None = None,
        body: bytes = b"",
        text: str | None = None,
        stopped: str | None = None,
        redirect_target: str | None = None,
    ) -> FetchResult:
        return FetchResult(
            url=self.url,
            final_url=self.current,
            status=resp.status,
            headers=join_headers(resp.headers),
            content_type=content_type,
            charset=charset,
            body=body,
            text=text,
            started_at=self.started_at,
            elapsed_ms=(time.perf_counter() - self.t0) * 1000.0,
            sent_at=self.sent.at or self.started_at,
            redirects=tuple(self.hops),
            stopped=stopped,
            redirect_target=redirect_target,
        )


async def _read_result(
    resp: aiohttp.ClientResponse,
    policy: CrawlPolicy,
    result: Callable[..., FetchResult],
    recorder: Recorder | None = None,
) -> FetchResult:
    """Apply the content-type filter and the size cap, then read, decode and wrap the body."""
    if resp.status >= 300:  # a redirect without Location, 300, 304: nothing worth reading
        if recorder is not None:
            await record_rest(resp, recorder, policy.max_body)
        resp.close()
        return result(resp)
    media_type, header_charset = parse_content_type(resp.headers.get("Content-Type"))
    any_type = ANY_TYPE in policy.content_types  # an asset: whatever the page asked for
    if media_type is not None and media_type not in policy.content_types and not any_type:
        resp.close()  # drop the connection instead of downloading what we will not use
        if recorder is not None:
            recorder.end(truncated="unspecified")  # the head only: its payload was not read
        return result(resp, content_type=media_type, stopped="skipped_content_type")
    if resp.content_length is not None and resp.content_length > policy.max_body:
        resp.close()
        if recorder is not None:
            recorder.end(truncated="length")
        return result(resp, content_type=media_type, stopped="too_large")
    chunks = recorder.chunks if recorder is not None else None
    try:
        body = await read_body(resp, policy.max_body, raw_parts=chunks)
    except BodyTooLarge:
        resp.close()
        if recorder is not None:
            recorder.end_read(policy.max_body, "length")
        return result(resp, content_type=media_type, stopped="too_large")
    if recorder is not None:
        recorder.end_read()
    if media_type is None and any_type:
        media_type = "application/octet-stream"
    if media_type is None:
        # No Content-Type: keep it only if it sniffs as HTML (what a browser would render).
        if not looks_like_html(body):
            return result(resp, stopped="skipped_content_type")
        media_type = "text/html"
    text = charset = None
    if media_type.startswith(TEXT_TYPES) or media_type.endswith("+xml"):
        text, charset = await decode_text(body, header_charset)
    return result(resp, content_type=media_type, charset=charset, body=body, text=text)
