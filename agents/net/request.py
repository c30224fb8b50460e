"""What the requests of one dispatch carry: the crawl's headers for the origin, its cookie jar,
its credential (to that origin only) and the process's proxy.

``Stages`` builds one ``RequestContext`` per dispatch; ``fetch`` and ``fetch_robots`` ask it for
each hop's headers and hand it each response, so that a cookie a redirect sets is sent on the
next hop. The context collects the ``Set-Cookie`` headers it saw (``set_cookies``), which the
outcome carries to the frontier: the single writer of the origin's stored jar.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import aiohttp

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.net.credentials import Credential
from streamcrawl.agents.net.proxy import Proxy
from streamcrawl.agents.urls.canonical import canonicalize
from streamcrawl.agents.urls.cookies import header_for, receive
from streamcrawl.schemas.records import Cookie, SetCookie

MAX_SET_COOKIES: Final = 256  # per fetch (Outcome.set_cookies' bound)
MAX_SET_COOKIE_CHARS: Final = 8_192
# Request headers whose values a WARC request record holds as REDACTED by default.
SECRET_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie"})


@dataclass
class RequestContext:
    """The requests of one dispatch to ``origin``.

    ``jar`` is ``None`` for a crawl without cookies; ``credential`` is sent only on requests
    whose origin is ``origin`` (never after a redirect elsewhere: those are not followed here,
    and the check is made again on every hop).
    """

    origin: str
    headers: Mapping[str, str]
    credential: Credential | None = None
    jar: tuple[Cookie, ...] | None = None
    proxy: Proxy | None = None
    set_cookies: list[SetCookie] = field(default_factory=list)

    def headers_for(self, url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The headers of a request to ``url``: the crawl's, ``extra`` (validators), the
        cookies that apply, the credential when ``url`` is of this context's origin."""
        headers = dict(self.headers)
        if extra:
            headers.update(extra)
        if self.jar:
            cookie = header_for(self.jar, url, time.time())
            if cookie is not None:
                headers["Cookie"] = cookie
        if self.credential is not None and _origin(url) == self.origin:
            headers[self.credential.header] = self.credential.value
        return headers

    def received(self, resp: aiohttp.ClientResponse, url: str) -> None:
        """Keep the ``Set-Cookie`` headers of ``resp`` (the response to ``url``) for the
        outcome, and in this fetch's copy of the jar for its next hop."""
        if self.jar is None:
            return
        headers = resp.headers.getall("Set-Cookie", ())
        if not headers or _origin(url) != self.origin:
            return  # none, or a robots.txt redirect to another origin: not this jar's to keep
        now = time.time()
        for header in headers:
            if len(header) > MAX_SET_COOKIE_CHARS or len(self.set_cookies) >= MAX_SET_COOKIES:
                continue
            self.jar = receive(self.jar, header, url, now)
            self.set_cookies.append(SetCookie(url=url, header=header))

    def secret_headers(self) -> frozenset[str]:
        """Lower-case names of the request headers that hold secrets (for the WARC)."""
        if self.credential is None:
            return SECRET_HEADERS
        return SECRET_HEADERS | {self.credential.header.lower()}

    def proxy_kwargs(self, url: str) -> dict[str, object]:
        """aiohttp's ``proxy``/``proxy_headers`` for a request to ``url``."""
        if self.proxy is None:
            return {}
        route = self.proxy.route(url)
        if route is None:
            return {}
        return {"proxy": route, "proxy_auth": self.proxy.auth}


def _origin(url: str) -> str | None:
    """The canonical origin of ``url`` (a redirect target as the server wrote it); ``None``
    when it has none: then no credential goes with it."""
    try:
        return canonicalize(url).origin
    except InvalidURL:
        return None
