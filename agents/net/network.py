"""The process's side of every request.

A crawl's spec says what its requests carry (``CrawlRules.requests``: headers, cookies, which
credential each origin gets, by name). The process says where requests may go and holds the
secrets: the SSRF guard, the DNS resolver, the egress proxy and the credentials. ``Network`` is
that process side; ``agents.net.core.CrawlCore`` builds the stages over it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.credentials import Credentials
from streamcrawl.agents.net.guard import AddressGuard
from streamcrawl.agents.net.proxy import Proxy
from streamcrawl.agents.net.request import RequestContext

if TYPE_CHECKING:
    from streamcrawl.agents.net.fetch import Resolver


@dataclass(frozen=True)
class Network:
    """Where this process's requests may go, how, and the secrets it holds.

    ``guard``: the SSRF guard (public addresses only, plus its allow-list); ``resolver``:
    aiohttp's DNS resolver (tests); ``proxy``: the egress proxy; ``credentials``: the values
    crawls name; ``limit``: connections in the pool.
    """

    guard: AddressGuard = field(default_factory=AddressGuard)
    credentials: Credentials = field(default_factory=lambda: Credentials(environ={}))
    proxy: Proxy | None = None
    resolver: Resolver | None = None
    limit: int = 100

    def request(self, d: Dispatch, *, credential: bool = True) -> RequestContext | str:
        """What the requests of ``d`` carry; a string: the one line that says which credential
        this process lacks (nothing may be sent to that origin)."""
        plan = d.rules.requests
        found = None
        name = plan.credentials.get(d.origin) if credential else None
        if name is not None:
            try:
                found = self.credentials.get(name)
            except ConfigError as exc:  # a malformed value: as good as missing, said why
                return str(exc)
            if found is None:
                return self.credentials.missing(name)
        jar = None
        if plan.cookies:
            presets = plan.presets.get(d.origin, ())
            # A cookie a response set replaces the preset of its name (RFC 6265 5.3, step 11).
            stored = {(c.name, c.domain, c.path) for c in d.cookies}
            jar = (*(c for c in presets if (c.name, c.domain, c.path) not in stored), *d.cookies)
        return RequestContext(
            origin=d.origin,
            headers=plan.headers_for(d.origin),
            credential=found,
            jar=jar,
            proxy=self.proxy,
        )
