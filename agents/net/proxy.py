"""The egress proxy: a process setting (``--proxy``, ``STREAMCRAWL_PROXY``), never a crawl's.

Requests go through one HTTP forward proxy (``http://host:port``): plain ``http://`` targets as
absolute-form requests, ``https://`` targets through ``CONNECT``. Hosts of ``no_proxy_for`` (a
name matches itself and its subdomains) connect directly. The proxy's password is a credential
of the process (``--proxy-credential NAME``, a ``basic:USER:PASSWORD`` value), never part of
the URL, so it shows in no command line and no log.

The SSRF guard still decides on the target (``agents/net/guard.py``): the connector resolves
the target and refuses internal addresses before it hands the request to the proxy. What the
proxy itself must enforce (its own egress rules, because it resolves the name again) is in
docs/requests.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

import aiohttp
from yarl import URL

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.agents.net.credentials import Credential, Credentials, missing


@dataclass(frozen=True)
class Proxy:
    """Where requests go, and who goes direct. ``auth``: the user and password the proxy is
    sent (``Proxy-Authorization``; aiohttp sends it on plain requests and on ``CONNECT``)."""

    url: str
    host: str
    port: int
    no_proxy_for: tuple[str, ...] = ()
    auth: aiohttp.BasicAuth | None = field(default=None, repr=False)

    def route(self, url: str) -> str | None:
        """The proxy URL a request to ``url`` goes through; ``None``: direct."""
        host = (URL(url).raw_host or "").lower().rstrip(".")
        for name in self.no_proxy_for:
            if host == name or host.endswith("." + name):
                return None
        return self.url


def parse_proxy(
    text: str, no_proxy_for: Iterable[str] = (), credential: Credential | None = None
) -> Proxy:
    """``ConfigError`` (one line) for a scheme other than http, userinfo in the URL, a path,
    or a credential that is not ``basic:``."""
    try:
        url = URL(text.strip())
    except ValueError:
        raise ConfigError(f"proxy URL {text[:80]!r} does not parse") from None
    if url.scheme != "http":
        raise ConfigError(
            f"proxy URL {text[:80]!r}: scheme {url.scheme or 'none'!r} is not supported; "
            "give http://host:port (https targets go through CONNECT)"
        )
    if url.user is not None or url.password is not None:
        raise ConfigError(
            "the proxy URL holds a user or password: give it as a credential "
            "(--proxy-credential NAME, a basic:USER:PASSWORD value)"
        )
    if not url.raw_host or url.path not in ("", "/") or url.query_string:
        raise ConfigError(f"proxy URL {text[:80]!r} must be http://host:port only")
    auth = None
    if credential is not None:
        if credential.header != "Authorization" or not credential.value.startswith("Basic "):
            raise ConfigError(f"proxy credential {credential.name} must be basic:USER:PASSWORD")
        auth = aiohttp.BasicAuth.decode(credential.value, encoding="utf-8")
    port = url.port or 80
    hosts = tuple(h.strip().lower().lstrip(".") for h in no_proxy_for if h.strip())
    return Proxy(f"http://{url.raw_host}:{port}", url.raw_host, port, hosts, auth)


def proxy_setting(
    url: str | None, no_proxy_for: str, credential: str | None, credentials: Credentials
) -> Proxy | None:
    """The proxy of ``--proxy``/``STREAMCRAWL_PROXY`` (None: none); ``ConfigError`` names the
    setting when its URL is malformed or its credential is not held."""
    if not url:
        if credential:
            raise ConfigError("a proxy credential is set but no proxy (--proxy, STREAMCRAWL_PROXY)")
        return None
    held = None
    if credential:
        held = credentials.get(credential)
        if held is None:
            raise ConfigError(f"the proxy's {missing(credential)}")
    hosts = [h for h in no_proxy_for.split(",") if h.strip()]
    return parse_proxy(url, hosts, held)


class ProxyUnreachable(CrawlError):
    """The proxy does not accept connections (a process starting with it exits 1)."""


async def check_proxy(proxy: Proxy, timeout: float = 5.0) -> None:
    """``ProxyUnreachable`` naming the setting when the proxy refuses TCP connections (checked
    by a worker at start, so a wrong proxy is one line, not a crawl of failed fetches)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(proxy.host, proxy.port), timeout)
    except (OSError, TimeoutError) as exc:
        raise ProxyUnreachable(
            f"the proxy {proxy.url} (--proxy / STREAMCRAWL_PROXY) does not accept connections: "
            f"{type(exc).__name__}"
        ) from None
    writer.close()
    await writer.wait_closed()
