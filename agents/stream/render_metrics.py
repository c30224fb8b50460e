"""Prometheus metrics of a render worker (``streamcrawl render-worker``), in a registry of its own.

A render worker runs no frontier, scheduler or sink, so it exports none of ``Metrics``' series:
what it rendered and how long that took (``streamcrawl_render_*``), what it could not decode
(``streamcrawl_kafka_bad_messages``), its browser (read from the ``Renderer`` at each scrape:
``RendererCollector``) and its own process (``process_*``). docs/operations.md, "Rendering",
lists them.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client import generate_latest as generate_text
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from streamcrawl.agents.errors import ErrorClass
from streamcrawl.agents.render.browser import Renderer
from streamcrawl.schemas.records import Page

# Label values exported at 0 from the start (as ``metrics.STATUS_CLASSES``).
RESULTS = ("browser", str(ErrorClass.RENDER_TIMEOUT), str(ErrorClass.RENDER_CRASH), "skipped")
REFUSALS = (
    "media",
    "method",
    "too_many",
    "navigation",
    "cross_origin",
    "scope",
    "robots",
    "slot_timeout",
)
CONSUMED_TOPICS = ("render", "control", "budget")
_SECONDS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)


class RenderMetrics:
    """Every metric of a render worker; ``watch`` adds its renderer's."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)
        self.pages = Counter(
            "streamcrawl_render_pages",
            "Render requests handled, by result: browser (the rendered DOM published), "
            "render_timeout and render_crash (the page's HTTP copy published), skipped (past "
            "its expires_at, or its crawl's spec never arrived: nothing published).",
            ["result"],
            registry=r,
        )
        self.seconds = Histogram(
            "streamcrawl_render_seconds",
            "Time to render and read one requested page, its subrequests included.",
            buckets=_SECONDS,
            registry=r,
        )
        self.bad_messages = Counter(
            "streamcrawl_kafka_bad_messages",
            "Undecodable messages skipped, by topic.",
            ["topic"],
            registry=r,
        )
        for result in RESULTS:
            self.pages.labels(result)
        for topic in CONSUMED_TOPICS:
            self.bad_messages.labels(topic)

    def watch(self, renderer: Renderer) -> None:
        """Export ``renderer``'s browser restarts, memory and refused subrequests."""
        self.registry.register(RendererCollector(renderer))

    def rendered(self, page: Page | None, seconds: float) -> None:
        """Count one render request served: its page record says how it was read."""
        self.pages.labels(render_result(page)).inc()
        self.seconds.observe(seconds)

    def skipped(self) -> None:
        self.pages.labels("skipped").inc()

    def render(self) -> bytes:
        """The text exposition format of every metric."""
        return generate_text(self.registry)


def render_result(page: Page | None) -> str:
    """``browser``, or the error class of the render's ``render_error``; ``none``: a record
    without either (no render stage should publish one)."""
    if page is not None and page.render == "browser":
        return "browser"
    error = page.render_error if page is not None else None
    kind = error.partition(":")[0] if error else ""
    return kind if kind in RESULTS else "none"


class RendererCollector(Collector):
    """The renderer's counts, read at each scrape (it knows nothing of Prometheus)."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        restarts = CounterMetricFamily(
            "streamcrawl_render_browser_restarts",
            "Browsers started to replace the one before: recycled after its renders, grown "
            "past its memory bound, crashed or closed.",
            value=max(0, self.renderer.launches - 1),
        )
        yield restarts
        yield GaugeMetricFamily(
            "streamcrawl_render_browser_rss_bytes",
            "Resident bytes of the browser's processes (0: none running).",
            value=self.renderer.rss(),
        )
        refused = CounterMetricFamily(
            "streamcrawl_render_subrequests_refused",
            "A rendered page's requests that were not served, by reason: the render's rules "
            "(media, method, too_many, navigation) or the crawl's (cross_origin, scope, robots, "
            "slot_timeout), or "
            "the fetch's error class (blocked, timeout, http_4xx...).",
            labels=["reason"],
        )
        counts = dict.fromkeys(REFUSALS, 0) | dict(self.renderer.refused)
        for reason, n in sorted(counts.items()):
            refused.add_metric([reason], n)
        yield refused
