"""The exception taxonomy. Every error a user or operator can see derives from ``CrawlError``."""

from __future__ import annotations


class CrawlError(Exception):
    """Base of every streamcrawl error; its message says what to do."""


class ConfigError(CrawlError):
    """A setting or CLI option is invalid. The CLI prints it as one line and exits 2."""


class InvalidURL(CrawlError):
    """A URL cannot be canonicalized (bad scheme, userinfo, bad host or port, too long)."""


class FetchError(CrawlError):
    """A fetch attempt failed; ``error_class`` is the short name recorded as the last error."""

    error_class = "fetch_error"

    def __init__(self, message: str, *, error_class: str | None = None) -> None:
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
        error_class: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, error_class=error_class)
        self.status = status
        self.retry_after = retry_after


class FetchPermanent(FetchError):
    """No further attempt will help (4xx other than 408/429, a redirect loop, a bad redirect)."""

    def __init__(self, message: str, *, error_class: str | None = None, status: int | None = None):
        super().__init__(message, error_class=error_class)
        self.status = status


class RobotsDenied(CrawlError):
    """robots.txt disallows the URL for our user agent."""


class StateError(CrawlError):
    """The state directory cannot be used (locked, corrupt, from another version).

    The message tells the operator what to do, e.g. stop the other process or delete the dir.
    """


class SinkBackpressure(CrawlError):
    """The sink cannot take writes now; pause input and try again after ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
