"""A page's outlinks as its record lists them: canonical, deduplicated, bounded, with scope."""

from __future__ import annotations

import time

import pytest

from streamcrawl.agents.content.outlinks import PageLinks, page_links
from streamcrawl.agents.content.parse import parse_html
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import DEFAULT_PAGE_LINKS, CrawlPolicy, Outlink

PAGE = "https://example.com/dir/page.html"


def rules(**policy: object) -> CrawlRules:
    return CrawlRules.from_policy(
        CrawlPolicy(crawl_id="c", seeds=("https://example.com/",), **policy)  # type: ignore[arg-type]
    )


def links_of(
    html: str, depth: int = 0, header: tuple[str, ...] = (), **policy: object
) -> PageLinks:
    parsed = parse_html(html, PAGE)
    return page_links(parsed.links, header, rules(**policy), parsed.base, depth)


def test_canonical_text_rel_tag_and_scope() -> None:
    got = links_of(
        """<a href='../A?b=2&a=1#frag' rel='NoFollow ugc'> The  <i>first</i> </a>
        <a href=https://other.example/x>elsewhere</a>
        <area href=/map alt=' a map '><iframe src=/frame></iframe>
        <link rel=next href=/next>""",
        header=("https://example.com/from-header",),
    )
    assert got == PageLinks(
        (
            Outlink("https://example.com/A?a=1&b=2", "The first", ("nofollow", "ugc")),
            Outlink("https://other.example/x", "elsewhere", in_scope=False, scope_rule="host"),
            Outlink("https://example.com/map", "a map", tag="area"),
            Outlink("https://example.com/frame", tag="iframe"),
            Outlink("https://example.com/next", rel=("next",), tag="link"),
            Outlink("https://example.com/from-header", tag="header"),
        ),
        total=6,
        truncated=False,
    )


@pytest.mark.parametrize(
    ("policy", "depth", "rule"),
    [
        ({}, 0, None),
        ({"max_depth": 1}, 0, None),  # the link is admitted at the page's depth + 1
        ({"max_depth": 1}, 1, "depth"),
        ({"exclude": ("/private/",)}, 0, "exclude"),
        ({"include": ("/docs/",)}, 0, "include"),
        ({"max_path_depth": 2}, 0, "trap:path_depth"),
    ],
)
def test_in_scope_is_the_frontiers_own_check(
    policy: dict[str, object], depth: int, rule: str | None
) -> None:
    (link,) = links_of("<a href=/private/a/b>x</a>", depth, **policy).links
    assert (link.in_scope, link.scope_rule) == (rule is None, rule)


def test_deduplicated_by_canonical_url_at_the_first_position() -> None:
    got = links_of(
        """<a href=/a></a><a href=/b>b</a><a href='/a#top' rel='nofollow ugc'>second</a>
        <a href=https://EXAMPLE.com:443/a rel=ugc>third</a><a href=/b?utm_source=x>b again</a>"""
    )
    assert got.links == (
        # the first non-empty text; the rel tokens every occurrence has (the first has none)
        Outlink("https://example.com/a", "second"),
        Outlink("https://example.com/b", "b"),
    )
    assert got.total == 2 and not got.truncated


def test_rel_is_what_every_occurrence_of_the_url_has() -> None:
    got = links_of("<a href=/a rel='nofollow ugc'>1</a><a href=/a#x rel='ugc nofollow'>2</a>")
    assert got.links[0].rel == ("nofollow", "ugc")
    got = links_of("<a href=/a rel='nofollow ugc'>1</a><a href=/a#x rel=ugc>2</a>")
    assert got.links[0].rel == ("ugc",)  # followable through the second: not nofollow


def test_unsupported_and_invalid_hrefs_are_neither_listed_nor_counted() -> None:
    got = links_of(
        """<a href=mailto:a@example.com>m</a><a href='javascript:void(0)'>j</a>
        <a href='http://[bad/'>b</a><a href=tel:123>t</a><a href=/ok>ok</a>"""
    )
    assert [link.url for link in got.links] == ["https://example.com/ok"] and got.total == 1


def test_the_page_itself_is_listed() -> None:
    (link,) = links_of("<a href=page.html>this page</a>").links
    assert link.url == PAGE and link.text == "this page"


def test_bounded_first_n_in_document_order_with_total_and_truncated() -> None:
    html = "".join(f"<a href=/p{i % 40}>{i}</a>" for i in range(100))  # 40 distinct URLs
    got = links_of(html, max_page_links=10)
    assert [link.url for link in got.links] == [f"https://example.com/p{i}" for i in range(10)]
    assert got.total == 40 and got.truncated
    # a later occurrence of a listed URL still merges into its entry
    assert got.links[0].text == "0"
    exact = links_of(html, max_page_links=40)
    assert len(exact.links) == 40 and exact.total == 40 and not exact.truncated


def test_zero_lists_none_but_still_counts() -> None:
    got = links_of("<a href=/a>a</a><a href=/b>b</a>", max_page_links=0)
    assert got == PageLinks((), 2, True)


def test_no_links() -> None:
    assert links_of("<p>nothing</p>") == PageLinks((), 0, False)


def test_a_page_of_100k_links_lists_the_default_bound_and_counts_all() -> None:
    html = "".join(f"<a href=/l/{i} rel=nofollow>link {i}</a>" for i in range(100_000))
    parsed = parse_html(html, PAGE)
    t0 = time.process_time()
    got = page_links(parsed.links, (), rules(), parsed.base, 0)
    assert time.process_time() - t0 < 5.0
    assert len(got.links) == DEFAULT_PAGE_LINKS and got.total == 100_000 and got.truncated
    assert got.links[-1] == Outlink(
        f"https://example.com/l/{DEFAULT_PAGE_LINKS - 1}",
        f"link {DEFAULT_PAGE_LINKS - 1}",
        ("nofollow",),
    )


def test_links_of_hostile_markup_stay_within_their_bounds() -> None:
    rel = " ".join(f"t{i}" for i in range(50)) + " " + "z" * 100
    html = f"<a href=/x rel='{rel}'>{'word ' * 10_000}</a>"
    (link,) = links_of(html).links
    assert len(link.rel) == 8 and all(len(t) <= 32 for t in link.rel)
    assert len(link.text) <= 256
