"""One crawl's compiled rules: the policy plus its canonicalizer, scope, robots cache and
extractors.

Built once per crawl id (not per URL) so that regexes, options and parsed robots.txt files are
reused; both wirings keep one ``CrawlRules`` per crawl they serve.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.plugins.chain import Plugins, compile_plugins
from streamcrawl.agents.plugins.registry import Registry, installed
from streamcrawl.agents.policy.extractors import Compiled, compile_extractors
from streamcrawl.agents.policy.requests import RequestPlan
from streamcrawl.agents.policy.revisit import RevisitPolicy
from streamcrawl.agents.robots.rules import RobotsRules, product_token
from streamcrawl.agents.urls.canonical import Canonicalizer, CanonicalOptions
from streamcrawl.agents.urls.patterns import UrlPattern, compile_patterns
from streamcrawl.agents.urls.scope import Scope
from streamcrawl.schemas.records import CrawlPolicy, OriginState


@dataclass
class CrawlRules:
    """Compiled, reusable view of a ``CrawlPolicy``."""

    policy: CrawlPolicy
    canonicalizer: Canonicalizer
    scope: Scope
    token: str
    revisit: RevisitPolicy | None = None  # None: each URL is fetched once
    # What every request of the crawl carries, per origin (docs/requests.md).
    requests: RequestPlan = field(default_factory=lambda: RequestPlan(common={}))
    # What fills each page record's ``data`` (docs/extraction.md); none: ``data`` is null.
    extractors: tuple[Compiled, ...] = ()
    # The crawl's plugins, built, in its order (docs/plugins.md); ``plugins.missing``: the
    # error of one this process lacks (only with ``missing_ok``).
    plugins: Plugins = field(default_factory=Plugins)
    # ``--render-include`` compiled (docs/rendering.md); none: the mode alone decides.
    render_include: tuple[UrlPattern, ...] = ()
    _robots: OrderedDict[str, tuple[float, int | None, RobotsRules]] = field(
        default_factory=OrderedDict
    )
    robots_cache_size: int = 4096

    @classmethod
    def from_policy(
        cls, policy: CrawlPolicy, registry: Registry | None = None, *, missing_ok: bool = False
    ) -> CrawlRules:
        """``ConfigError`` (one line) if the policy's revisit bounds do not hold, a request
        option is one a crawl may not have (``agents/policy/requests.py``), an extractor is
        malformed (``agents/policy/extractors.py``), or a plugin is not in ``registry``
        (default: the installed entry points) or refuses its arguments
        (``agents/plugins/chain.py``). With ``missing_ok`` a plugin not installed is no error:
        the rules carry it in ``plugins.missing``."""
        try:
            revisit = RevisitPolicy.from_policy(policy)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        scope = Scope.from_policy(policy)
        extractors = compile_extractors(policy.extract)
        plugins = compile_plugins(
            policy.plugins,
            registry if registry is not None else installed(),
            taken=frozenset(e.name for e in extractors),
            missing_ok=missing_ok,
        )
        return cls(
            policy=policy,
            canonicalizer=Canonicalizer(CanonicalOptions.from_policy(policy)),
            scope=scope,
            token=product_token(policy.user_agent),
            revisit=revisit,
            requests=RequestPlan.from_policy(policy, scope),
            extractors=extractors,
            plugins=plugins,
            render_include=compile_patterns(policy.render_include, "--render-include"),
        )

    def render_included(self, url: str) -> bool:
        """Whether ``url`` matches one of the crawl's ``--render-include`` patterns."""
        return any(p.search(url) for p in self.render_include)

    def robots(self, state: OriginState) -> RobotsRules | None:
        """The parsed robots.txt cached in ``state``; ``None`` when it must be (re)fetched.

        With ``obey_robots`` off every origin gets allow-all rules without a fetch.
        """
        if not self.policy.obey_robots:
            return _ALLOW_ALL
        if state.robots_expires <= 0:
            return None
        cached = self._robots.get(state.origin)
        if cached is not None and cached[0] == state.robots_expires:
            self._robots.move_to_end(state.origin)
            return cached[2]
        rules = RobotsRules.from_response(state.robots_status, state.robots_body)
        self._robots[state.origin] = (state.robots_expires, state.robots_status, rules)
        if len(self._robots) > self.robots_cache_size:
            self._robots.popitem(last=False)
        return rules

    def robots_expired(self, state: OriginState, now: float) -> bool:
        return self.policy.obey_robots and state.robots_expires <= now

    def delay(self, state: OriginState) -> float:
        """Gap between request starts for the origin of ``state``."""
        return self.delay_for(self.robots(state) if self.policy.obey_robots else None)

    def delay_for(self, robots: RobotsRules | None) -> float:
        """max(policy delay, robots.txt Crawl-delay capped by ``max_crawl_delay``)."""
        delay = self.policy.delay
        if robots is not None:
            crawl_delay = robots.crawl_delay(self.policy.user_agent)
            if crawl_delay:
                delay = max(delay, min(crawl_delay, self.policy.max_crawl_delay))
        return delay


_ALLOW_ALL = RobotsRules.from_response(404, None)
