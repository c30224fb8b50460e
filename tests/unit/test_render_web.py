"""A render worker's web port (topology/worker/render_web.py) and its metrics
(agents/stream/render_metrics.py): what it rendered, how, and its browser, with no browser and
no Kafka here (tests/integration/test_render_kafka.py reads a real worker's port)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamcrawl.agents.render.browser import Renderer
from streamcrawl.agents.stream.render_metrics import RenderMetrics, render_result
from streamcrawl.schemas.records import Page
from streamcrawl.topology.worker import render_web


def page(**fields: object) -> Page:
    return Page(
        crawl_id="c",
        url="http://a.test/",
        final_url="http://a.test/",
        origin="http://a.test",
        status=200,
        headers={},
        content_type="text/html",
        charset=None,
        title=None,
        depth=0,
        fetched_at=1.0,
        elapsed_ms=1.0,
        body_sha256="0" * 64,
        body_bytes=1,
        outlinks=0,
        **fields,  # type: ignore[arg-type]
    )


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class Port:
    """A GET of the started endpoints."""

    def __init__(self, web: render_web.WebPort) -> None:
        self.port = web.port

    async def get(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.port}{path}") as resp,
        ):
            return resp.status, await resp.text()


@pytest.fixture
async def served() -> AsyncIterator[tuple[RenderMetrics, list[str | None], Port]]:
    metrics = RenderMetrics()
    why: list[str | None] = [None]
    unhealthy: Callable[[], str | None] = lambda: why[0]  # noqa: E731
    web = await render_web.start("127.0.0.1", 0, metrics, unhealthy)
    try:
        yield metrics, why, Port(web)
    finally:
        await web.stop()


async def test_metrics_count_renders_by_result(
    served: tuple[RenderMetrics, list[str | None], Port],
) -> None:
    metrics, _why, port = served
    status, text = await port.get("/metrics")
    assert status == 200
    before = samples(text)
    for result in ("browser", "render_timeout", "render_crash", "skipped"):
        assert before[("streamcrawl_render_pages_total", (("result", result),))] == 0
    metrics.rendered(page(render="browser", render_ms=900.0), 1.5)
    metrics.rendered(page(render_error="render_timeout: no DOM of http://a.test/ in time"), 20)
    metrics.skipped()
    after = samples((await port.get("/metrics"))[1])
    assert after[("streamcrawl_render_pages_total", (("result", "browser"),))] == 1
    assert after[("streamcrawl_render_pages_total", (("result", "render_timeout"),))] == 1
    assert after[("streamcrawl_render_pages_total", (("result", "skipped"),))] == 1
    assert after[("streamcrawl_render_seconds_count", ())] == 2
    assert after[("streamcrawl_render_seconds_sum", ())] == 21.5
    assert after[("process_cpu_seconds_total", ())] > 0


async def test_healthz_fails_while_the_worker_says_why(
    served: tuple[RenderMetrics, list[str | None], Port],
) -> None:
    _metrics, why, port = served
    assert await port.get("/healthz") == (200, "ok\n")
    why[0] = "render consumer stopped"
    assert await port.get("/healthz") == (503, "render consumer stopped\n")


def test_a_render_is_counted_by_how_its_page_was_read() -> None:
    assert render_result(page(render="browser")) == "browser"
    assert render_result(page(render_error="render_crash: browser failed: gone")) == "render_crash"
    assert render_result(page(render_error="render_timeout: no DOM")) == "render_timeout"
    assert render_result(page()) == "none"
    assert render_result(None) == "none"


def test_the_renderers_restarts_and_refusals_are_read_at_each_scrape() -> None:
    metrics = RenderMetrics()
    renderer = Renderer()
    metrics.watch(renderer)
    first = samples(metrics.render().decode())
    assert first[("streamcrawl_render_browser_restarts_total", ())] == 0
    assert first[("streamcrawl_render_browser_rss_bytes", ())] == 0  # no browser started
    refused = ("streamcrawl_render_subrequests_refused_total", (("reason", "cross_origin"),))
    assert first[refused] == 0
    renderer.launches = 3  # the first browser, then two replacements
    renderer.refused.update(["cross_origin", "cross_origin", "blocked"])
    later = samples(metrics.render().decode())
    assert later[("streamcrawl_render_browser_restarts_total", ())] == 2
    assert later[refused] == 2
    assert later[("streamcrawl_render_subrequests_refused_total", (("reason", "blocked"),))] == 1
    assert later[("streamcrawl_render_subrequests_refused_total", (("reason", "media"),))] == 0
