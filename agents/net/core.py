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
from streamcrawl.agents.net.other_origins import Lender, LocalLender, OtherOrigins, SlotOwner
from streamcrawl.agents.net.stages import SeenCheck, Stages
from streamcrawl.agents.render.browser import Renderer, RenderSettings


class CrawlCore:
    """Builds the stages of a process's dispatches from its ``Network``; both wirings get one.

    The process's one browser (``Renderer``) is built the first time a crawl asks for
    rendering, and stopped by ``close``."""

    def __init__(self, network: Network, render: RenderSettings | None = None) -> None:
        self.network = network
        self.render_settings = render
        self._renderer: Renderer | None = None

    def renderer(self) -> Renderer:
        """The process's renderer (built on first use; its browser starts on first render)."""
        if self._renderer is None:
            self._renderer = Renderer(self.render_settings)
        return self._renderer

    async def close(self) -> None:
        """Stop the browser, if one was started (a later ``renderer()`` starts another)."""
        if self._renderer is not None:
            await self._renderer.close()

    def stages(
        self,
        seen: SeenCheck,
        *,
        allow: Iterable[str] = (),
        render: bool = False,
        render_wait: float | None = None,
        owner: SlotOwner | None = None,
        lender: Lender | None = None,
    ) -> Stages:
        """The stages of this process, over a new HTTP session (``Stages.close`` closes it).
        ``allow``: addresses the guard also allows (an embedded crawl's own seeds); ``render``:
        the stages render pages (the crawl's ``--render`` is not ``never``); ``render_wait``
        (without ``render``): pages to render are handed to a render worker that has this long
        (the Kafka fetch worker: it never starts a browser); ``owner`` (with ``render``): the
        owner of every origin's slot (the embedded crawl's scheduler), which lends a render's
        subrequest another origin's slot (``agents/net/other_origins.py``; without it such a
        subrequest is refused); ``lender`` (with ``render``, instead of ``owner``): who lends it
        when the process owns no slot (the Kafka render worker: the origin's owner, over
        Kafka). Call it inside a running event loop."""
        allowed = tuple(allow)
        guard = self.network.guard.with_addresses(allowed) if allowed else self.network.guard
        session = make_session(
            guard=guard,
            limit=self.network.limit,
            resolver=self.network.resolver,
            proxy=self.network.proxy,
        )
        renderer = self.renderer() if render else None
        others = None
        if owner is not None:
            lender = LocalLender(owner)
        if renderer is not None and lender is not None:
            wait = renderer.settings.settle_timeout  # a subrequest's wait for another slot
            others = OtherOrigins(lender, session, self.network, wait)
        return Stages(session, seen, self.network, renderer, render_wait=render_wait, others=others)
