"""The revisit policy (agents/policy/revisit.py): durations, sitemap lastmods, the interval
ladder, where a URL starts on it, how a revisit, a change or an error moves it, and the jitter of
its due time."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from streamcrawl.agents.policy.revisit import (
    FUTURE_SKEW,
    RATIO,
    RevisitPolicy,
    lastmod_forces,
    lastmod_time,
    parse_duration,
)
from streamcrawl.schemas.records import CrawlPolicy, UrlKind

HOUR = 3_600.0
DAY = 86_400.0
NOON = 1_714_564_800.0  # 2024-05-01T12:00:00Z


def revisit(**fields: Any) -> RevisitPolicy:
    policy = RevisitPolicy.from_policy(CrawlPolicy(crawl_id="c", **fields))
    assert policy is not None
    return policy


# after 1 h, min 2 m, max 1 d: feed minimum 30 s, ladder 30 s * 1.5**k (k = 0..19), then 1 d.
P = revisit(recrawl_after=HOUR, recrawl_min=120.0, recrawl_max=DAY)
FLOOR = 4  # 151.875 s: the lowest level of at least recrawl_min (227.8 s is level 5)
TOP = 20


def at(level: int) -> float:
    """The interval of ``level`` on P's ladder."""
    return DAY if level == TOP else 30.0 * RATIO**level


# --- durations and lastmod -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("250ms", 0.25),
        ("15m", 900.0),
        ("15M", 900.0),  # minutes, not months: there is no month unit
        ("2h", 7_200.0),
        ("1.5h", 5_400.0),
        ("1d", DAY),
        ("1w", 7 * DAY),
        (" 2 H \n", 7_200.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", " ", "h", "-5m", "1y", "1 hour", "1h30m", "1e3", "5mm", "abc"]
)
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2024-05-01", 1_714_521_600.0),  # a date: its midnight, UTC
        ("2024-05-01T12:30:00Z", NOON + 1_800),
        ("2024-05-01T12:30:00z", NOON + 1_800),
        ("2024-05-01T12:30Z", NOON + 1_800),  # W3C allows minutes without seconds
        ("2024-05-01T12:30:00.5Z", NOON + 1_800.5),
        ("2024-05-01T12:30:00+00:00", NOON + 1_800),
        ("2024-05-01T14:30:00+02:00", NOON + 1_800),
        ("2024-05-01T07:30:00-05:00", NOON + 1_800),
        ("2024-05-01T12:30:00", NOON + 1_800),  # no zone: UTC, not the local zone
        ("  2024-05-01T12:30:00Z\n", NOON + 1_800),
    ],
)
def test_lastmod_time(text: str, epoch: float) -> None:
    assert lastmod_time(text) == epoch


@pytest.fixture
def local_zone_not_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone 5 hours behind UTC, restored after the test."""
    monkeypatch.setenv("TZ", "EST+05")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("local_zone_not_utc")
def test_lastmod_without_a_zone_is_utc_whatever_the_local_zone() -> None:
    assert time.timezone == 5 * HOUR
    assert lastmod_time("2024-05-01T12:30:00") == NOON + 1_800
    assert lastmod_time("2024-05-01") == 1_714_521_600.0


@pytest.mark.parametrize(
    "text",
    [None, "", "   ", "garbage", "yesterday", "2024-13-01", "2024-02-30", "2024-05-01T25:00Z"],
)
def test_lastmod_time_unreadable(text: str | None) -> None:
    assert lastmod_time(text) is None


@pytest.mark.parametrize(
    ("lastmod", "forces"),
    [
        ("2024-05-01T12:30:00Z", True),  # newer than the fetch at noon
        ("2024-05-01T14:30:00+02:00", True),  # the same instant, another zone
        ("2024-05-01T11:00:00Z", False),  # older
        ("2024-05-01T12:00:00Z", False),  # the fetch's own second: not newer
        ("2024-05-01T13:00:00+02:00", False),  # 11:00 UTC: the offset is applied
        ("2024-05-01", False),  # midnight: before the fetch
        ("2024-05-02", False),  # a day ahead of the clock: a lie
        ("2024-05-01T13:04:59Z", True),  # ahead, within the clock skew
        ("2024-05-01T13:05:00Z", True),  # exactly FUTURE_SKEW ahead
        ("2024-05-01T13:05:01Z", False),  # beyond it
        ("not a date", False),
        (None, False),
    ],
)
def test_lastmod_forces(lastmod: str | None, forces: bool) -> None:
    now = NOON + HOUR
    assert FUTURE_SKEW == 300.0  # the table's 13:05 rows
    assert lastmod_forces(lastmod, fetched_at=NOON, now=now) is forces


# --- from_policy: bounds, defaults, ladder ---------------------------------------------------


def test_no_recrawl_after_means_no_revisits() -> None:
    assert RevisitPolicy.from_policy(CrawlPolicy(crawl_id="c")) is None
    bounds_alone = CrawlPolicy(crawl_id="c", recrawl_min=60.0, recrawl_max=DAY)
    assert RevisitPolicy.from_policy(bounds_alone) is None


@pytest.mark.parametrize(
    ("fields", "low", "high", "feed"),
    [
        ({"recrawl_after": HOUR}, 450.0, 14 * HOUR, 112.5),  # after / 8, x 14, min / 4
        ({"recrawl_after": HOUR, "recrawl_min": 120.0}, 120.0, 14 * HOUR, 30.0),
        ({"recrawl_after": HOUR, "recrawl_max": DAY}, 450.0, DAY, 112.5),
        ({"recrawl_after": HOUR, "recrawl_feed_min": 10.0}, 450.0, 14 * HOUR, 10.0),
        ({"recrawl_after": 4.0}, 1.0, 56.0, 1.0),  # never under one second
        ({"recrawl_after": 20.0}, 2.5, 280.0, 1.0),
        ({"recrawl_after": 60.0, "recrawl_min": 60.0, "recrawl_max": 60.0}, 60.0, 60.0, 15.0),
    ],
)
def test_defaults_of_the_bounds(
    fields: dict[str, float], low: float, high: float, feed: float
) -> None:
    policy = revisit(**fields)
    assert (policy.after, policy.min, policy.max, policy.feed_min) == (
        fields["recrawl_after"],
        low,
        high,
        feed,
    )


def test_the_spec_is_carried() -> None:
    policy = revisit(recrawl_after=HOUR, recrawl_jitter=0.25, retries=5, recrawl_mode="fixed")
    assert (policy.mode, policy.jitter, policy.retries) == ("fixed", 0.25, 5)


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({"recrawl_after": HOUR, "recrawl_min": 7_200.0}, "recrawl-min (7200 s)"),
        ({"recrawl_after": HOUR, "recrawl_max": 1_800.0}, "recrawl-max (1800 s)"),
        ({"recrawl_after": HOUR, "recrawl_min": 600.0, "recrawl_max": 300.0}, "recrawl-after"),
        (  # a feed minimum above the page minimum would be ignored: refuse it
            {"recrawl_after": HOUR, "recrawl_min": 120.0, "recrawl_feed_min": 600.0},
            "recrawl-feed-min (600 s)",
        ),
        ({"recrawl_after": HOUR, "recrawl_feed_min": 600.0}, "recrawl-min (450 s)"),
    ],
)
def test_bounds_that_do_not_hold_are_refused(fields: dict[str, Any], names: str) -> None:
    with pytest.raises(ValueError, match="recrawl bounds do not hold") as caught:
        RevisitPolicy.from_policy(CrawlPolicy(crawl_id="c", **fields))
    message = str(caught.value)
    assert names in message
    assert "\n" not in message  # one line, for the CLI


@pytest.mark.parametrize(
    "fields",
    [
        {"recrawl_after": HOUR, "recrawl_min": 120.0, "recrawl_max": DAY},
        {"recrawl_after": HOUR},
        {"recrawl_after": 60.0, "recrawl_min": 1.0, "recrawl_max": 365 * DAY},
        {
            "recrawl_after": 100.0,
            "recrawl_feed_min": 100.0,
            "recrawl_min": 100.0,
            "recrawl_max": 225.0,
        },
        {
            "recrawl_after": 100.0,
            "recrawl_feed_min": 100.0,
            "recrawl_min": 100.0,
            "recrawl_max": 226.0,
        },
    ],
)
def test_the_ladder_runs_from_the_feed_minimum_by_ratio_to_exactly_the_maximum(
    fields: dict[str, float],
) -> None:
    policy = revisit(**fields)
    ladder = policy.ladder
    assert ladder[0] == policy.feed_min
    assert ladder[-1] == policy.max
    steps = [b / a for a, b in itertools.pairwise(ladder)]
    assert all(step == pytest.approx(RATIO) for step in steps[:-1])
    assert 1.0 < steps[-1] <= RATIO + 1e-12  # the last step only reaches the maximum
    assert policy.top() == len(ladder) - 1


def test_the_ladder_of_a_single_interval() -> None:
    policy = revisit(recrawl_after=60.0, recrawl_min=60.0, recrawl_max=60.0, recrawl_feed_min=60.0)
    assert policy.ladder == (60.0,)
    assert [policy.first("page"), policy.next(0, True, "feed"), policy.next(0, False, "page")] == [
        0,
        0,
        0,
    ]


def test_the_example_ladder() -> None:
    assert P.ladder == tuple(at(level) for level in range(TOP + 1))
    assert P.floor("page") == FLOOR
    assert P.floor("sitemap") == FLOOR
    assert P.floor("feed") == 0


def test_a_fixed_crawl_has_one_level() -> None:
    fixed = revisit(recrawl_after=HOUR, recrawl_min=120.0, recrawl_max=DAY, recrawl_mode="fixed")
    assert fixed.ladder == (HOUR,)
    assert fixed.first("page", "always") == fixed.first("feed", "never") == 0
    assert fixed.next(0, True, "feed") == fixed.next(0, False, "page") == 0
    assert fixed.after_error(1, "page") == fixed.after_error(99, "page") == 0
    assert fixed.clamp(7, "page") == 0
    assert fixed.due(10.0, 0, 0.0) == 10.0 + HOUR and fixed.due(10.0, 0, 0.5) == 10.0 + 0.95 * HOUR


# --- where a URL starts, and how it moves ---------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "changefreq", "level"),
    [
        ("page", None, 12),  # 3892 s: the level nearest recrawl_after on a log scale
        ("page", "hourly", 12),
        ("page", "daily", TOP),
        ("page", "weekly", TOP),  # beyond the maximum: at it
        ("page", "never", TOP),
        ("page", "always", FLOOR),  # as often as a page may: not the feed minimum
        ("feed", "always", 0),
        ("sitemap", "always", FLOOR),
        ("page", "sometimes", 12),  # not a changefreq: recrawl_after
        ("page", "", 12),
    ],
)
def test_first(kind: UrlKind, changefreq: str | None, level: int) -> None:
    assert P.first(kind, changefreq) == level


def test_first_follows_recrawl_after() -> None:
    later = revisit(recrawl_after=2 * HOUR, recrawl_min=120.0, recrawl_max=DAY)
    assert later.ladder == P.ladder
    assert later.first("page") == 14  # 8758 s is nearer 7200 s than 5839 s is, on a log scale
    assert later.first("page", "hourly") == later.first("page", " Hourly\n") == 12
    assert later.first("page", "DAILY") == TOP
    assert later.interval(later.first("page")) / later.after < math.sqrt(RATIO)


@pytest.mark.parametrize(
    ("seconds", "least", "near"),
    [
        (0.0, 0, 0),
        (1.0, 0, 0),
        (30.0, 0, 0),
        (120.0, FLOOR, 3),  # 101.25 s is nearer 120 s than 151.875 s is
        (30.0 * RATIO**4, FLOOR, FLOOR),  # on the ladder: that level
        (152.0, FLOOR + 1, FLOOR),
        (at(7) * (1 + 1e-15), 7, 7),  # a rounding error above a level is that level
        (HOUR, 12, 12),
        (DAY, TOP, TOP),
        (2 * DAY, TOP, TOP),  # beyond the maximum: the top
        (math.inf, TOP, TOP),
    ],
)
def test_level_at_least_and_near(seconds: float, least: int, near: int) -> None:
    assert P.level_at_least(seconds) == least
    assert P.level_near(seconds) == near


@pytest.mark.parametrize(
    ("level", "kind", "clamped"),
    [
        (-3, "page", FLOOR),
        (-3, "feed", 0),
        (2, "page", FLOOR),
        (2, "feed", 2),
        (FLOOR, "page", FLOOR),
        (9, "page", 9),
        (TOP, "feed", TOP),
        (TOP + 5, "page", TOP),
    ],
)
def test_clamp(level: int, kind: UrlKind, clamped: int) -> None:
    assert P.clamp(level, kind) == clamped


@pytest.mark.parametrize(
    ("level", "changed", "kind", "after"),
    [
        (10, False, "page", 11),  # no change: one step up (x1.5)
        (TOP - 1, False, "page", TOP),
        (TOP, False, "page", TOP),  # not beyond the maximum
        (10, True, "page", 8),  # a change: two steps down (/2.25)
        (TOP, True, "page", TOP - 2),
        (FLOOR + 1, True, "page", FLOOR),  # not below recrawl_min
        (FLOOR, True, "page", FLOOR),
        (FLOOR + 1, True, "feed", FLOOR - 1),  # a feed goes down to the feed minimum
        (1, True, "feed", 0),
        (0, False, "feed", 1),
    ],
)
def test_next(level: int, changed: bool, kind: UrlKind, after: int) -> None:
    assert P.next(level, changed, kind) == after


def test_a_change_moves_further_down_than_no_change_moves_up() -> None:
    level = 12
    assert P.interval(P.next(level, False, "page")) == pytest.approx(P.interval(level) * RATIO)
    assert P.interval(P.next(level, True, "page")) == pytest.approx(P.interval(level) / RATIO**2)


@pytest.mark.parametrize(
    ("errors", "kind", "level"),
    [
        (1, "page", FLOOR),  # the minimum: 151.9 s, the first level of at least 120 s
        (2, "page", 6),  # at least 240 s: 341.7 s (227.8 s is too short)
        (3, "page", TOP),  # past retries=2: the maximum only
        (50, "page", TOP),
        (1, "feed", FLOOR),  # also from recrawl_min, not from the feed minimum
    ],
)
def test_after_error(errors: int, kind: UrlKind, level: int) -> None:
    assert P.retries == 2
    assert P.after_error(errors, kind) == level


def test_after_error_doubles_from_the_minimum_until_the_retries_are_spent() -> None:
    patient = revisit(recrawl_after=HOUR, recrawl_min=120.0, recrawl_max=DAY, retries=6)
    levels = [patient.after_error(errors, "page") for errors in range(1, 9)]
    for errors, level in enumerate(levels[:6], start=1):
        wanted = 120.0 * 2 ** (errors - 1)
        assert patient.interval(level) >= wanted > patient.interval(level - 1)
    assert levels[6:] == [TOP, TOP]
    assert (
        revisit(recrawl_after=HOUR, retries=0).after_error(1, "page")
        == revisit(recrawl_after=HOUR).top()
    )


def test_gone_confirm_is_the_soonest_revisit() -> None:
    assert P.gone_confirm("page") == FLOOR
    assert P.gone_confirm("feed") == 0


# --- due -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("u", "factor"),
    [(0.0, 1.0), (0.25, 0.975), (0.5, 0.95), (0.75, 0.925), (1.0 - 1e-12, 0.9)],
)
def test_due_spreads_by_the_jitter(u: float, factor: float) -> None:
    assert P.jitter == 0.1
    assert P.due(1_000.0, 12, u) == pytest.approx(1_000.0 + at(12) * factor)


def test_due_is_the_interval_at_most_and_within_the_jitter_below_it() -> None:
    assert P.due(1_000.0, 12, 0.0) == 1_000.0 + at(12)
    dues = [P.due(0.0, 12, k / 1_000) for k in range(1_000)]
    assert dues == sorted(dues, reverse=True)
    assert at(12) == dues[0] >= dues[-1] > at(12) * 0.9


def test_due_without_jitter_and_out_of_the_ladder() -> None:
    steady = revisit(recrawl_after=HOUR, recrawl_min=120.0, recrawl_max=DAY, recrawl_jitter=0.0)
    assert steady.due(5.0, 3, 0.0) == steady.due(5.0, 3, 0.99) == 5.0 + at(3)
    assert steady.due(0.0, -1, 0.5) == at(0)
    assert steady.due(0.0, TOP + 3, 0.5) == DAY
