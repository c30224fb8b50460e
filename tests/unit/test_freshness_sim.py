"""The freshness simulation (bench/probes/freshness_sim.py) on a tiny web (50 pages, 6 hours):
the web it models, the schedule it follows, the freshness it integrates and the fixed intervals it
finds."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from bench.probes.freshness_sim import (
    DAY,
    FIRST_FETCHES,
    HOUR,
    MAIN,
    SWEEP,
    WARMUP,
    adaptive,
    compare,
    crawl,
    fetch_times,
    fixed,
    fresh_seconds,
    living_web,
    main,
)

WEB = living_web(50, 6, seed=1)
FAST, HOURLY, NEVER = range(5), range(5, 20), range(20, 50)
POLICIES = {
    "adaptive 2m-1d": adaptive(*MAIN),
    "adaptive 1m-6h": adaptive(60.0, 6 * HOUR),
    "fixed 1m": fixed(60.0),
    "fixed 20m": fixed(1_200.0),
    "fixed 1d": fixed(DAY),
}


def test_the_living_site() -> None:
    assert living_web(50, 6, seed=1) == WEB  # the seed decides
    assert living_web(50, 6, seed=2) != WEB
    assert all(not WEB.changes[page] for page in NEVER)
    for changes in WEB.changes:
        assert list(changes) == sorted(changes)
        assert all(0.0 < t < 6 * HOUR for t in changes)
    # Poisson counts over 6 h: 5 pages x 72 expected (sd 19), 15 pages x 6 (sd 9.5)
    assert 300 < sum(len(WEB.changes[page]) for page in FAST) < 420
    assert 60 < sum(len(WEB.changes[page]) for page in HOURLY) < 120
    assert [len(c) > 0 for c in living_web(10, 6, seed=1).changes] == [True] * 4 + [False] * 6


@pytest.mark.parametrize(
    ("times", "changes", "start", "fresh"),
    [
        ([0.0, 100.0], [50.0], 0.0, 50.0 + 100.0),  # stale from the change to the next fetch
        ([0.0, 100.0], [150.0], 0.0, 150.0),  # the new copy goes stale in its turn
        ([0.0, 100.0], [10.0, 20.0, 30.0], 0.0, 10.0 + 100.0),  # the first change counts
        ([0.0, 100.0], [100.0], 0.0, 200.0),  # a change at the fetch is in the copy
        ([0.0, 100.0], [50.0], 120.0, 80.0),  # only the window is measured
        ([0.0, 100.0], [110.0], 120.0, 0.0),
        ([130.0], [], 120.0, 70.0),  # nothing is fresh before the first fetch
        ([130.0], [150.0], 0.0, 20.0),
        ([], [], 0.0, 0.0),
        ([0.0, 50.0, 150.0], [], 0.0, 200.0),
    ],
)
def test_fresh_seconds(
    times: list[float], changes: list[float], start: float, fresh: float
) -> None:
    assert fresh_seconds(times, changes, start, 200.0) == fresh


@pytest.mark.parametrize("name", POLICIES)
def test_freshness_is_a_share(name: str) -> None:
    run = crawl(WEB, POLICIES[name])
    assert run.window == 4 * HOUR
    assert all(0.0 <= fresh <= run.window for fresh in run.fresh)
    assert 0.0 <= run.freshness <= 1.0
    assert len(run.fetches) == len(run.fresh) == 50


@pytest.mark.parametrize("name", POLICIES)
def test_a_page_that_never_changes_is_fresh_from_its_first_fetch(name: str) -> None:
    measured = crawl(WEB, POLICIES[name])
    whole = crawl(WEB, POLICIES[name], warmup=0.0)
    for page in NEVER:
        first = fetch_times(WEB, POLICIES[name], page)[0]
        assert 0.0 <= first < FIRST_FETCHES
        assert measured.fresh[page] == measured.window
        assert whole.fresh[page] == pytest.approx(WEB.horizon - first)
    if name != "fixed 1m":  # a page changing every 5 min is stale part of the time
        assert all(measured.fresh[page] < measured.window for page in FAST)


def test_a_shorter_fixed_interval_is_never_less_fresh() -> None:
    intervals = [60.0, 300.0, 900.0, 1_800.0, HOUR, 4 * HOUR]
    runs = [crawl(WEB, fixed(interval)) for interval in intervals]
    freshness = [run.freshness for run in runs]
    assert freshness == sorted(freshness, reverse=True)
    rates = [run.fetches_per_hour for run in runs]
    assert rates == sorted(rates, reverse=True)
    assert len(set(freshness)) == len(set(rates)) == len(intervals)


def test_a_fixed_schedule_without_jitter_fetches_on_the_interval() -> None:
    run = crawl(WEB, fixed(600.0, jitter=0.0))
    # fetches at t0 + 600 k with t0 < 60 s: 24 of them in [2 h, 6 h), whatever t0
    assert run.fetches == (24,) * 50
    assert run.fetches_per_hour == 50 * 6
    for page in (0, 7, 33):
        times = fetch_times(WEB, fixed(600.0, jitter=0.0), page)
        assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([600.0] * 35)


def test_fetches_are_spread_by_the_jitter() -> None:
    policy = fixed(600.0)
    for page in (0, 7, 33):
        times = fetch_times(WEB, policy, page)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(540.0 <= gap <= 600.0 for gap in gaps)
        assert max(gaps) - min(gaps) > 30.0
        assert len(times) == crawl(WEB, policy, warmup=0.0).fetches[page]


def test_a_page_that_never_changes_climbs_the_ladder() -> None:
    policy = adaptive(*MAIN, jitter=0.0)
    for page in (20, 49):
        times = fetch_times(WEB, policy, page)
        expected, level = [times[0]], policy.first("page")
        while expected[-1] + policy.interval(level) < WEB.horizon:
            expected.append(expected[-1] + policy.interval(level))
            level = min(level + 1, policy.top())
        assert times == pytest.approx(expected)
        assert len(times) == 4  # gaps of 3892, 5839 and 8758 s; the next (13137 s) passes 6 h


def test_changes_bring_revisits_sooner() -> None:
    run = crawl(WEB, adaptive(*MAIN))

    def mean(pages: range) -> float:
        return sum(run.fetches[page] for page in pages) / len(pages)

    assert mean(FAST) > 2 * mean(HOURLY) > 4 * mean(NEVER)
    policy = adaptive(*MAIN)
    gaps = [b - a for page in FAST for a, b in itertools.pairwise(fetch_times(WEB, policy, page))]
    assert min(gaps) >= 0.9 * policy.interval(policy.floor("page"))  # not below the minimum


def test_the_fixed_intervals_match_the_adaptive_run() -> None:
    (row,) = compare(WEB, [MAIN])
    own = crawl(WEB, adaptive(*MAIN))
    assert (row.freshness, row.fetches_per_hour) == (own.freshness, own.fetches_per_hour)
    same_budget = crawl(WEB, fixed(row.budget_interval))
    assert same_budget.fetches_per_hour == pytest.approx(row.fetches_per_hour, rel=0.01)
    assert same_budget.freshness == row.budget_freshness
    same_freshness = crawl(WEB, fixed(row.fresh_interval))
    assert same_freshness.freshness == pytest.approx(row.freshness, abs=0.005)
    assert same_freshness.fetches_per_hour == row.fresh_fetches_per_hour
    assert row.ratio == row.fetches_per_hour / row.fresh_fetches_per_hour
    assert row.ratio < 1


def test_main_prints_the_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--pages", "20", "--hours", "4", "--seeds", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("20 pages")
    assert len([line for line in lines if line.startswith("| ")]) == 1 + len(SWEEP)
    assert lines[4].startswith("| 2m / 1d | ")
    main(["--pages", "20", "--hours", "4", "--seeds", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert (report["pages"], report["seeds"], len(report["per_seed"])) == (20, 2, 2)
    assert [(row["minimum"], row["maximum"]) for row in report["rows"]] == list(SWEEP)
    assert all(0.0 <= row["freshness"] <= 1.0 and row["ratio"] > 0 for row in report["rows"])
    assert not any(math.isnan(value) for row in report["rows"] for value in row.values())


def test_main_refuses_a_horizon_within_the_warmup() -> None:
    with pytest.raises(SystemExit):
        main(["--hours", str(WARMUP / HOUR)])
