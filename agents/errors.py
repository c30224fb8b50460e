"""The exception taxonomy. Every error a user or operator can see derives from ``CrawlError``."""

from __future__ import annotations

import enum


class CrawlError(Exception):
    """Base of every streamcrawl error; its message says what to do."""


class ConfigError(CrawlError):
    """A setting or CLI option is invalid. The CLI prints it as one line and exits 2."""


class InvalidURL(CrawlError):
    """A URL cannot be canonicalized (bad scheme, userinfo, bad host or port, too long)."""


class ErrorClass(enum.StrEnum):
    """Why a fetch attempt failed: the prefix of a URL's ``last_error`` (``"timeout: ..."``)."""

    FETCH_ERROR = "fetch_error"  # no finer class applies
    # The network (agents/net/fetch.py maps aiohttp's exceptions).
    TIMEOUT = "timeout"
    DNS = "dns"
    CONNECT = "connect"
    RESET = "reset"
    PAYLOAD = "payload"
    NETWORK = "network"
    # HTTP statuses: 408 and 429 and 5xx are retried, other 4xx are not.
    HTTP_408 = "http_408"
    HTTP_429 = "http_429"
    HTTP_5XX = "http_5xx"
    HTTP_4XX = "http_4xx"
    # Redirects and bodies.
    BAD_REDIRECT = "bad_redirect"
    REDIRECT_LOOP = "redirect_loop"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    BAD_ENCODING = "bad_encoding"
    BAD_RESPONSE = "bad_response"  # a response aiohttp cannot parse (a 64 KiB header line)
    # The SSRF guard (agents/net/guard.py) refused the host's addresses; nothing was sent.
    BLOCKED = "blocked"
    # The egress proxy (--proxy) refused or dropped the connection, or answered CONNECT with an
    # error: retried with the origin's backoff like a network error.
    PROXY = "proxy"
    # The crawl names a credential for the origin that this process does not hold: nothing was
    # sent (docs/requests.md).
    MISSING_CREDENTIAL = "missing_credential"
    # JavaScript rendering (agents/render/): the browser did not produce a DOM in time (an
    # endless script, a page that never loads), or it crashed or closed mid-render. The page's
    # HTTP copy is kept; its record says why the render failed (docs/rendering.md).
    RENDER_TIMEOUT = "render_timeout"
    RENDER_CRASH = "render_crash"


class FetchError(CrawlError):
    """A fetch attempt failed; ``error_class`` is the class recorded with the last error."""

    error_class = ErrorClass.FETCH_ERROR

    def __init__(self, message: str, *, error_class: ErrorClass | None = None) -> None:
        super().__init__(message)
        if error_class is not None:
            self.error_class = error_class


class FetchRetryable(FetchError):
    """Worth another attempt later: timeouts, resets, DNS failures, 408, 429, 5xx.

    ``retry_after`` is the server's Retry-After in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        error_class: ErrorClass | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, error_class=error_class)
        self.status = status
        self.retry_after = retry_after


class FetchPermanent(FetchError):
    """No further attempt will help (4xx other than 408/429, a redirect loop, a bad redirect)."""

    def __init__(
        self, message: str, *, error_class: ErrorClass | None = None, status: int | None = None
    ) -> None:
        super().__init__(message, error_class=error_class)
        self.status = status


class RenderError(FetchError):
    """A render failed: ``render_timeout`` or ``render_crash``; the renderer stays usable (a
    crashed or hung browser is replaced before the next render)."""


class StateError(CrawlError):
    """The state directory cannot be used (locked, corrupt, from another version).

    The message tells the operator what to do, e.g. stop the other process or delete the dir.
    """


class SinkBackpressure(CrawlError):
    """The sink cannot take writes now; pause input and try again after ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
