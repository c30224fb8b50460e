"""The measured freshness bench's arithmetic (bench/probes/freshness.py), on hand-made change and
fetch logs: no crawler, no server."""

from __future__ import annotations

import hashlib
import time

import pytest

from bench.probes.freshness import (
    Living,
    Run,
    by_page,
    cpu_at,
    due_ratios,
    fresh_seconds,
    freshness,
    held,
    matched,
    recrawl_flags,
    revisits,
)
from bench.probes.freshness_sim import HOUR, MAIN, Web


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


HISTORY = [(0.0, 1), (10.0, 2), (20.0, 3)]  # created at 0, changed at 10 and 20


def test_a_copy_fetched_at_each_change_is_always_fresh() -> None:
    assert fresh_seconds(HISTORY, HISTORY, 0.0, 30.0) == 30.0


def test_a_copy_fetched_right_after_each_change_is_stale_only_until_then() -> None:
    copies = [(t + 0.5, v) for t, v in HISTORY]
    assert fresh_seconds(copies, HISTORY, 0.0, 30.0) == pytest.approx(28.5)


def test_a_page_never_fetched_is_stale_and_counts_in_the_share() -> None:
    assert fresh_seconds([], HISTORY, 0.0, 30.0) == 0.0
    histories = {"/fetched": HISTORY, "/never": HISTORY}
    copies = {"/fetched": HISTORY, "/never": []}
    assert freshness(copies, histories, 5.0, 30.0) == 0.5


def test_an_exact_integral_by_hand() -> None:
    history = [(0.0, 1), (4.0, 2), (9.0, 3)]
    copies = [(1.0, 1), (3.0, 1), (6.0, 2), (8.0, 2), (12.0, 2), (13.0, 3)]
    # In [2, 15): fresh [2, 4) (v1), stale [4, 6) (v2 live), fresh [6, 9) (v2), stale [9, 13)
    # (v3 live, the revisit at 12 still got v2), fresh [13, 15): 2 + 3 + 2 = 7.
    assert fresh_seconds(copies, history, 2.0, 15.0) == pytest.approx(7.0)
    # The window cuts the intervals: [5, 10) holds fresh [6, 9) only.
    assert fresh_seconds(copies, history, 5.0, 10.0) == pytest.approx(3.0)
    assert fresh_seconds(copies, history, 10.0, 10.0) == 0.0


def test_a_copy_of_an_unknown_version_is_never_fresh() -> None:
    assert fresh_seconds([(0.0, 0)], HISTORY, 0.0, 30.0) == 0.0


def test_records_name_versions_by_their_digest_in_fetch_order() -> None:
    records = [
        {"url": "http://h/p/0", "fetched_at": 5.0, "body_sha256": "b"},
        {"url": "http://h/p/0", "fetched_at": 1.0, "body_sha256": "a"},
        {"url": "http://h/p/0", "fetched_at": 7.0, "body_sha256": "zz"},
        {"url": "http://h/", "fetched_at": 0.5, "body_sha256": "home"},
    ]
    pages = by_page(records, ["/p/0", "/p/1"])
    assert [r["fetched_at"] for r in pages["/p/0"]] == [1.0, 5.0, 7.0]
    assert pages["/p/1"] == []
    digests = {"/p/0": {"a": 1, "b": 2}, "/p/1": {"c": 1}}
    assert held(pages, digests) == {"/p/0": [(1.0, 1), (5.0, 2), (7.0, 0)], "/p/1": []}


def test_revisit_gaps_over_the_interval_they_were_due_at() -> None:
    records = [
        {"fetched_at": t, "change": c} for t, c in ((0, "new"), (10, "unchanged"), (21, "x"))
    ]
    assert due_ratios(records, revisits(10.0, 100.0), 10.0) == pytest.approx([1.0, 1.1])
    policy = revisits(120.0, HOUR, MAIN)  # adaptive: up a step after no change, down after one
    level0 = policy.first("page")
    level1 = policy.next(level0, False, "page")
    level2 = policy.next(level1, True, "page")
    assert level0 < level1 and level2 < level1
    i0, i1, i2 = (policy.interval(level) / 120.0 for level in (level0, level1, level2))
    times = [0.0, i0, i0 + i1, i0 + i1 + 1.05 * i2]
    changes = ["new", "unchanged", "changed", "unchanged"]
    records = [{"fetched_at": t, "change": c} for t, c in zip(times, changes, strict=True)]
    assert due_ratios(records, policy, 120.0) == pytest.approx([1.0, 1.0, 1.05])


def test_the_crawl_flags_are_the_policy_scaled_and_at_least_a_second() -> None:
    assert recrawl_flags(revisits(120.0, HOUR, MAIN), 120.0) == [
        "--recrawl-after=30.000000s",
        "--recrawl-min=1.000000s",
        "--recrawl-max=720.000000s",
        "--recrawl-feed-min=1.000000s",  # the simulation's would be min / 4: 0.25 s
        "--recrawl-mode=adaptive",
        "--recrawl-jitter=0.1",
    ]
    assert recrawl_flags(revisits(120.0, 1_800.0), 120.0) == [
        "--recrawl-after=15.000000s",
        "--recrawl-min=15.000000s",
        "--recrawl-max=15.000000s",
        "--recrawl-feed-min=3.750000s",
        "--recrawl-mode=fixed",
        "--recrawl-jitter=0.1",
    ]


def test_cpu_is_interpolated_between_samples_and_clamped() -> None:
    samples = [(10.0, 1.0), (11.0, 1.5), (12.0, 1.5)]
    assert cpu_at(samples, 10.5) == pytest.approx(1.25)
    assert (cpu_at(samples, 9.0), cpu_at(samples, 11.5), cpu_at(samples, 13.0)) == (1.0, 1.5, 1.5)


def run(freshness: float, fetches: float) -> Run:
    return Run(0.0, freshness, 0.0, fetches, 0.0, 1.0, 1.0, 0.1, 0)


def test_fixed_is_matched_to_the_adaptive_run_through_its_two_runs() -> None:
    m = matched(run(0.9, 400.0), run(0.8, 400.0 * 0.9), run(0.85, 500.0))
    # Through (360, 0.80) and (500, 0.85): 400/h gives 0.8143; 0.9 needs 640/h.
    assert m.freshness == pytest.approx(0.8 + 40 * 0.05 / 140)
    assert m.fetches_per_hour == pytest.approx(640.0)
    assert m.ratio == pytest.approx(400.0 / 640.0)


def test_the_living_site_changes_its_pages_and_names_each_version_by_digest() -> None:
    living = Living(3)
    first = living.site.body("/p/1")
    assert first.count(b"<a href=") == 3 and len(first) > 20_000  # the home page and 2 others
    web = Web(seed=0, horizon=10.0, changes=((), (0.0, 1.0), ()))
    living.drive(web, 1.0, time.time() - 5.0)  # both changes are past: applied at once
    assert [v for _, v in living.site.history("/p/1")] == [1, 2, 3]
    assert [v for _, v in living.site.history("/p/0")] == [1]
    digests = living.digests["/p/1"]
    assert sorted(digests.values()) == [1, 2, 3]
    assert digests[sha256(first)] == 1 and digests[sha256(living.site.body("/p/1"))] == 3
