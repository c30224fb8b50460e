"""When a page is rendered (agents/policy/rendering.py), and how ``auto`` learns: the guess read
from the HTTP copy, the modes and ``--render-include``, the per-prefix tallies the frontier
keeps with the origin's state (agents/frontier/frontier.py: keep_render_tally)."""

from __future__ import annotations

import pytest

from streamcrawl.agents.frontier.frontier import keep_render_tally
from streamcrawl.agents.policy import rendering
from streamcrawl.agents.policy.rendering import Signals, decide, looks_client_built, signals
from streamcrawl.schemas.records import OriginState, Outcome, RenderTally

TEXT = "<p>" + "A paragraph of the page's own words. " * 10 + "</p>"


@pytest.mark.parametrize(
    ("html", "looks"),
    [
        ('<div id="root"></div><script src="/app.js"></script>', True),  # an app root
        ('<div id="__next"></div><script src="/_next/main.js"></script>', True),
        ("<div class=c></div><script src=/b.js></script>", True),  # near-empty, a script
        (f'<div id="app">{TEXT}</div><script src=/a.js></script>', True),  # app root, no link
        ("<div></div><script>document.body.append(build(data))</script>", True),  # inline code
        ("<p>moved</p><script>1</script><a href=/blog>blog</a>", False),  # trivial: cannot build
        (
            '<div></div><script type="application/ld+json">{"@type": "Thing", "name": "x"}'
            "</script>",
            False,
        ),  # a data block, not code
        ('<div></div><script type="module" src="/main.js"></script>', True),
        (f'<div id="app">{TEXT}<a href="/x">x</a></div><script>1</script>', False),
        (f"{TEXT}<script>analytics()</script><a href=/a>a</a>", False),  # text and a link
        ('<div id="root"></div>', False),  # no script: nothing a browser would add
        (f"{TEXT}<noscript>{TEXT}</noscript><script>1</script><a href=/a>a</a>", False),
        (f"<script>{TEXT * 3}</script><a href=/a>a</a>", True),  # script text is not text
    ],
)
def test_the_guess(html: str, looks: bool) -> None:
    assert looks_client_built(signals(html)) is looks


def test_signals_count_what_they_say() -> None:
    s = signals(f'<body><div data-reactroot=""></div>{TEXT}<a href=" /a ">a</a><a>no</a></body>')
    words = TEXT.removeprefix("<p>").removesuffix("</p>").strip() + " a no"  # joined by " "
    assert s == Signals(
        scripts=0, text_chars=len(words), links=1, app_root=True, hrefs=frozenset({"/a"})
    )


@pytest.mark.parametrize(
    ("url", "prefix"),
    [
        ("https://a.test/app/x/y", "/app/"),
        ("https://a.test/app/", "/app/"),
        ("https://a.test/app", "/"),
        ("https://a.test/", "/"),
        ("https://a.test/?q=1", "/"),
    ],
)
def test_path_prefix(url: str, prefix: str) -> None:
    assert rendering.path_prefix(url) == prefix


def never_rechecked(n: int = 0) -> str:
    url = next(
        f"https://a.test/p{i}"
        for i in range(n, 10_000)
        if not rendering.rechecked(f"https://a.test/p{i}")
    )
    return url


def test_the_modes_and_include() -> None:
    url = never_rechecked()
    assert not decide("never", url, included=True, any_include=True, looks=True)
    assert decide("always", url, included=False, any_include=False)
    assert not decide("always", url, included=False, any_include=True)
    assert decide("always", url, included=True, any_include=True)
    assert decide("auto", url, included=True, any_include=True, looks=False)
    assert decide("auto", url, included=False, any_include=False, looks=True)
    assert not decide("auto", url, included=False, any_include=False, looks=False)


def test_a_learned_prefix_overrides_the_guess_both_ways() -> None:
    url = never_rechecked()
    needed, not_needed = RenderTally(checked=3, needed=2), RenderTally(checked=4, needed=1)
    assert decide("auto", url, included=False, any_include=False, looks=False, tally=needed)
    assert not decide("auto", url, included=False, any_include=False, looks=True, tally=not_needed)
    young = RenderTally(checked=2, needed=0)  # too few compared: the guess still decides
    assert decide("auto", url, included=False, any_include=False, looks=True, tally=young)


def test_a_share_of_the_pages_not_rendered_is_rechecked() -> None:
    urls = [f"https://a.test/p{i}" for i in range(20_000)]
    rechecked = [u for u in urls if decide("auto", u, included=False, any_include=False)]
    assert abs(len(rechecked) / len(urls) - rendering.RECHECK) < 0.004
    assert rechecked == [u for u in urls if rendering.rechecked(u)]  # the same every time


def outcome(url: str, needed: bool | None) -> Outcome:
    return Outcome(
        crawl_id="c",
        origin="https://a.test",
        kind="page",
        seq=1,
        url=url,
        state="fetched",
        started_at=1.0,
        finished_at=2.0,
        render_needed=needed,
    )


def test_the_frontier_tallies_compared_renders_per_crawl_and_prefix() -> None:
    st = OriginState(origin="https://a.test")
    keep_render_tally(st, outcome("https://a.test/app/1", True))
    keep_render_tally(st, outcome("https://a.test/app/2", False))
    keep_render_tally(st, outcome("https://a.test/app/3", True))
    keep_render_tally(st, outcome("https://a.test/docs/1", None))  # not compared
    assert st.renders == {"c": {"/app/": RenderTally(checked=3, needed=2)}}


def test_tallies_are_bounded_per_origin() -> None:
    st = OriginState(origin="https://a.test")
    for i in range(rendering.MAX_PREFIXES + 10):
        keep_render_tally(st, outcome(f"https://a.test/s{i}/x", True))
    keep_render_tally(st, outcome("https://a.test/s0/y", False))
    assert len(st.renders["c"]) == rendering.MAX_PREFIXES
    assert st.renders["c"]["/s0/"] == RenderTally(checked=2, needed=1)


def test_a_render_loads_the_images_fonts_and_media_the_crawls_assets_ask_for() -> None:
    from streamcrawl.agents.net.subrequests import SUBREQUEST_TYPES, subrequest_types

    assert rendering.render_loads(()) == frozenset()
    assert rendering.render_loads(("css", "js")) == frozenset()  # loaded by every render
    assert rendering.render_loads(("images", "media")) == {"image", "media"}
    assert subrequest_types(frozenset()) == SUBREQUEST_TYPES
    taken = subrequest_types(frozenset({"image"}))
    assert "image/png" in taken and "font/woff2" not in taken and "video/mp4" not in taken
