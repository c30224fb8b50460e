"""The one factory of the stages both wirings run.

``CrawlCore`` builds, from the process's ``Network`` (SSRF guard, resolver, proxy, credentials),
the HTTP session and the ``Stages`` of every dispatch; each dispatch's requests then follow its
crawl's compiled rules (``CrawlRules``: headers, cookies, credential names). The embedded crawl
and the Kafka worker each receive a ``CrawlCore`` and never build a session or a stage
themselves.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamcrawl.agents.net.fetch import make_session
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.stages import SeenCheck, Stages


class CrawlCore:
    """Builds the stages of a process's dispatches from its ``Network``; both wirings get one."""

    def __init__(self, network: Network) -> None:
        self.network = network

    def stages(self, seen: SeenCheck, *, allow: Iterable[str] = ()) -> Stages:
        """The stages of this process, over a new HTTP session (``Stages.close`` closes it).
        ``allow``: addresses the guard also allows (an embedded crawl's own seeds). Call it
        inside a running event loop."""
        allowed = tuple(allow)
        guard = self.network.guard.with_addresses(allowed) if allowed else self.network.guard
        session = make_session(
            guard=guard,
            limit=self.network.limit,
            resolver=self.network.resolver,
            proxy=self.network.proxy,
        )
        return Stages(session, seen, self.network)
