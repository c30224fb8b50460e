"""The offline copy's names and rewriting (agents/content/offline.py): safe, bounded file names;
only the references change."""

from __future__ import annotations

import pytest

from streamcrawl.agents.content.offline import (
    MAX_SEGMENT_CHARS,
    local_path,
    relative,
    rewrite_html,
)


@pytest.mark.parametrize(
    ("url", "page", "path"),
    [
        ("https://example.org/", True, "example.org/index.html"),
        ("https://example.org/a/b", True, "example.org/a/b.html"),
        ("https://example.org/a/b.htm", True, "example.org/a/b.htm"),
        ("https://example.org/a/", True, "example.org/a/index.html"),
        ("http://127.0.0.1:8080/s.css", False, "127.0.0.1_8080/s.css"),
        ("https://example.org/%7Efoo/a%20b.png", False, "example.org/_7Efoo/a_20b.png"),
        ("https://example.org/a.css?v=2", False, "example.org/a-269fc203.css"),
        ("https://example.org/img?id=1", False, "example.org/img-d9fc91d4"),
    ],
)
def test_local_path(url: str, page: bool, path: str) -> None:
    assert local_path(url, page=page) == path


def test_queries_give_distinct_names() -> None:
    assert local_path("https://e.org/a.css?v=1") != local_path("https://e.org/a.css?v=2")


def test_a_ten_thousand_character_name_is_shortened_and_distinct() -> None:
    a = local_path("https://e.org/" + "a" * 10_000 + ".png")
    b = local_path("https://e.org/" + "a" * 9_999 + "b.png")
    assert a != b
    assert all(len(segment) <= MAX_SEGMENT_CHARS for segment in a.split("/"))
    assert a.endswith(".png")


def test_relative() -> None:
    assert relative("e.org/a/b.html", "e.org/s.css") == "../s.css"
    assert relative("e.org/index.html", "cdn.net/x/y.png") == "../cdn.net/x/y.png"


def test_rewrite_html_changes_only_the_references() -> None:
    page = (
        "<!doctype html><!-- <img src=commented.png> --><html><head>"
        "<link rel=stylesheet href='/s.css?x=1&amp;y=2'>"
        '<style>p { background: url("bg.png") }</style>'
        "<script>var s = '<img src=not-a-tag.png>';</script>"
        '</head><body class="k" data-x=1><img src=a.png srcset="a.png 1x, b.png 2x"'
        ' alt="A &amp; B">'
        '<a href="#top">top</a> <a href="mailto:x@y">mail</a> text &amp; more\n'
        '<div style="background:url(d.png)">x</div></body></html>'
    )
    seen: list[str] = []

    def new(href: str) -> str | None:
        seen.append(href)
        return None if href.startswith(("#", "mailto:")) else "L/" + href

    out = rewrite_html(page, new)
    assert seen == [
        "/s.css?x=1&y=2",  # unescaped
        "bg.png",
        "a.png",
        "a.png",
        "b.png",
        "#top",
        "mailto:x@y",
        "d.png",
    ]
    assert out == (
        "<!doctype html><!-- <img src=commented.png> --><html><head>"
        "<link rel=stylesheet href='L//s.css?x=1&amp;y=2'>"
        '<style>p { background: url("L/bg.png") }</style>'
        "<script>var s = '<img src=not-a-tag.png>';</script>"
        '</head><body class="k" data-x=1><img src="L/a.png" srcset="L/a.png 1x, L/b.png 2x"'
        ' alt="A &amp; B">'
        '<a href="#top">top</a> <a href="mailto:x@y">mail</a> text &amp; more\n'
        '<div style="background:url(L/d.png)">x</div></body></html>'
    )
    assert rewrite_html(page, lambda href: None) == page


@pytest.mark.parametrize(
    "page",
    ["<", "<a href='", '<img src="x', "<style>url(", "<!--", "<script", "\x00<a href=\ud800>"],
)
def test_hostile_html_never_raises(page: str) -> None:
    rewrite_html(page, lambda href: "x")
