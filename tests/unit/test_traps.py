"""Crawl-trap shapes: session ids (removed from queries, refused in paths) and calendars."""

from __future__ import annotations

import pytest

from streamcrawl.agents.urls.canonical import canonicalize
from streamcrawl.agents.urls.scope import Scope
from streamcrawl.agents.urls.traps import calendar_out_of_range, session_in_path
from streamcrawl.schemas.records import CrawlPolicy

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://a.test/p?sid={TOKEN}&a=1", "http://a.test/p?a=1"),
        (f"http://a.test/p?PHPSESSID={TOKEN}", "http://a.test/p"),
        (f"http://a.test/p;jsessionid={TOKEN.upper()}?a=1", "http://a.test/p?a=1"),
        (f"http://a.test/p?ASPSESSIONIDQQGGGNCG={TOKEN}", "http://a.test/p"),
        ("http://a.test/p?sid=3", "http://a.test/p?sid=3"),  # not a token: kept
        (f"http://a.test/p?side={TOKEN}", f"http://a.test/p?side={TOKEN}"),
    ],
)
def test_session_ids_are_removed_from_queries_and_path_parameters(url: str, expected: str) -> None:
    assert canonicalize(url).url == expected
    assert canonicalize(expected).url == expected


@pytest.mark.parametrize(
    ("path", "trap"),
    [
        (f"/s/{TOKEN}/page", True),
        (f"/session/{TOKEN}/a/b", True),
        ("/(S(lit3py55t21z5v55vlm25s55))/page", True),
        (f"/sid={TOKEN}/page", True),
        (f"/s/{TOKEN}", False),  # last segment: a short link or an id, not a session
        (f"/post/{TOKEN}/comments", False),  # a token, but not under a session name
        ("/s/abcdefghijklmnopqrst/page", False),  # letters only: a slug
        ("/static/app.0123456789abcdef.js", False),
    ],
)
def test_session_id_in_path(path: str, trap: bool) -> None:
    assert session_in_path(path) is trap


@pytest.mark.parametrize(
    ("path", "query", "trap"),
    [
        ("/cal/2026-05", "", False),
        ("/cal/2021/05/", "", False),
        ("/cal/2020/12", "", True),
        ("/cal/2028-01-01", "", True),
        ("/events/20280101", "", True),
        ("/cal", "month=2040-01", True),
        ("/cal", "y=1999&m=5", True),
        ("/cal", "y=2025&m=5", False),
        ("/2009/05/a-dated-article", "", False),  # the path goes on after the date
        ("/archive/1999", "page=2", False),  # a year alone in a path may be an id
        ("/list", "page=2019", False),  # a number, not a year
        ("/cal", "year=2040", True),
        ("/item/123456", "", False),
    ],
)
def test_calendar_window(path: str, query: str, trap: bool) -> None:
    assert calendar_out_of_range(path, query, 2026) is trap


def test_scope_names_the_trap() -> None:
    scope = Scope.from_policy(CrawlPolicy(crawl_id="c", seeds=("http://a.test/",)))
    assert scope.check(f"http://a.test/s/{TOKEN}/page", 0) == "trap:session_id"
    assert scope.check("http://a.test/cal/1990-01", 0) == "trap:calendar"
    assert scope.check("http://a.test/cal/1990-01/notes", 0) is None
