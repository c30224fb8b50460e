"""agents.content.link_header: RFC 8288 Link headers, hostile values included."""

from __future__ import annotations

import pytest

from streamcrawl.agents.content.link_header import HeaderLinks, header_links, page_rels

URL = "https://example.com/dir/page?x=1"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("</a>; rel=next", [("/a", {"next"})]),
        (
            '</a>; rel="next prev", <b>; rel=canonical',
            [("/a", {"next", "prev"}), ("b", {"canonical"})],
        ),
        (
            '<https://e.com/x>; title="a, b; c"; rel="Canonical"',
            [("https://e.com/x", {"canonical"})],
        ),
        ("</a>; rel=next; rel=prev", [("/a", {"next"})]),  # only the first rel counts
        ("</a>; title=x", []),  # no rel
        ("<>; rel=next", []),
        ("garbage, ; rel=next", []),
        ('</a>; rel="next', [("/a", {"next"})]),  # an unclosed quote ends with the value
        ('</a>; title="x, y"; rel=next, </b>; rel=prev', [("/a", {"next"}), ("/b", {"prev"})]),
    ],
)
def test_header_links(value: str, expected: list[tuple[str, set[str]]]) -> None:
    assert [(t, set(r)) for t, r in header_links(value)] == expected


def test_page_rels_resolves_and_picks_canonical_and_next() -> None:
    headers = {
        "link": '</c>; rel=canonical, <../n>; rel=next, <p2>; rel="prev nofollow", '
        "<//other.org/x>; rel=canonical, <style.css>; rel=stylesheet"
    }
    assert page_rels(headers, URL) == HeaderLinks(
        "https://example.com/c", ["https://example.com/n"]
    )
    assert page_rels({}, URL) == HeaderLinks(None, [])


def test_hostile_link_header_values() -> None:
    # Each would take minutes with a backtracking regex that rescans after every "<" or quote.
    assert list(header_links("<" * 100_000)) == []
    assert [t for t, _ in header_links('<a>; rel="' + "\\\\" * 50_000)] == ["a"]
    assert list(header_links("<a>" + ";" * 100_000 + "rel=next")) == []  # past the size cap
    many = ", ".join(f"</p{i}>; rel=next" for i in range(20_000))
    assert len(list(header_links(many))) == 3332  # the links in the first 64 KiB
