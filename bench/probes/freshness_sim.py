"""How fresh a continuous crawl keeps its copies: the adaptive revisit schedule
(``agents/policy/revisit.py``) against fixed intervals, on a simulated clock.

Run: ``python -m bench.probes.freshness_sim [--pages N] [--hours H] [--seeds K] [--json]``. No
network, no sleeping: one core for well under a minute with the defaults (some 20 crawls of the
simulated web per adaptive setting and seed, most of them to find the matching fixed intervals).

The web: ``N`` pages whose contents change as Poisson processes, a living site: 10 % change every
5 minutes on average, 30 % hourly, 60 % never. The
crawler fetches every page once at t=0, spread over the first minute, then each time it is due,
placed as the crawler places it: ``first("page")`` after the first fetch, then ``next(level,
changed, "page")`` after each revisit (changed: the live page's version differs from the stored
copy's), due at ``due(fetched_at, level, u)`` with ``u`` from a seeded ``random.Random``. Nothing
bounds the fetch rate and politeness is not modelled, so pages never wait for one another: each
is simulated on its own, its events in time order, with its own random streams (a policy's runs
differ only where the policy does).

Measured after a warm-up (2 h) until the horizon: the freshness, the share of (page, time) in
which the stored copy equals the live page, integrated exactly (a copy is fresh from its fetch
until the page's first change after it, or the next fetch), and the fetches per hour. The fixed
schedule is matched to each adaptive setting twice by bisection on its interval: at the same
fetch rate (what freshness the same budget buys) and at the same freshness (what it costs); the
ratio is adaptive fetches / fixed fetches at the same freshness. Each figure is the median over
seeds.

Informs: which adaptive revisit settings (first interval, minimum, maximum) buy more freshness
than fixed intervals for the same fetches, and what the measured crawl of
bench/probes/freshness.py should find (docs/performance.md, "Continuous crawling: freshness and
the cost of a revisit").
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from streamcrawl.agents.policy.revisit import RevisitPolicy
from streamcrawl.schemas.records import CrawlPolicy

HOUR = 3_600.0
DAY = 86_400.0
# (share of the pages, mean seconds between changes): the living site.
LIVING_SITE = ((0.1, 300.0), (0.3, HOUR), (0.6, math.inf))
FIRST_FETCHES = 60.0  # every page is fetched once in the first minute
WARMUP = 2 * HOUR
AFTER = HOUR  # recrawl_after of every adaptive setting
MAIN = (120.0, DAY)  # (recrawl_min, recrawl_max) of the headline row
SWEEP = (MAIN, (60.0, 6 * HOUR), (60.0, DAY), (120.0, 6 * HOUR), (300.0, 6 * HOUR), (300.0, DAY))
PRECISION = 1.005  # bisection stops when the interval is known within 0.5 %
# The fixed intervals tried: below SHORTEST a run of the default web takes seconds.
SHORTEST, LONGEST = 30.0, 365 * DAY


@dataclass(frozen=True, slots=True)
class Web:
    """Pages and the times their contents change, from ``living_web``."""

    seed: int
    horizon: float
    changes: tuple[tuple[float, ...], ...]  # per page, ascending; empty: never changes


@dataclass(frozen=True, slots=True)
class Run:
    """What one policy achieved on one web, from ``crawl``."""

    window: float  # seconds measured: from the warm-up to the horizon
    fetches: tuple[int, ...]  # per page, fetches within the window
    fresh: tuple[float, ...]  # per page, seconds within the window its copy was current

    @property
    def freshness(self) -> float:
        return sum(self.fresh) / (len(self.fresh) * self.window)

    @property
    def fetches_per_hour(self) -> float:
        return sum(self.fetches) * HOUR / self.window


def living_web(pages: int, hours: float, seed: int) -> Web:
    """``pages`` pages, the first 10 % changing every 5 min on average, the next 30 % hourly."""
    rng = random.Random(f"web {seed}")
    horizon = hours * HOUR
    means = [mean for share, mean in LIVING_SITE for _ in range(round(share * pages))]
    means = (means + [math.inf] * pages)[:pages]
    changes = []
    for mean in means:
        times: list[float] = []
        t = rng.expovariate(1 / mean) if math.isfinite(mean) else math.inf
        while t < horizon:
            times.append(t)
            t += rng.expovariate(1 / mean)
        changes.append(tuple(times))
    return Web(seed, horizon, tuple(changes))


def adaptive(minimum: float, maximum: float, jitter: float = 0.1) -> RevisitPolicy:
    return _revisit(recrawl_after=AFTER, recrawl_min=minimum, recrawl_max=maximum, jitter=jitter)


def fixed(interval: float, jitter: float = 0.1) -> RevisitPolicy:
    return _revisit(recrawl_after=interval, recrawl_mode="fixed", jitter=jitter)


def _revisit(jitter: float, **recrawl: Any) -> RevisitPolicy:
    spec = CrawlPolicy(crawl_id="sim", recrawl_jitter=jitter, **recrawl)
    policy = RevisitPolicy.from_policy(spec)
    assert policy is not None
    return policy


def fetch_times(web: Web, policy: RevisitPolicy, page: int) -> list[float]:
    """When the crawler fetches ``page`` of ``web`` under ``policy``, until the horizon. The page
    has its own random stream: its fetches do not depend on the other pages'."""
    rng = random.Random(f"fetch {web.seed} {page}")
    changes = web.changes[page]
    fetched = FIRST_FETCHES * rng.random()
    level = policy.first("page")
    stored = bisect_right(changes, fetched)  # the copy's version: the changes before its fetch
    times = []
    while fetched < web.horizon:
        times.append(fetched)
        fetched = policy.due(fetched, level, rng.random())
        live = bisect_right(changes, fetched, stored)
        level = policy.next(level, live != stored, "page")
        stored = live
    return times


def fresh_seconds(
    times: Sequence[float], changes: Sequence[float], start: float, end: float
) -> float:
    """Seconds of [start, end) in which the copy of the latest fetch (``times``) was current."""
    if not changes:  # every copy is current: from the first fetch on
        return max(0.0, end - max(times[0], start)) if times else 0.0
    total = 0.0
    stale = 0  # the first change after the fetch
    for k, fetched in enumerate(times):
        while stale < len(changes) and changes[stale] <= fetched:
            stale += 1
        until = min(
            changes[stale] if stale < len(changes) else end,
            times[k + 1] if k + 1 < len(times) else end,
            end,
        )
        total += max(0.0, until - max(fetched, start))
    return total


def crawl(web: Web, policy: RevisitPolicy, warmup: float = WARMUP) -> Run:
    """Every page of ``web`` crawled under ``policy``, measured after ``warmup``."""
    fetches, fresh = [], []
    for page, changes in enumerate(web.changes):
        times = fetch_times(web, policy, page)
        fetches.append(len(times) - bisect_left(times, warmup))
        fresh.append(fresh_seconds(times, changes, warmup, web.horizon))
    return Run(web.horizon - warmup, tuple(fetches), tuple(fresh))


def solve(measure: Callable[[float], float], target: float, guess: float) -> float:
    """The interval at which ``measure`` (falling as the interval grows) meets ``target``:
    bracketed by powers of two around ``guess``, then bisected on a log scale (so that the
    intervals tried recur, and their runs are cached, across targets). ``SHORTEST`` if even
    that interval falls short of the target, ``LONGEST`` if even that one meets it."""
    low = 2.0 ** math.floor(math.log2(max(guess, SHORTEST)))
    high = 2 * low
    while measure(low) < target and low > SHORTEST:
        low, high = low / 2, low
    while measure(high) >= target and high < LONGEST:
        low, high = high, high * 2
    if measure(low) < target:
        return low
    while high / low > PRECISION:
        middle = math.sqrt(low * high)
        low, high = (middle, high) if measure(middle) >= target else (low, middle)
    return math.sqrt(low * high)


@dataclass(frozen=True, slots=True)
class Row:
    """One adaptive setting and the fixed intervals that match it, on one web."""

    minimum: float
    maximum: float
    freshness: float
    fetches_per_hour: float
    budget_interval: float  # the fixed interval with the adaptive fetch rate...
    budget_freshness: float  # ...and its freshness
    fresh_interval: float  # the fixed interval with the adaptive freshness...
    fresh_fetches_per_hour: float  # ...and its fetch rate
    ratio: float  # fetches_per_hour / fresh_fetches_per_hour


def compare(web: Web, settings: Sequence[tuple[float, float]] = SWEEP) -> list[Row]:
    """Each adaptive (recrawl_min, recrawl_max) of ``settings`` against fixed intervals."""
    runs: dict[float, Run] = {}  # fixed interval -> its run on this web

    def run_fixed(interval: float) -> Run:
        if interval not in runs:
            runs[interval] = crawl(web, fixed(interval))
        return runs[interval]

    rows = []
    for minimum, maximum in settings:
        own = crawl(web, adaptive(minimum, maximum))
        rate = own.fetches_per_hour
        guess = len(web.changes) * HOUR / rate if rate else LONGEST
        budget = solve(lambda t: run_fixed(t).fetches_per_hour, rate, guess)
        same = solve(lambda t: run_fixed(t).freshness, own.freshness, budget)
        cheaper = run_fixed(same).fetches_per_hour
        ratio = rate / cheaper if cheaper else math.inf
        matched = (budget, run_fixed(budget).freshness, same, cheaper, ratio)
        rows.append(Row(minimum, maximum, own.freshness, rate, *matched))
    return rows


def median_rows(per_seed: Sequence[Sequence[Row]]) -> list[Row]:
    """Each figure of each row, the median over the seeds (so a row may mix seeds)."""
    return [
        Row(*(statistics.median(getattr(row, f.name) for row in rows) for f in fields(Row)))
        for rows in zip(*per_seed, strict=True)
    ]


def duration(seconds: float) -> str:
    for unit, size in (("d", DAY), ("h", HOUR), ("m", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:.3g}s"


def table(rows: Sequence[Row], pages: int, hours: float, seeds: int) -> str:
    lines = [
        f"{pages} pages (10 % change every 5 min, 30 % hourly, 60 % never), {hours:g} h "
        f"simulated, the first {WARMUP / HOUR:g} h skipped; adaptive: recrawl_after "
        f"{duration(AFTER)}; jitter 0.1; medians of {seeds} seeds.",
        "",
        "| adaptive min / max | freshness | fetches/h | fixed at the same fetches/h: interval,"
        " freshness | fixed at the same freshness: interval, fetches/h | adaptive / fixed"
        " fetches |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        lines.append(
            f"| {duration(row.minimum)} / {duration(row.maximum)} | {row.freshness:.3f} "
            f"| {row.fetches_per_hour:,.0f} | {duration(row.budget_interval)}, "
            f"{row.budget_freshness:.3f} | {duration(row.fresh_interval)}, "
            f"{row.fresh_fetches_per_hour:,.0f} | {row.ratio:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.probes.freshness_sim", description=__doc__
    )
    parser.add_argument("--pages", type=int, default=1_000)
    parser.add_argument("--hours", type=float, default=48.0)
    parser.add_argument("--seeds", type=int, default=3, help="runs of each figure (median)")
    parser.add_argument("--json", action="store_true", help="JSON instead of markdown")
    args = parser.parse_args(argv)
    if args.hours * HOUR <= WARMUP or args.pages < 1 or args.seeds < 1:
        parser.error(f"need --pages >= 1, --seeds >= 1 and --hours > {WARMUP / HOUR:g}")
    per_seed = [compare(living_web(args.pages, args.hours, seed)) for seed in range(args.seeds)]
    rows = median_rows(per_seed)
    if args.json:
        report = {
            "pages": args.pages,
            "hours": args.hours,
            "seeds": args.seeds,
            "warmup_hours": WARMUP / HOUR,
            "recrawl_after": AFTER,
            "rows": [asdict(row) for row in rows],
            "per_seed": [[asdict(row) for row in seed_rows] for seed_rows in per_seed],
        }
        print(json.dumps(report, indent=1))
    else:
        print(table(rows, args.pages, args.hours, args.seeds))


if __name__ == "__main__":
    main()
