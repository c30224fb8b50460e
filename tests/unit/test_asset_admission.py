"""Page assets in the frontier and its scope (docs/assets.md): their own budget, depth bound
and host rule; none of the page budget."""

from __future__ import annotations

import pytest

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.records import admitted_count, assets_count
from streamcrawl.agents.frontier.store import Changes, MemoryStore
from streamcrawl.agents.policy.assets import MAX_ASSET_DEPTH, asset_budget
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.urls.scope import Scope
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, UrlKind, UrlRef

ORIGIN = "http://a.test"


def rules(**kw: object) -> CrawlRules:
    base = {"crawl_id": "c", "seeds": (ORIGIN + "/",), "delay": 0.0, "assets": ("images",)}
    return CrawlRules.from_policy(CrawlPolicy(**{**base, **kw}))  # type: ignore[arg-type]


def refs(kind: UrlKind, *paths: str, depth: int = 1) -> tuple[UrlRef, ...]:
    return tuple(UrlRef(ORIGIN + p, depth, ORIGIN + "/", kind) for p in paths)


def admit(
    store: MemoryStore, r: CrawlRules, urls: tuple[UrlRef, ...], budget: int | None
) -> dict[str, tuple[str, str | None]]:
    ch = Changes(store)
    admission = Frontier().admit(
        ch, FrontierBatch(crawl_id="c", origin=ORIGIN, urls=urls), r, budget=budget
    )
    ch.commit()
    ended = {s.url: (str(s.state), s.last_error) for s in admission.statuses}
    return {**{e.url: ("queued", None) for _, e in admission.queued}, **ended}


def test_assets_take_none_of_the_page_budget_and_have_their_own() -> None:
    store = MemoryStore()
    r = rules(max_pages=2, max_assets=3)
    urls = refs("page", "/p1", "/p2", "/p3") + refs("asset", "/1.png", "/2.png")
    urls += refs("stylesheet", "/s.css") + refs("asset", "/4.png")
    got = admit(store, r, urls, budget=2)
    assert got == {
        ORIGIN + "/p1": ("queued", None),
        ORIGIN + "/p2": ("queued", None),
        ORIGIN + "/p3": ("cancelled", "max_pages"),
        ORIGIN + "/1.png": ("queued", None),
        ORIGIN + "/2.png": ("queued", None),
        ORIGIN + "/s.css": ("queued", None),
        ORIGIN + "/4.png": ("cancelled", "max_assets"),
    }
    assert (admitted_count(store, "c"), assets_count(store, "c")) == (2, 3)
    # The asset budget is the crawl's: a later batch finds it spent.
    assert admit(store, r, refs("asset", "/5.png"), budget=0) == {
        ORIGIN + "/5.png": ("cancelled", "max_assets")
    }


def test_asset_budget_defaults_to_ten_per_page_or_none() -> None:
    assert asset_budget(CrawlPolicy(crawl_id="c", max_pages=7)) == 70
    assert asset_budget(CrawlPolicy(crawl_id="c", max_pages=7, max_assets=2)) == 2
    assert asset_budget(CrawlPolicy(crawl_id="c")) is None


def test_assets_ignore_max_depth_and_end_past_their_own_depth_bound() -> None:
    store = MemoryStore()
    r = rules(max_depth=0)
    got = admit(store, r, refs("asset", "/a.png", depth=MAX_ASSET_DEPTH), None)
    got |= admit(store, r, refs("stylesheet", "/deep.css", depth=MAX_ASSET_DEPTH + 1), None)
    got |= admit(store, r, refs("page", "/page", depth=1), None)
    assert got == {
        ORIGIN + "/a.png": ("queued", None),
        ORIGIN + "/deep.css": ("out_of_scope", "depth"),
        ORIGIN + "/page": ("out_of_scope", "depth"),
    }


@pytest.mark.parametrize(
    ("asset_hosts", "url", "reason"),
    [
        (None, "http://cdn.test/a.png", None),  # default: any host
        ((), "http://cdn.test/a.png", "host"),  # the crawl's own hosts only
        ((), "http://a.test:8080/a.png", None),  # scope compares hosts, not ports
        (("cdn.test",), "http://cdn.test/a.png", None),
        (("cdn.test",), "http://www.cdn.test/a.png", None),  # "www." as for allow_hosts
        (("cdn.test",), "http://other.test/a.png", "host"),
        (None, "http://cdn.test/private/a.png", "exclude"),
        (None, "http://cdn.test/" + "x" * 3000, "trap:url_length"),
        (None, "http://cdn.test/a/a/a/a/a.png", None),  # no path traps for assets
    ],
)
def test_asset_scope(asset_hosts: tuple[str, ...] | None, url: str, reason: str | None) -> None:
    policy = CrawlPolicy(
        crawl_id="c",
        seeds=(ORIGIN + "/",),
        include=("^http://a\\.test/docs/",),  # written for pages: not applied to assets
        exclude=("/private/",),
        asset_hosts=asset_hosts,
    )
    assert Scope.from_policy(policy).check_asset(url) == reason
