"""Asset discovery (agents/content/assets.py, agents/content/css.py): what a page and a
stylesheet need, by type, bounded against hostile input."""

from __future__ import annotations

import pytest

from streamcrawl.agents.content.assets import (
    ASSET_TYPES,
    MAX_PAGE_ASSETS,
    MAX_SRCSET_CANDIDATES,
    Asset,
    page_assets,
    srcset_urls,
    stylesheet_assets,
)
from streamcrawl.agents.content.css import (
    MAX_CSS_CHARS,
    MAX_CSS_REFS,
    CssRef,
    css_refs,
    rewrite_css,
)
from streamcrawl.agents.content.parse import parse_tree

ALL = frozenset(ASSET_TYPES)


def assets_of(html: str, types: frozenset[str] = ALL) -> list[Asset]:
    return page_assets(parse_tree(html).tree, types)


PAGE = """<html><head>
<link rel=stylesheet href="/s.css">
<link rel="shortcut icon" href="/favicon.ico">
<link rel=preload as=font href="/f.woff2" crossorigin>
<link rel=preload as=fetch href="/api.json">
<link rel=modulepreload href="/m.js">
<link rel=next href="/page2">
<script src="/app.js"></script>
<style>body { background: url("/bg.png") } @import 'more.css';</style>
</head><body>
<img src="/a.png" srcset="/a-2x.png 2x, /a-3x.png 3x">
<picture><source srcset="/p.webp" type="image/webp"><img src="/p.jpg"></picture>
<video src="/v.mp4" poster="/poster.jpg"><source src="/v.webm"><track src="/v.vtt"></video>
<audio src="/a.mp3"></audio>
<input type=image src="/button.png">
<div style="background-image: url(/div.png)"></div>
<a href="/other">not an asset</a>
<img src="data:image/png;base64,AAAA"><img src="#x"><img src="">
</body></html>"""


def test_page_assets_by_source_and_type() -> None:
    assert assets_of(PAGE) == [
        Asset("/s.css", "css"),
        Asset("/favicon.ico", "images"),
        Asset("/f.woff2", "fonts"),
        Asset("/m.js", "js"),
        Asset("/app.js", "js"),
        Asset("/bg.png", "images"),
        Asset("more.css", "css"),
        Asset("/a.png", "images"),
        Asset("/a-2x.png", "images"),
        Asset("/a-3x.png", "images"),
        Asset("/p.webp", "images"),
        Asset("/p.jpg", "images"),
        Asset("/poster.jpg", "images"),
        Asset("/v.mp4", "media"),
        Asset("/v.webm", "media"),
        Asset("/v.vtt", "media"),
        Asset("/a.mp3", "media"),
        Asset("/button.png", "images"),
        Asset("/div.png", "images"),
    ]


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        ({"css"}, ["/s.css", "more.css"]),
        ({"js"}, ["/m.js", "/app.js"]),
        ({"fonts"}, ["/f.woff2"]),
        (set(), []),
    ],
)
def test_only_the_crawls_types(types: set[str], expected: list[str]) -> None:
    assert [a.href for a in assets_of(PAGE, frozenset(types))] == expected


def test_each_href_once_first_type_wins() -> None:
    html = '<link rel=preload as=image href="/x"><img src="/x"><img src="/x">'
    assert assets_of(html) == [Asset("/x", "images")]


def test_no_tree_no_assets() -> None:
    assert page_assets(None, ALL) == []


@pytest.mark.parametrize(
    ("srcset", "expected"),
    [
        ("a.png 1x, b.png 2x", ["a.png", "b.png"]),
        ("a.png", ["a.png"]),
        ("a.png,b.png", ["a.png,b.png"]),  # a URL may hold commas: only a trailing one ends it
        ("a.png, b.png", ["a.png", "b.png"]),
        ("  ,, a.png 100w,\n b.png 200w  ", ["a.png", "b.png"]),
        ("a.png (junk, more) 2x, b.png", ["a.png", "b.png"]),  # commas in parentheses
        ("", []),
    ],
)
def test_srcset(srcset: str, expected: list[str]) -> None:
    assert srcset_urls(srcset) == expected


def test_srcset_of_ten_thousand_entries_is_bounded() -> None:
    srcset = ", ".join(f"/img/{i}.png {i + 1}w" for i in range(10_000))
    urls = assets_of(f'<img srcset="{srcset}">')
    assert len(urls) == MAX_SRCSET_CANDIDATES
    assert urls[0] == Asset("/img/0.png", "images")


def test_assets_per_page_are_bounded() -> None:
    html = "".join(f'<img src="/i/{i}.png">' for i in range(MAX_PAGE_ASSETS + 100))
    assert len(assets_of(html)) == MAX_PAGE_ASSETS


def test_stylesheet_refs() -> None:
    css = """
    @import "a.css";
    @import url(b.css) screen;
    @IMPORT url( 'c.css' );
    /* url(commented.png) @import "no.css"; */
    .x { background: url(bg.png) no-repeat; content: "url(not-a-ref.png)" }
    @font-face { font-family: F; src: url("f.woff2") format("woff2"), url(f.ttf); }
    .y { background: image-set("i1.png" 1x, url(i2.png) 2x); mask: URL(m.svg#frag) }
    .z { background: url(data:image/png;base64,AA==), url('#filter'), url() }
    """
    assert [(r.url, r.kind) for r in css_refs(css)] == [
        ("a.css", "import"),
        ("b.css", "import"),
        ("c.css", "import"),
        ("bg.png", "image"),
        ("f.woff2", "font"),
        ("f.ttf", "font"),
        ("i1.png", "image"),
        ("i2.png", "image"),
        ("m.svg#frag", "image"),
    ]


def test_stylesheet_assets_types() -> None:
    css = '@import "a.css"; @font-face { src: url(f.woff) } p { background: url(p.png) }'
    assert stylesheet_assets(css) == [
        Asset("a.css", "css"),
        Asset("f.woff", "fonts"),
        Asset("p.png", "images"),
    ]
    assert stylesheet_assets(css, frozenset({"fonts"})) == [Asset("f.woff", "fonts")]


def test_font_face_ends_with_its_block() -> None:
    css = "@font-face { src: url(a.woff); } p { background: url(p.png) }"
    assert [r.kind for r in css_refs(css)] == ["font", "image"]


def test_css_escapes_are_unescaped() -> None:
    assert [r.url for r in css_refs(r'p { background: url("a\"b.png") url(c\28 .png) }')] == [
        'a"b.png'
    ]
    assert [r.url for r in css_refs(r'p { background: url("sp\20 ace.png") }')] == ["sp ace.png"]


@pytest.mark.parametrize(
    "css",
    [
        "url(",
        "@import",
        '@import "unterminated',
        "/* unterminated url(a.png)",
        "url('a.png",
        "\\",
        "@font-face {{{{ }}}}}}}} url(x.png)",
        "image-set(((((( 'a.png'",
        "\x00\ud800 url(\ud800.png)",
    ],
)
def test_hostile_css_never_raises(css: str) -> None:
    css_refs(css)
    rewrite_css(css, lambda ref: "x")


def test_refs_per_stylesheet_are_bounded() -> None:
    css = "".join(f".c{i} {{ background: url(/i/{i}.png) }}\n" for i in range(MAX_CSS_REFS + 10))
    assert len(css_refs(css)) == MAX_CSS_REFS


def test_only_the_first_max_css_chars_of_a_huge_stylesheet_are_read() -> None:
    """The work is bounded by what is read (a count, not a time: timings belong in bench/)."""
    rule = "p { color: red }\n"
    early = "a { background: url(early.png) }"
    fill = rule * (MAX_CSS_CHARS // len(rule) + 1)
    css = early + fill + "a { background: url(late.png) }"
    assert css.index("late.png") > MAX_CSS_CHARS
    assert [r.url for r in css_refs(css)] == ["early.png"]


def test_rewrite_changes_only_the_urls() -> None:
    css = '@import "a.css";\n/* keep url(me) */ p{background:url( b.png )}\n.x{src:url("c")}'

    def new(ref: CssRef) -> str | None:
        return None if ref.url == "c" else "local/" + ref.url

    assert rewrite_css(css, new) == (
        '@import "local/a.css";\n/* keep url(me) */ p{background:url( local/b.png )}\n'
        '.x{src:url("c")}'
    )
    assert rewrite_css(css, lambda ref: None) == css


NASTY = ["http://x/a)b.png", "http://x/it's.png", "http://x/a(1).png", 'http://x/q"d', "a\\b",
         "http://x/new\nline", "http://x/sp ace", "plain/name.png"]  # fmt: skip


@pytest.mark.parametrize("url", NASTY)
@pytest.mark.parametrize(
    "css",
    ["p{background:url(old.png)}", "p{background:url( 'old.png' )}",
     'p{background:url("old.png")}', '@import "old.png";', "@import 'old.png' screen;",
     'p{background:image-set("old.png" 1x)}'],
)  # fmt: skip
def test_a_rewritten_reference_reads_back_as_it_was_given(css: str, url: str) -> None:
    """Whatever the answer holds (an absolute URL may hold a parenthesis or a quote), the
    rewritten text reads back as that URL, and the rule after it is intact."""
    text = rewrite_css(css + "a{color:red}", lambda ref: url)
    (ref,) = css_refs(text)
    assert ref.url == url.strip() and text.endswith(css[-1] + "a{color:red}")
    if url == "plain/name.png":
        assert text == css.replace("old.png", url) + "a{color:red}"  # nothing added
