"""Crawl plugins through both in-process wirings (``tests/wirings.py``), one test per kind, and
what a failing or missing plugin leaves (docs/plugins.md). The Kafka wiring against the real
broker, with the example package installed by entry point: test_plugins_kafka.py."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import CrawlPolicy, Extractor, PluginSpec, QueueEntry
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, html, redirect
from tests.plugin_fixtures import registry
from tests.wirings import WIRINGS, State, crawl_with_pages

pytestmark = pytest.mark.integration


def site() -> dict[str, object]:
    return {
        "/": html(
            "<h1>Home</h1><a href=/a>a</a><a href=/secret/b>b</a><a href=/drop>drop</a>"
            "<div data-href=/hidden></div><a href=/nf rel=nofollow>nf</a>"
            "<div data-href=/nf></div><div data-href=https://elsewhere.invalid/x></div>"
        ),
        "/a": html("<h1>A</h1><a href=/secret/c>c</a>"),
        "/secret/b": html("<h1>B</h1>"),
        "/secret/c": html("<h1>C</h1>"),
        "/drop": html("<h1>Drop</h1>"),
        "/hidden": html("<h1>Hidden</h1>"),
        "/nf": html("<h1>NF</h1>"),
    }


def policy(url: str, *plugins: PluginSpec, **fields: object) -> CrawlPolicy:
    return CrawlPolicy(
        crawl_id="p", seeds=(url,), delay=0.0, obey_robots=False, plugins=plugins, **fields
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_url_filter_ends_what_it_refuses_out_of_scope(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        spec = PluginSpec(name="no_word", args={"word": "secret"})
        states, _pages = await crawl_with_pages(
            wiring, policy(srv.url("/"), spec), tmp_path, 30, plugins=registry()
        )
    assert states[srv.url("/secret/b")].state == "out_of_scope"
    assert states[srv.url("/secret/b")].last_error == "no_word: has secret"
    assert states[srv.url("/secret/c")].state == "out_of_scope"
    assert states[srv.url("/a")].state == "fetched"
    assert "/secret/b" not in srv.paths()


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_redirect_hop_a_url_filter_refuses_ends_out_of_scope_with_its_reason(
    wiring: str, tmp_path: Path
) -> None:
    """A same-origin redirect to a URL the filter refuses stops the fetch there: the URL ends
    ``out_of_scope`` with the filter's reason, as at admission; a hop the built-in scope
    refuses keeps the scope's reason."""
    routes = {**site(), "/go": redirect("/secret/b", 302), "/away": redirect("/drop", 302)}
    async with RecordingServer(routes) as srv:  # type: ignore[arg-type]
        spec = PluginSpec(name="no_word", args={"word": "secret"})
        crawl = msgspec.structs.replace(
            policy(srv.url("/go"), spec, max_depth=0, exclude=(r"/drop$",)),
            seeds=(srv.url("/go"), srv.url("/away")),
        )
        states, pages = await crawl_with_pages(wiring, crawl, tmp_path, 30, plugins=registry())
    assert states[srv.url("/go")].state == "out_of_scope"
    assert states[srv.url("/go")].last_error == "no_word: has secret"
    assert states[srv.url("/away")] == State("out_of_scope", "exclude", 1, 0)  # the rule's name
    assert sorted(srv.paths()) == ["/away", "/go"] and pages == []


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_link_extractor_adds_and_drops_links(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        spec = PluginSpec(name="data_links")
        states, pages = await crawl_with_pages(
            wiring, policy(srv.url("/"), spec), tmp_path, 30, plugins=registry()
        )
    assert states[srv.url("/hidden")].state == "fetched"  # added: admitted like any link
    assert srv.url("/drop") not in states  # dropped: never sent to the frontier
    assert srv.url("/nf") not in states  # the page's nofollow holds, whatever the plugin says
    assert "https://elsewhere.invalid/x" in states  # added, then scope: out of it
    assert states["https://elsewhere.invalid/x"].state == "out_of_scope"
    home = next(p for p in pages if p.url == srv.url("/"))
    assert home.outlinks == 4 and home.plugin_errors == ()  # /a, /secret/b, /hidden, elsewhere


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_page_extractor_fills_data_under_its_name(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        extract = (Extractor(name="t", selector="h1"),)
        crawl = policy(srv.url("/"), PluginSpec(name="heading"), max_depth=0, extract=extract)
        _states, pages = await crawl_with_pages(wiring, crawl, tmp_path, 30, plugins=registry())
    assert [p.data for p in pages] == [{"t": "Home", "heading": {"h1": "Home", "before": 1}}]


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_plugin_that_fails_leaves_its_error_and_the_page_goes_out(
    wiring: str, tmp_path: Path
) -> None:
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        specs = (PluginSpec(name="raises"), PluginSpec(name="slow"), PluginSpec(name="heading"))
        crawl = policy(srv.url("/"), *specs, max_depth=0)
        states, pages = await crawl_with_pages(wiring, crawl, tmp_path, 30, plugins=registry())
    assert states[srv.url("/")].state == "fetched" and len(pages) == 1
    assert pages[0].plugin_errors == (
        "raises: ValueError: no luck on home",
        "slow: ran past its time budget of 0.01 s",
    )
    assert pages[0].data == {"heading": {"h1": "Home", "before": 0}}


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_url_filter_that_raises_admits(wiring: str, tmp_path: Path) -> None:
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        crawl = policy(srv.url("/"), PluginSpec(name="raising_filter"), max_depth=1)
        states, _pages = await crawl_with_pages(wiring, crawl, tmp_path, 30, plugins=registry())
    assert states[srv.url("/secret/b")].state == "fetched"


async def test_the_kafka_agents_end_a_crawl_whose_plugin_is_missing_failed(
    tmp_path: Path,
) -> None:
    """A worker that lacks a plugin neither refuses the spec nor crashes: it ends the crawl's
    URLs ``failed`` with ``missing_plugin`` (at admission: no request is sent)."""
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        crawl = policy(srv.url("/"), PluginSpec(name="not_here"))
        states, pages = await crawl_with_pages(
            "kafka-agents", crawl, tmp_path, 30, plugins=registry()
        )
    assert {u: (s.state, s.last_error) for u, s in states.items()} == {
        srv.url("/"): ("failed", "missing_plugin: not_here is not installed in this worker")
    }
    assert pages == [] and srv.paths() == []


async def test_a_replayed_dispatch_gives_the_same_record_byte_for_byte() -> None:
    """Plugins are deterministic (docs/plugins.md): an event handled twice, as a replay after
    a crash does, gives the same page record and the same links."""
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        specs = (
            PluginSpec(name="data_links"),
            PluginSpec(name="heading"),
            PluginSpec(name="raises"),
        )
        rules = CrawlRules.from_policy(policy(srv.url("/"), *specs), registry())
        stages = CrawlCore(Network(guard=LOOPBACK_GUARD)).stages(lambda _c, _u: False)
        entry = QueueEntry(crawl_id="p", url=srv.url("/"), depth=0)
        origin = srv.url("/").rstrip("/")
        try:
            reports = [await stages.run(Dispatch("page", origin, 0, entry, rules)) for _ in "ab"]
        finally:
            await stages.close()
    first, second = reports
    assert first.page is not None and second.page is not None
    assert first.page.plugin_errors and first.page.data
    fixed = {"fetched_at": 0.0, "elapsed_ms": 0.0, "headers": {}}  # the clock's, not a plugin's
    one, two = (msgspec.structs.replace(r.page, **fixed) for r in reports)  # type: ignore[arg-type]
    assert encode(one) == encode(two)
    assert [encode(b) for b in first.batches] == [encode(b) for b in second.batches]
