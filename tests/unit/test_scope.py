"""agents.urls.scope: one table per rule, plus registrable domains and configuration errors."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.urls.scope import Scope, registrable_domain
from streamcrawl.schemas.records import CrawlPolicy


def scope(**fields: Any) -> Scope:
    fields.setdefault("seeds", ("https://www.example.com/start",))
    return Scope.from_policy(CrawlPolicy(crawl_id="test", **fields))


# (policy fields, url, depth, expected reason or None)
CASES: list[tuple[dict[str, Any], str, int, str | None]] = [
    # default scope: the seeds' hosts, "www." ignored, any scheme and port
    ({}, "https://www.example.com/a", 0, None),
    ({}, "https://example.com/a", 0, None),
    ({}, "http://example.com:8080/a", 5, None),
    ({}, "https://sub.example.com/", 0, "host"),
    ({}, "https://example.org/", 0, "host"),
    ({}, "https://notexample.com/", 0, "host"),
    ({}, "https://example.com.evil.net/", 0, "host"),
    ({"seeds": ("http://example.com/",)}, "https://www.example.com/", 0, None),
    ({"seeds": ("http://Bücher.example/",)}, "http://xn--bcher-kva.example/x", 0, None),
    ({"seeds": ("http://127.0.0.1:8001/",)}, "http://127.0.0.1:8002/", 0, None),
    ({"seeds": ("http://127.0.0.1:8001/",)}, "http://127.0.0.2:8001/", 0, "host"),
    ({"seeds": ("http://[::1]:8001/",)}, "http://[::1]/a", 0, None),
    ({"seeds": ("http://[::1]:8001/",)}, "http://[::2]:8001/a", 0, "host"),
    # allow_hosts adds hosts (bare, with port, or as URLs)
    ({"allow_hosts": ("cdn.example.net",)}, "https://cdn.example.net/x", 0, None),
    ({"allow_hosts": ("cdn.example.net:8443",)}, "http://cdn.example.net/x", 0, None),
    ({"allow_hosts": ("https://CDN.example.net/",)}, "http://cdn.example.net:81/", 0, None),
    ({"allow_hosts": ("cdn.example.net",)}, "https://www.cdn.example.net/", 0, None),
    ({"allow_hosts": ("cdn.example.net",)}, "https://a.cdn.example.net/", 0, "host"),
    ({"allow_hosts": ("cdn.example.net",)}, "https://example.com/", 0, None),  # seeds stay
    # allow_domains adds whole (registrable) domains
    ({"allow_domains": ("example.co.uk",)}, "http://a.b.example.co.uk/", 0, None),
    ({"allow_domains": ("example.co.uk",)}, "http://example.co.uk/", 0, None),
    ({"allow_domains": ("example.co.uk",)}, "http://other.co.uk/", 0, "host"),
    ({"allow_domains": ("example.co.uk",)}, "http://badexample.co.uk/", 0, "host"),
    ({"allow_domains": ("blog.example.org",)}, "http://x.blog.example.org/", 0, None),
    ({"allow_domains": ("blog.example.org",)}, "http://example.org/", 0, "host"),
    ({"allow_domains": ("www.example.org",)}, "http://example.org/", 0, "host"),
    ({"allow_domains": ("пример.рф",)}, "http://a.xn--e1afmkfd.xn--p1ai/", 0, None),
    # depth: seeds are 0, depth > max_depth is out
    ({"max_depth": 2}, "https://example.com/", 2, None),
    ({"max_depth": 2}, "https://example.com/", 3, "depth"),
    ({"max_depth": 0}, "https://example.com/", 1, "depth"),
    ({"max_depth": None}, "https://example.com/", 10_000, None),
    # include / exclude: re.search on the canonical URL, exclude wins
    ({"exclude": (r"/private/",)}, "https://example.com/private/x", 0, "exclude"),
    ({"exclude": (r"\.pdf$",)}, "https://example.com/a.pdf", 0, "exclude"),
    ({"exclude": (r"\.pdf$",)}, "https://example.com/a.pdf.html", 0, None),
    ({"include": (r"/blog/", r"/news/")}, "https://example.com/news/1", 0, None),
    ({"include": (r"/blog/",)}, "https://example.com/shop/1", 0, "include"),
    (
        {"include": (r"/blog/",), "exclude": (r"draft",)},
        "https://example.com/blog/draft",
        0,
        "exclude",
    ),
    ({"include": (r"(?i)/BLOG/",)}, "https://example.com/blog/", 0, None),
    ({"include": (r"^https://",)}, "http://example.com/", 0, "include"),
    # trap: URL length
    ({"max_url_length": 40}, "https://example.com/" + "a" * 20, 0, None),
    ({"max_url_length": 40}, "https://example.com/" + "a" * 21, 0, "trap:url_length"),
    # trap: path depth counts non-empty segments
    ({"max_path_depth": 3}, "https://example.com/a/b/c", 0, None),
    ({"max_path_depth": 3}, "https://example.com/a/b/c/", 0, None),
    ({"max_path_depth": 3}, "https://example.com/a//b/c?x=/y/z", 0, None),
    ({"max_path_depth": 3}, "https://example.com/a/b/c/d", 0, "trap:path_depth"),
    # trap: a segment repeated max_segment_repeats times anywhere in the path
    ({}, "https://example.com/a/b/a/b/a/", 0, "trap:repeated_segment"),
    ({}, "https://example.com/a/b/a/b/", 0, None),
    ({}, "https://example.com/a/a/a", 0, "trap:repeated_segment"),
    ({}, "https://example.com/cal/2024/cal/x/cal", 0, "trap:repeated_segment"),
    ({}, "https://example.com/2024/01/01/01/", 0, "trap:repeated_segment"),
    ({}, "https://example.com/2024/01/01/", 0, None),
    ({}, "https://example.com/a//////b", 0, None),  # empty segments are not segments
    ({}, "https://example.com/a?x=a/a/a", 0, None),  # the query is not the path
    ({"max_segment_repeats": 2}, "https://example.com/a/b/a", 0, "trap:repeated_segment"),
    ({"max_segment_repeats": 5}, "https://example.com/a/a/a/a", 0, None),
    ({"max_segment_repeats": 1}, "https://example.com/a/a/a/a", 0, None),  # disabled
    # order: host before everything, depth before patterns and traps
    ({"max_depth": 0}, "https://other.org/", 5, "host"),
    ({"max_depth": 0, "exclude": ("x",)}, "https://example.com/x", 5, "depth"),
    ({"include": ("zzz",)}, "https://example.com/a/a/a", 0, "include"),
]


@pytest.mark.parametrize(("fields", "url", "depth", "expected"), CASES)
def test_check(fields: dict[str, Any], url: str, depth: int, expected: str | None) -> None:
    assert scope(**fields).check(url, depth) == expected


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_check_all_is_check_of_each_url(depth: int) -> None:
    # A page's links in one call: the same reasons as one check each, depth rule included.
    fields: dict[str, Any] = {"max_depth": 2, "exclude": ("/private",), "max_path_depth": 3}
    urls = [case[1] for case in CASES] + ["https://example.com/private/a", "https://a.b/"]
    one_by_one = scope(**fields)
    expected = [one_by_one.check(url, depth) for url in urls]
    s = scope(**fields)
    assert s.check_all(urls, depth) == expected
    assert s.check_all(urls, depth) == expected  # served from the cache


def test_several_seeds_are_all_in_scope() -> None:
    s = scope(seeds=("https://a.example/", "http://www.b.example:8080/x"))
    assert s.check("https://a.example/p", 1) is None
    assert s.check("https://b.example/p", 1) is None
    assert s.check("https://c.example/p", 1) == "host"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("a.b.example.co.uk", "example.co.uk"),
        ("example.co.uk", "example.co.uk"),
        ("www.example.com", "example.com"),
        ("example.com.", "example.com"),
        ("foo.github.io", "foo.github.io"),  # private section of the PSL
        ("a.xn--e1afmkfd.xn--p1ai", "xn--e1afmkfd.xn--p1ai"),
        ("co.uk", None),
        ("com", None),
        ("localhost", None),
        ("127.0.0.1", None),
        ("[::1]", None),
        ("", None),
    ],
)
def test_registrable_domain(host: str, expected: str | None) -> None:
    assert registrable_domain(host) == expected


@pytest.mark.parametrize(
    "fields",
    [
        {"seeds": ("mailto:x@example.com",)},
        {"seeds": ("http://exa mple.com/",)},
        {"allow_hosts": ("bad host",)},
        {"allow_domains": ("co.uk",)},
        {"allow_domains": ("com",)},
        {"allow_domains": ("127.0.0.1",)},
        {"allow_domains": ("bad domain",)},
        {"include": ("(",)},
        {"exclude": ("[a-",)},
    ],
)
def test_bad_policy_is_a_config_error(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        scope(**fields)


def test_cached_reasons_keep_the_depth_rule_and_its_order() -> None:
    # The reasons are cached per URL without the depth: the depth must still be checked after
    # the host and before every other rule, whatever depth the URL was first checked at.
    s = scope(max_depth=2, exclude=("/private",))
    for _ in range(2):  # the second pass is served from the cache
        assert s.check("https://example.com/private/a", 1) == "exclude"
        assert s.check("https://example.com/private/a", 3) == "depth"
        assert s.check("https://example.org/private/a", 3) == "host"
        assert s.check("https://example.com/a", 3) == "depth"
        assert s.check("https://example.com/a", 2) is None


def test_cached_calendar_reasons_move_with_the_year() -> None:
    # A calendar page of 2021 is inside the window in 2026 (five years back) and outside it
    # from 2027 on: a cache that outlives the year would keep calling it in scope.
    now = [datetime.datetime(2026, 12, 31, 23, 59, tzinfo=datetime.UTC).timestamp()]
    s = Scope(sites=frozenset({"example.com"}), clock=lambda: now[0])
    url = "https://example.com/cal/2021-05"
    assert s.check(url, 0) is None
    assert s.check(url, 0) is None
    now[0] += 120  # 2027-01-01
    assert s.check(url, 0) == "trap:calendar"
    now[0] -= 120  # a clock set back
    assert s.check(url, 0) is None
