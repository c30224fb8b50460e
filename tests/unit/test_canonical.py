"""agents.urls.canonical: a table of (input, base) -> canonical URL cases, rejects, properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.urls.canonical import (
    DEFAULT_OPTIONS,
    Canonical,
    Canonicalizer,
    CanonicalOptions,
    canonicalize,
    origin_of,
)
from streamcrawl.schemas.records import CrawlPolicy

BASE = "http://example.com/a/b/c?q=1"

# (url, base, expected canonical URL)
CASES: list[tuple[str, str | None, str]] = [
    # the brief's example: scheme, host, default port, dots, sorted query, fragment
    ("HTTP://Example.COM:80/a/./b/../c?b=2&a=1#x", None, "http://example.com/a/c?a=1&b=2"),
    # scheme and host case
    ("https://WWW.Example.Com/Path", None, "https://www.example.com/Path"),
    ("hTTpS://example.com", None, "https://example.com/"),
    # IDN
    ("http://bücher.example/", None, "http://xn--bcher-kva.example/"),
    ("http://BÜCHER.example/", None, "http://xn--bcher-kva.example/"),
    ("http://xn--bcher-kva.example/", None, "http://xn--bcher-kva.example/"),
    ("http://пример.рф/путь", None, "http://xn--e1afmkfd.xn--p1ai/%D0%BF%D1%83%D1%82%D1%8C"),
    ("http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\u3002com/", None, "http://example.com/"),
    ("http://💩.la/", None, "http://xn--ls8h.la/"),  # IDNA2003 fallback, as browsers resolve it
    ("http://ex%41mple.com/", None, "http://example.com/"),  # percent-encoded host
    # trailing dot and underscores
    ("http://example.com./", None, "http://example.com/"),
    ("http://my_site.example.com/", None, "http://my_site.example.com/"),
    # IPv4
    ("http://127.0.0.1", None, "http://127.0.0.1/"),
    ("http://127.0.0.1:8080/x", None, "http://127.0.0.1:8080/x"),
    ("http://0x7f.1/", None, "http://127.0.0.1/"),
    ("http://2130706433/", None, "http://127.0.0.1/"),
    ("http://0177.0.0.1/", None, "http://127.0.0.1/"),
    # IPv6
    ("http://[::1]:8080/", None, "http://[::1]:8080/"),
    ("http://[0:0:0:0:0:0:0:1]/", None, "http://[::1]/"),
    ("http://[2001:DB8::A]:80/", None, "http://[2001:db8::a]/"),
    # ports
    ("http://example.com:80/", None, "http://example.com/"),
    ("https://example.com:443/", None, "https://example.com/"),
    ("http://example.com:443/", None, "http://example.com:443/"),
    ("https://example.com:80/", None, "https://example.com:80/"),
    ("http://example.com:08080/", None, "http://example.com:8080/"),
    ("http://example.com:/", None, "http://example.com/"),
    # percent-encoding
    ("http://example.com/%7euser", None, "http://example.com/~user"),
    ("http://example.com/%41%42c", None, "http://example.com/ABc"),
    ("http://example.com/a%2fb", None, "http://example.com/a%2Fb"),
    ("http://example.com/a%2Fb", None, "http://example.com/a%2Fb"),
    ("http://example.com/a b", None, "http://example.com/a%20b"),
    ("http://example.com/café", None, "http://example.com/caf%C3%A9"),
    ("http://example.com/%c3%a9", None, "http://example.com/%C3%A9"),
    ("http://example.com/100%", None, "http://example.com/100%25"),
    ("http://example.com/%zz%4", None, "http://example.com/%25zz%254"),
    ("http://example.com/a|b^c[d]", None, "http://example.com/a%7Cb%5Ec%5Bd%5D"),
    ("http://example.com/!$&'()*+,;=:@", None, "http://example.com/!$&'()*+,;=:@"),
    ("http://example.com/?q=a b&r=é", None, "http://example.com/?q=a%20b&r=%C3%A9"),
    ("http://example.com/?q=%2b+x", None, "http://example.com/?q=%2B+x"),
    # dot segments
    ("http://example.com/a/b/../../..", None, "http://example.com/"),
    ("http://example.com/a/./b/.", None, "http://example.com/a/b/"),
    ("http://example.com/a/b/..", None, "http://example.com/a/"),
    ("http://example.com/a/%2E%2E/b", None, "http://example.com/b"),
    ("http://example.com/.hidden/x", None, "http://example.com/.hidden/x"),
    ("http://example.com/a//b", None, "http://example.com/a//b"),
    # empty path, fragment, empty query
    ("http://example.com", None, "http://example.com/"),
    ("http://example.com/p#frag", None, "http://example.com/p"),
    ("http://example.com/p?", None, "http://example.com/p"),
    ("http://example.com/p?#f", None, "http://example.com/p"),
    ("http://example.com/p?&&", None, "http://example.com/p"),
    # tracking parameters
    ("http://example.com/?utm_source=x&utm_medium=y", None, "http://example.com/"),
    ("http://example.com/?id=1&gclid=z&fbclid=w", None, "http://example.com/?id=1"),
    ("http://example.com/?utm%5Fsource=x&id=1", None, "http://example.com/?id=1"),
    ("http://example.com/?UTM_SOURCE=x", None, "http://example.com/?UTM_SOURCE=x"),
    ("http://example.com/?xutm_source=1", None, "http://example.com/?xutm_source=1"),
    # sorted query, stable for equal keys, blank values kept distinct
    ("http://example.com/?b=2&a=1&c=3", None, "http://example.com/?a=1&b=2&c=3"),
    ("http://example.com/?a=2&b=0&a=1", None, "http://example.com/?a=2&a=1&b=0"),
    ("http://example.com/?b&a=", None, "http://example.com/?a=&b"),
    ("http://example.com/?a&a=", None, "http://example.com/?a&a="),
    ("http://example.com/?a=1&&b=2", None, "http://example.com/?a=1&b=2"),
    # whitespace and control characters, as browsers do
    ("  http://example.com/a \n", None, "http://example.com/a"),
    ("http://exa\tmple.com/a\nb\r", None, "http://example.com/ab"),
    ("http:\\\\example.com\\a\\b?x=\\", None, "http://example.com/a/b?x=%5C"),
    ("http://example.com/\x00\x7f", None, "http://example.com/%00%7F"),
    ("http://example.com/\ud800", None, "http://example.com/%EF%BF%BD"),  # lone surrogate
    # relative resolution (RFC 3986 5.4 style)
    ("d", BASE, "http://example.com/a/b/d"),
    ("./d/", BASE, "http://example.com/a/b/d/"),
    ("../d", BASE, "http://example.com/a/d"),
    ("../../../../d", BASE, "http://example.com/d"),
    ("/d?y=2", BASE, "http://example.com/d?y=2"),
    ("?y=2", BASE, "http://example.com/a/b/c?y=2"),
    ("#frag", BASE, "http://example.com/a/b/c?q=1"),
    ("", BASE, "http://example.com/a/b/c?q=1"),
    ("//Other.org/p", BASE, "http://other.org/p"),
    ("//other.org", "https://example.com/", "https://other.org/"),
    ("https://elsewhere.net/x", BASE, "https://elsewhere.net/x"),
    (".", BASE, "http://example.com/a/b/"),
    ("..", BASE, "http://example.com/a/"),
    ("x", "http://example.com", "http://example.com/x"),
    ("a b:c", BASE, "http://example.com/a/b/a%20b:c"),  # not a scheme: a relative path
    ("\\\\other.org\\p", BASE, "http://other.org/p"),
    # WHATWG special-scheme quirks: what browsers resolve these to
    ("http:/other.org/x", None, "http://other.org/x"),
    ("http:/x", BASE, "http://example.com/x"),  # same scheme as the base: a path
    ("http:x", BASE, "http://example.com/a/b/x"),
    ("https:x", BASE, "https://x/"),  # another scheme: x is the host
    ("http:path", None, "http://path/"),
    ("http:///path", None, "http://path/"),
    ("///other.org/p", BASE, "http://other.org/p"),
    ("/\\other.org\\p", BASE, "http://other.org/p"),
    ("http://@example.com/", None, "http://example.com/"),  # empty userinfo is dropped
    ("http://:@example.com/", None, "http://example.com/"),
    ("http://example.com/?a='b'", None, "http://example.com/?a=%27b%27"),  # as sent
    ("http://example.com/?a=%27b%27", None, "http://example.com/?a=%27b%27"),
    ('http://example.com/?q="<>"', None, "http://example.com/?q=%22%3C%3E%22"),
    ("h\ttt\np://example.com/\r", None, "http://example.com/"),
    ("http://example.com/%2e%2E/a/%2e/b", None, "http://example.com/a/b"),
]


@pytest.mark.parametrize(("url", "base", "expected"), CASES)
def test_canonicalize(url: str, base: str | None, expected: str) -> None:
    result = canonicalize(url, base)
    assert result.url == expected
    assert result.origin == origin_of(expected)


FOLD = CanonicalOptions(fold_trailing_slash=True)


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("http://e.com/a/", CanonicalOptions(), "http://e.com/a/"),
        ("http://e.com/a/", FOLD, "http://e.com/a"),
        ("http://e.com/a//", FOLD, "http://e.com/a"),
        ("http://e.com/", FOLD, "http://e.com/"),
        ("http://e.com", FOLD, "http://e.com/"),
        ("http://e.com/a/?x=1", FOLD, "http://e.com/a?x=1"),
        ("http://e.com/a/b/..", FOLD, "http://e.com/a"),
        ("http://e.com/?b=1&a=2", CanonicalOptions(sort_query=False), "http://e.com/?b=1&a=2"),
        ("http://e.com/?utm_x=1", CanonicalOptions(strip_params=()), "http://e.com/?utm_x=1"),
        ("http://e.com/?sid=1&s=2", CanonicalOptions(strip_params=("sid",)), "http://e.com/?s=2"),
        (
            "http://e.com/?ref_a=1&ref=2",
            CanonicalOptions(strip_params=("ref_?",)),
            "http://e.com/?ref=2",
        ),
    ],
)
def test_options(url: str, options: CanonicalOptions, expected: str) -> None:
    assert canonicalize(url, options=options).url == expected


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("ftp://example.com/", None),
        ("mailto:someone@example.com", None),
        ("javascript:void(0)", BASE),
        ("data:text/html,hi", BASE),
        ("tel:+1555", BASE),
        ("file:///etc/passwd", None),
        ("http://user:pw@example.com/", None),
        ("http://user@example.com/", None),
        ("http://example.com:abc/", None),
        ("http://example.com:0/", None),
        ("http://example.com:70000/", None),
        ("http://example.com:\uff18\uff10/", None),  # non-ASCII digits
        ("http://" + "a" * 64 + ".com/", None),
        ("http://a.b.xn--pokxncvks/", None),  # punycode of characters UTS46 maps
        ("https://xn--/", None),
        ("http://user@example.com:80@x/", None),
        ("http://" + ".".join(["a" * 60] * 5) + "/", None),  # host > 253
        ("http://example.com/" + "a" * 2030, None),  # > 2048 after canonicalization
        ("http://example.com/" + "é" * 400, None),  # short input, long once encoded
        ("http://", None),
        ("http://:80/", None),
        ("http://./", None),
        ("http://a..b/", None),
        ("http://exa mple.com/", None),
        ("http://exa\x00mple.com/", None),
        ("http://a<b.com/", None),
        ("http://a%2Fb.com/", None),
        ("http://a\uff0fb.com/", None),  # fullwidth solidus maps to "/"
        ("http://999.0.0.1/", None),
        ("http://1.2.3.4.5/", None),
        ("http://08.1.1.1/", None),
        ("http://example.123/", None),
        ("http://[::1/", None),
        ("http://[::g]/", None),
        ("http://[::1]x/", None),
        ("http://[fe80::1%25eth0]/", None),
        ("relative/path", None),
        ("relative/path", "ftp://example.com/"),
        ("relative/path", "not a url"),
    ],
)
def test_rejects(url: str, base: str | None) -> None:
    with pytest.raises(InvalidURL):
        canonicalize(url, base)


def test_max_length_is_an_option() -> None:
    url = "http://e.com/" + "a" * 100
    assert canonicalize(url, options=CanonicalOptions(max_length=113)).url == url
    with pytest.raises(InvalidURL):
        canonicalize(url, options=CanonicalOptions(max_length=112))


def test_options_from_policy() -> None:
    policy = CrawlPolicy(
        crawl_id="c",
        strip_params=("sid",),
        sort_query=False,
        fold_trailing_slash=True,
        max_url_length=100,
    )
    assert CanonicalOptions.from_policy(policy) == CanonicalOptions(("sid",), False, True, 100)


def test_canonicalizer_caches_and_reraises() -> None:
    canon = Canonicalizer(cache_size=4)
    assert canon.canonicalize("d", BASE) == canonicalize("d", BASE)
    assert canon.try_canonicalize("mailto:x@y") is None
    for _ in range(2):  # the cached failure raises a fresh error each time
        with pytest.raises(InvalidURL, match="scheme"):
            canon.canonicalize("mailto:x@y")


def test_links_dedupes_skips_and_keeps_order() -> None:
    hrefs = [
        "/b",
        "mailto:a@b.c",
        "javascript:void(0)",
        "data:,x",
        "tel:1",
        "http://EXAMPLE.com/b#x",
        "/a?utm_source=z",
        "/b",
        "../../a",
        "https://other.org/",
        "http://exa mple.com/",
        "",
    ]
    assert [c.url for c in Canonicalizer().links(hrefs, BASE)] == [
        "http://example.com/b",
        "http://example.com/a",
        "https://other.org/",
        "http://example.com/a/b/c?q=1",
    ]


def test_links_with_an_invalid_base_keeps_absolute_hrefs() -> None:
    links = Canonicalizer().links(["/x", "http://e.com/y"], "mailto:x@y")
    assert links == [Canonical("http://e.com/y", "http://e.com")]


def test_links_folded_base_resolves_against_the_page_url() -> None:
    # With folding, the page's canonical URL differs from its address: resolve against the address.
    canon = Canonicalizer(CanonicalOptions(fold_trailing_slash=True))
    assert [c.url for c in canon.links(["x", "/y"], "http://e.com/dir/")] == [
        "http://e.com/dir/x",
        "http://e.com/y",
    ]


# ---------------------------------------------------------------------------- properties

_label = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_üé", min_size=1, max_size=12
)
_hosts = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"),
)
_pieces = st.characters(codec="utf-8", exclude_characters="#?") | st.sampled_from(
    ["%", "%2e", "%2E", "%7e", "%41", "/", "..", ".", "&", "=", "%zz", "\\", "\t"]
)
_chars = st.lists(_pieces, max_size=12).map("".join)
_urls = st.builds(
    lambda scheme, host, port, path, query, frag: f"{scheme}://{host}{port}/{path}{query}{frag}",
    st.sampled_from(["http", "https", "HTTP"]),
    _hosts,
    st.sampled_from(["", ":80", ":443", ":8080", ":"]),
    _chars,
    st.one_of(st.just(""), _chars.map(lambda q: "?" + q), st.just("?utm_source=1&b=&a")),
    st.one_of(st.just(""), _chars.map(lambda f: "#" + f)),
)
_options = st.builds(CanonicalOptions, sort_query=st.booleans(), fold_trailing_slash=st.booleans())


def _maybe(
    url: str, base: str | None = None, options: CanonicalOptions = DEFAULT_OPTIONS
) -> Canonical | None:
    try:
        return canonicalize(url, base, options)
    except InvalidURL:
        return None


@settings(max_examples=200, deadline=None)
@given(_urls, _options)
def test_idempotent_ascii_and_origin_prefix(url: str, options: CanonicalOptions) -> None:
    first = _maybe(url, options=options)
    if first is None:
        return
    assert canonicalize(first.url, options=options) == first
    assert first.url.isascii()
    assert first.url.startswith(first.origin)
    assert first.url[len(first.origin)] == "/"
    assert origin_of(first.url) == first.origin


@settings(max_examples=120, deadline=None)
@given(_chars, _urls)
def test_relative_results_are_canonical(href: str, base: str) -> None:
    result = _maybe(href, base)
    if result is not None:
        assert canonicalize(result.url) == result


_shared = Canonicalizer(cache_size=64)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_urls, _chars), st.sampled_from([None, BASE, "https://[::1]:8443/x/"]))
def test_cached_path_equals_uncached(url: str, base: str | None) -> None:
    expected = _maybe(url, base)
    assert _shared.try_canonicalize(url, base) == expected
    assert _shared.try_canonicalize(url, base) == expected  # now from the cache


@settings(max_examples=100, deadline=None)
@given(_urls)
def test_links_dedupes_variants(url: str) -> None:
    first = _maybe(url)
    if first is None:
        return
    variants = [url, first.url, first.url + "#frag", " " + url + "\n", url]
    assert Canonicalizer().links(variants, "http://base.example/") == [first]


# Pages whose base has a query, a fragment, a folder, a file, dot segments, a backslash, an
# escaped or uppercase part, a default port: each() keys path-relative hrefs by the folder.
_BASES = [
    "http://example.com/a/b/c.html?q=/x/y#/frag/z",
    "http://EXAMPLE.com:80/a/./b/../c/",
    "https://e.com/a%2fb/c%7E/d?x",
    "http://e.com\\\\a\\\\b",
    "http://e.com",
    "http://e.com/a;p=1/b;q",
    "http://e.com/%2e%2E/x/y",
    "https://[::1]:8443/x/y/",
    "http://e.com//a/b",  # a folder path of "//": glued to an href, never scheme-relative
]
_HREFS = st.one_of(
    _chars,
    st.sampled_from(
        [
            *("", "?q", "#f", " x", "\tx", "x\ty", "\\x", "a:b", "a/b:c", "p.html?x#y", "..", "."),
            *("./", "http:?q", "http:", "HTTP:#x", "https:?q", "http:x"),
            # each() cuts the fragment before its cache: the same URL as with it
            *("x #y", "x\t#y", "x\x01#y", " #y", "a#b#c", "?q#f", "//h#x", "http://h#x"),
            *("http://#x", "http://h:#x", "http://[::1#]", "x%#y", "http:#x", "a:b#c", "\\#x"),
            # each() keys these as origin + href, or folder + href, unless they are read
            # as scheme-relative once the parser has removed tabs and newlines
            *("/\t/h/x", "/\n/h", "/\\h", "//h/x", ".//x", "../..//x", "/a/../b", "x/../../y"),
        ]
    ),
    st.builds(lambda a, b: a + b, st.sampled_from(["", "./", "../", "x/", "a:", "?", "#"]), _chars),
    st.builds(lambda a, b: a + "#" + b, _chars, _chars),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_HREFS, max_size=8), st.sampled_from(_BASES))
def test_each_equals_canonicalize_against_the_page(hrefs: list[str], base: str) -> None:
    # Shared across examples, so that an href resolved against one page's folder is served
    # from the cache to another page: it must be the same URL the full base gives.
    got = list(_each.each(hrefs, base))
    assert got == [_maybe(href, base) for href in hrefs]


_each = Canonicalizer(cache_size=4096)


def test_each_resolves_against_the_folder_not_the_file() -> None:
    canon = Canonicalizer()
    first = list(canon.each(["p.html", "?x", "../q"], "http://e.com/a/b/one.html?s=/t"))
    again = list(canon.each(["p.html", "?x", "../q"], "http://e.com/a/b/two.html"))
    assert [c.url if c else None for c in first] == [
        "http://e.com/a/b/p.html",
        "http://e.com/a/b/one.html?x",
        "http://e.com/a/q",
    ]
    assert [c.url if c else None for c in again] == [
        "http://e.com/a/b/p.html",
        "http://e.com/a/b/two.html?x",
        "http://e.com/a/q",
    ]
