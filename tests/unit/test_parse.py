"""Link and directive extraction from HTML, including hostile markup."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcrawl.agents.content.parse import (
    MAX_TITLE_CHARS,
    HtmlTree,
    Link,
    ParsedPage,
    parse_html,
    parse_tree,
)
from streamcrawl.schemas.records import MAX_ANCHOR_CHARS

URL = "https://example.com/dir/page.html"


def hrefs(html: str) -> list[str]:
    return [link.href for link in parse_html(html, URL).links]


def test_full_page() -> None:
    page = parse_html(
        """<!doctype html><html><head>
        <title>  Hello
           World </title>
        <base href="/base/">
        <link rel="canonical" href=" https://example.com/c ">
        <link rel="stylesheet" href="/s.css"><link rel="icon" href="/i.ico">
        <meta name="robots" content="noindex">
        </head><body>
        <a href="/a">a</a> <a href="b" rel="nofollow">b</a>
        <map><area href="/area" alt=""></map>
        </body></html>""",
        URL,
    )
    assert page == ParsedPage(
        title="Hello World",
        base="https://example.com/base/",
        links=[
            Link("/a", False, "a"),
            Link("b", True, "b", ("nofollow",)),
            Link("/area", False, tag="area"),
        ],
        canonical="https://example.com/c",
        meta_robots=frozenset({"noindex"}),
        meta_refresh=None,
    )


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ("<a href=' /x '>", ["/x"]),  # stripped
        ("<a href=''><a href='   '><a>", []),  # empty and missing
        ("<a href='#top'><a href='/p#top'>", ["/p#top"]),  # bare fragments are this page
        ("<a href=/1><a href=/2><a href=/1>", ["/1", "/2"]),  # dedup, first position wins
        ("<a href='javascript:void(0)'>", ["javascript:void(0)"]),  # the canonicalizer's job
        ("<link rel=next href=/n><link rel=prev href=/p><link rel=previous href=/pp>", None),
        ("<link rel=alternate hreflang=de href=/de>", ["/de"]),
        ("<link rel=alternate type='application/rss+xml' href=/feed>", []),
        ("<link rel=alternate type='text/html' href=/alt>", ["/alt"]),
        ("<link rel='alternate stylesheet' href=/alt.css>", []),
        ("<link rel=preload href=/font.woff2><link rel=manifest href=/m.json>", []),
        ("<img src=/i.png><script src=/s.js></script><embed src=/e>", []),
        ("<iframe src=/f></iframe><iframe srcdoc='x'></iframe>", ["/f"]),
        ("<frameset><frame src=/left><frame src=/right></frameset>", ["/left", "/right"]),
        ("<map><area href=/ar></map>", ["/ar"]),
    ],
)
def test_which_links(html: str, expected: list[str] | None) -> None:
    got = hrefs(html)
    assert got == (expected if expected is not None else ["/n", "/p", "/pp"])


@pytest.mark.parametrize(
    ("html", "nofollow"),
    [
        ("<a href=/x rel=nofollow>", True),
        ("<a href=/x rel='NoFollow noopener'>", True),
        ("<a href=/x rel='ugc'>", False),  # ugc/sponsored are ranking hints, not nofollow
        ("<a href=/x rel='sponsored'>", False),
        ("<a href=/x rel=nofollow><a href=/x>", False),  # one followable occurrence is enough
        ("<a href=/x rel=nofollow><a href=/x rel=nofollow>", True),
    ],
)
def test_nofollow(html: str, nofollow: bool) -> None:
    assert [(link.href, link.nofollow) for link in parse_html(html, URL).links] == [
        ("/x", nofollow)
    ]


@pytest.mark.parametrize(
    ("html", "base"),
    [
        ("<base href='https://cdn.example.org/x/'>", "https://cdn.example.org/x/"),
        ("<base href='../up/'>", "https://example.com/up/"),
        ("<base href='javascript:alert(1)'>", URL),  # not http(s): ignored
        ("<base href='http://[bad'>", URL),
        ("<base target=_blank><base href=/second/>", "https://example.com/second/"),
        ("<base href=/first/><base href=/second/>", "https://example.com/first/"),
        ("", URL),
    ],
)
def test_base(html: str, base: str) -> None:
    assert parse_html(html, URL).base == base


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ("<meta name=robots content='noindex, nofollow'>", {"noindex", "nofollow"}),
        ("<meta name=ROBOTS content='NONE'>", {"none", "noindex", "nofollow"}),
        ("<meta name=streamcrawl content='nofollow'>", {"nofollow"}),
        ("<meta name=googlebot content='noindex'>", set()),
        ("<meta name=robots content=noindex><meta name=streamcrawl content=nofollow>", None),
        ("<meta name=robots>", set()),
    ],
)
def test_meta_robots(html: str, expected: set[str] | None) -> None:
    want = expected if expected is not None else {"noindex", "nofollow"}
    assert parse_html(html, URL).meta_robots == want


def test_meta_robots_custom_token() -> None:
    page = parse_html("<meta name=mybot content=noindex>", URL, product_token="MyBot")
    assert page.meta_robots == {"noindex"}


@pytest.mark.parametrize(
    ("content", "url"),
    [
        ("5; url=/next", "/next"),
        ("0;URL='/quoted' ", "/quoted"),
        ("3;url=http://e.com/x", "http://e.com/x"),
        ("2, /comma", "/comma"),
        ("0; /bare", "/bare"),
        ("10", None),
        ("", None),
    ],
)
def test_meta_refresh(content: str, url: str | None) -> None:
    page = parse_html(f'<meta http-equiv="Refresh" content="{content}">', URL)
    assert page.meta_refresh == url
    assert [link.href for link in page.links] == ([url] if url else [])


def test_title_variants() -> None:
    assert parse_html("<p>no title", URL).title is None
    assert parse_html("<title>   </title>", URL).title is None
    assert parse_html("<title>a &amp; b</title><title>second</title>", URL).title == "a & b"
    assert parse_html("<title>" + "x" * 10_000, URL).title == "x" * MAX_TITLE_CHARS


# --- hostile input -----------------------------------------------------------------------


def test_nul_bytes_and_surrogates() -> None:
    assert hrefs("\x00<a href='/a\x00b'>\x00") == ["/a\ufffdb"]
    assert hrefs("\ud800<a href=/s>") == ["/s"]


def test_deep_nesting_is_cut_not_quadratic() -> None:
    html = "<a href=/first>" + "<div>" * 200_000 + "<a href=/deep>" + "</div>" * 10
    t0 = time.process_time()
    assert hrefs(html) == ["/first"]  # beyond MAX_DEPTH the page is not read
    assert time.process_time() - t0 < 2.0


@pytest.mark.parametrize(
    "html",
    [
        # Deep span nesting makes every later block start tag scan the whole stack.
        "<span>" * 50_000 + "<div></div>" * 50_000 + "<a href=/end>",
        "<section><b>" * 50_000 + "<a href=/end>",
    ],
)
def test_other_deep_shapes_are_cut(html: str) -> None:
    t0 = time.process_time()
    assert "/end" not in hrefs(html)
    assert time.process_time() - t0 < 2.0


def test_big_shallow_page_is_not_cut() -> None:
    item = "<div class=item><p>text<li>x<a href=/i{}>i</a><img src=/x.png><br></div>"
    script = "<script>for (var i=0;i<n;i++){if(a<b&&c<d){}}</script>"
    html = (
        "<html><body>"
        + "<div>" * 100
        + script * 2000
        + "".join(item.format(i) for i in range(5000))
        + "<p>unclosed" * 3000
        + "<a href=/last>"
    )
    got = hrefs(html)
    assert len(got) == 5001 and got[-1] == "/last"


def test_unclosed_and_broken_markup() -> None:
    html = "<a href=/1 <a href=/2><title>t<a href='/3><p><<>>><a href=/4 rel=nofollow"
    page = parse_html(html, URL)
    assert isinstance(page.links, list)


def test_ten_megabytes_of_garbage() -> None:
    garbage = os.urandom(10 * 1024 * 1024).decode("latin-1")
    t0 = time.process_time()
    assert isinstance(parse_html(garbage + "<a href=/end>", URL).links, list)
    assert time.process_time() - t0 < 5
    text = garbage.replace("<", " ").replace("&", " ")
    assert hrefs(text + "<a href=/end>") == ["/end"]


def test_many_links_are_kept() -> None:
    html = "".join(f"<a href=/{i}>" for i in range(20_000))
    assert len(hrefs(html)) == 20_000


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_any_text_never_raises(html: str) -> None:
    page = parse_html(html, URL)
    assert page.base.startswith("http")


TAGS = st.sampled_from(["a", "area", "link", "meta", "base", "title", "div", "svg", "template"])
ATTRS = st.sampled_from(["href", "rel", "name", "content", "http-equiv", "type"])
VALUES = st.sampled_from(
    ["", "/x", "nofollow", "robots", "refresh", "0;url=/r", "alternate", "#", "http://[x"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TAGS, st.lists(st.tuples(ATTRS, VALUES), max_size=3)), max_size=30))
def test_any_tag_soup_never_raises(nodes: list[tuple[str, list[tuple[str, str]]]]) -> None:
    html = "".join(
        f"<{tag} " + " ".join(f'{k}="{v}"' for k, v in attrs) + ">" for tag, attrs in nodes
    )
    page = parse_html(html, URL)
    assert len({link.href for link in page.links}) == len(page.links)


def test_feeds_are_collected_apart_from_links() -> None:
    page = parse_html(
        """<link rel=alternate type='application/rss+xml' href=' /rss.xml '>
        <link rel=alternate type='application/atom+xml; charset=utf-8' href=/atom>
        <link rel=alternate type='application/rss+xml' href=/rss.xml>
        <link rel='alternate nofollow' type='application/rss+xml' href=/private.xml>
        <link rel=alternate type='application/json' href=/feed.json>
        <a href=/a>""",
        URL,
    )
    assert page.feeds == ("/rss.xml", "/atom")
    assert [link.href for link in page.links] == ["/a"]


# --- what Page.links shows consumers: anchor text, rel tokens, tag ------------------------


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<a href=/x>  Hello \n\t <b>big</b>&nbsp;world </a>", "Hello big world"),
        ("<a href=/x><img src=/i.png alt=logo></a>", ""),  # the text content, not alt
        ("<a href=/x>caf&eacute; &amp; cr&egrave;me</a>", "café & crème"),
        ("<a href=/x>" + "w " * 1000 + "</a>", ("w " * 128).strip()),
        ("<a href=/x>" + " " * 10_000 + "late</a>", ""),  # read up to 16 x MAX_ANCHOR_CHARS
        ("<map><area href=/x alt='  Map\n area '></map>", "Map area"),
        ("<a href=/x></a><a href=/x>second</a>", "second"),  # the first non-empty occurrence
        ("<a href=/x>first</a><a href=/x>second</a>", "first"),
        ("<iframe src=/x>not text</iframe>", ""),
    ],
)
def test_anchor_text(html: str, text: str) -> None:
    (link,) = parse_html(html, URL).links
    assert link.text == text and len(link.text) <= MAX_ANCHOR_CHARS


@pytest.mark.parametrize(
    ("html", "rel"),
    [
        ("<a href=/x rel='NoFollow UGC sponsored'>", ("nofollow", "ugc", "sponsored")),
        ("<a href=/x rel='ugc ugc  noopener'>", ("ugc", "noopener")),
        ("<a href=/x>", ()),
        ("<a href=/x rel=''>", ()),
        ("<a href=/x rel='a b c d e f g h i j'>", tuple("abcdefgh")),  # MAX_REL_TOKENS
        ("<a href=/x rel='" + "y" * 33 + " ok'>", ("ok",)),  # tokens over MAX_REL_CHARS dropped
        # merged over occurrences: the tokens every one has
        ("<a href=/x rel='nofollow ugc'><a href=/x rel='ugc'>", ("ugc",)),
        ("<a href=/x rel=nofollow><a href=/x>", ()),
        ("<link rel=next href=/x>", ("next",)),
    ],
)
def test_rel_tokens(html: str, rel: tuple[str, ...]) -> None:
    (link,) = parse_html(html, URL).links
    assert link.rel == rel


def test_nofollow_counts_even_past_the_rel_token_bound() -> None:
    (link,) = parse_html("<a href=/x rel='a b c d e f g h nofollow'>", URL).links
    assert link.nofollow and "nofollow" not in link.rel


def test_each_link_names_its_tag() -> None:
    page = parse_html(
        """<meta http-equiv=refresh content='0; url=/r'><link rel=prev href=/l>
        <a href=/a>a</a><map><area href=/ar></map><iframe src=/i></iframe>
        <a href=/l>again</a>""",
        URL,
    )
    assert [(link.href, link.tag) for link in page.links] == [
        ("/r", "refresh"), ("/l", "link"), ("/a", "a"), ("/ar", "area"), ("/i", "iframe"),
    ]  # fmt: skip
    frames = parse_html("<frameset><frame src=/f></frameset>", URL).links
    assert [(link.href, link.tag) for link in frames] == [("/f", "frame")]
    assert page.links[1].text == "again"  # a later <a> gives the <link> its text


def test_100k_links_with_text_parse_in_bounded_time() -> None:
    html = "".join(f"<a href=/{i} rel=ugc>link {i}</a>" for i in range(100_000))
    t0 = time.process_time()
    links = parse_html(html, URL).links
    assert len(links) == 100_000 and links[-1] == Link("/99999", False, "link 99999", ("ugc",))
    assert time.process_time() - t0 < 5.0


def test_a_tree_parsed_once_serves_parse_html() -> None:
    """The stage parses a page once (``parse_tree``) for the links and the crawl's extractors:
    parse_html reads that tree, not the text, when given one."""
    html = "<title>T</title><a href=/a>A</a>"
    parsed = parse_tree(html, URL)
    assert parsed.tree is not None and parsed.tags == 4
    assert parse_html(html, URL, parsed=parsed) == parse_html(html, URL)
    other = parse_tree("<title>Other</title>", URL)
    assert parse_html(html, URL, parsed=other).title == "Other"  # the tree, not the text
    assert parse_html(html, URL, parsed=HtmlTree(None, 0)).links == []  # lexbor failed on it


def test_a_page_with_lone_surrogates_is_parsed() -> None:
    parsed = parse_tree("<title>a\udc80b</title>", URL)
    assert parsed.tree is not None
    title = parse_html("", URL, parsed=parsed).title
    assert title is not None and title[0] == "a" and title[-1] == "b"
