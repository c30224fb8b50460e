"""When a URL of a continuous crawl is due again: the interval ladder and the adaptive rule.

A crawl with ``recrawl_after`` revisits every URL it fetched. Intervals live on a ladder,
``base * RATIO**k`` from the lowest minimum (``recrawl_feed_min``) up to ``recrawl_max``, so a
revisit is placed in one of a few FIFO lanes per origin whose due times only grow
(``agents/frontier/revisits.py``): the scheduler finds an origin's next due URL by looking at
the lanes' heads, never by scanning its URLs.

Adaptive (StormCrawler's AdaptiveScheduler and Nutch's AdaptiveFetchSchedule do the same with
other constants): a revisit that found no change moves one step up (x1.5), one that found a
change ``DOWN`` steps down (/2.25), within [recrawl_min, recrawl_max] (feeds: from
recrawl_feed_min). Fixed: every URL at ``recrawl_after``. A first fetch starts at
``recrawl_after`` or, for a URL a sitemap lists with a ``changefreq``, at that frequency within
the bounds. Failed revisits back off from the minimum (x2 each) and, past the crawl's retry
budget, are tried at the maximum only; a 404/410 is confirmed once after ``gone_confirm``.

Pure: no clock, no randomness of its own (the caller passes ``u`` in [0, 1)).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from streamcrawl.schemas.records import CrawlPolicy, RecrawlMode, UrlKind

RATIO = 1.5  # one step of the ladder
DOWN = 2  # steps down after a change
FUTURE_SKEW = 300.0  # a lastmod up to 5 minutes ahead of our clock is a clock skew, not a lie
CHANGEFREQ = {
    "always": 0.0,  # as often as the bounds allow
    "hourly": 3_600.0,
    "daily": 86_400.0,
    "weekly": 7 * 86_400.0,
    "monthly": 30 * 86_400.0,
    "yearly": 365 * 86_400.0,
    "never": math.inf,  # as rarely as the bounds allow
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$", re.IGNORECASE)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0, "w": 604_800.0}


def parse_duration(text: str) -> float:
    """Seconds of ``90``, ``90s``, ``15m``, ``2h``, ``1d`` or ``1w``; ValueError otherwise."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 15m, 2h, 1d, 1w)")
    return float(match.group(1)) * _UNITS[(match.group(2) or "s").lower()]


def lastmod_time(text: str | None) -> float | None:
    """Epoch seconds of a sitemap ``<lastmod>`` (W3C datetime: a date, or a date and time with
    a zone; no zone is read as UTC); None if absent or unreadable."""
    if not text:
        return None
    value = text.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def lastmod_forces(lastmod: str | None, fetched_at: float, now: float) -> bool:
    """Whether a sitemap's ``lastmod`` makes a URL fetched at ``fetched_at`` due now: newer
    than that fetch, and not in the future (a lastmod ahead of the clock is ignored)."""
    when = lastmod_time(lastmod)
    return when is not None and fetched_at < when <= now + FUTURE_SKEW


@dataclass(frozen=True, slots=True)
class RevisitPolicy:
    """A crawl's revisit rules, from its spec (``from_policy``)."""

    after: float
    min: float
    max: float
    feed_min: float
    mode: RecrawlMode
    jitter: float
    retries: int
    ladder: tuple[float, ...]  # the interval of each level, growing

    @classmethod
    def from_policy(cls, policy: CrawlPolicy) -> RevisitPolicy | None:
        """The crawl's revisit rules, None if it crawls once. ValueError if the bounds do not
        hold (min <= after <= max, feed minimum <= min): one line, for the CLI."""
        after = policy.recrawl_after
        if after is None:
            return None
        low = policy.recrawl_min if policy.recrawl_min is not None else max(1.0, after / 8)
        high = policy.recrawl_max if policy.recrawl_max is not None else after * 14
        feed = policy.recrawl_feed_min
        if feed is None:
            feed = max(1.0, low / 4)
        if not feed <= low <= after <= high:
            raise ValueError(
                f"recrawl bounds do not hold: need recrawl-feed-min ({feed:g} s) <= recrawl-min "
                f"({low:g} s) <= recrawl-after ({after:g} s) <= recrawl-max ({high:g} s)"
            )
        if policy.recrawl_mode == "fixed":
            ladder: tuple[float, ...] = (after,)
        else:
            steps = [feed]
            while steps[-1] * RATIO < high:
                steps.append(steps[-1] * RATIO)
            ladder = (*steps, high) if steps[-1] < high else tuple(steps)
        return cls(
            after=after,
            min=low,
            max=high,
            feed_min=feed,
            mode=policy.recrawl_mode,
            jitter=policy.recrawl_jitter,
            retries=policy.retries,
            ladder=ladder,
        )

    def interval(self, level: int) -> float:
        return self.ladder[max(0, min(level, len(self.ladder) - 1))]

    def top(self) -> int:
        return len(self.ladder) - 1

    def floor(self, kind: UrlKind) -> int:
        """The lowest level a URL of ``kind`` may use (feeds: the feed minimum)."""
        return 0 if kind == "feed" else self.level_at_least(self.min)

    def level_at_least(self, seconds: float) -> int:
        """The lowest level whose interval is at least ``seconds`` (the top if none)."""
        index = bisect.bisect_left(self.ladder, seconds - 1e-9)
        return min(index, self.top())

    def level_near(self, seconds: float) -> int:
        """The level whose interval is nearest ``seconds`` on a log scale."""
        if seconds <= 0:
            return 0
        if math.isinf(seconds):
            return self.top()
        return min(range(len(self.ladder)), key=lambda k: abs(math.log(self.ladder[k] / seconds)))

    def first(self, kind: UrlKind, changefreq: str | None = None) -> int:
        """The level of a URL's first revisit."""
        if self.mode == "fixed":
            return 0
        seconds = self.after
        if changefreq is not None and changefreq.strip().lower() in CHANGEFREQ:
            seconds = CHANGEFREQ[changefreq.strip().lower()]
        return self.clamp(self.level_near(seconds), kind)

    def clamp(self, level: int, kind: UrlKind) -> int:
        if self.mode == "fixed":
            return 0
        return max(self.floor(kind), min(level, self.top()))

    def next(self, level: int, changed: bool, kind: UrlKind) -> int:
        """The level after a revisit that found a change (or not)."""
        if self.mode == "fixed":
            return 0
        return self.clamp(level - DOWN if changed else level + 1, kind)

    def after_error(self, errors: int, kind: UrlKind) -> int:
        """The level after ``errors`` failed revisits in a row: from the minimum, doubling;
        past the retry budget, the maximum only."""
        if self.mode == "fixed":
            return 0
        if errors > self.retries:
            return self.top()
        return self.clamp(self.level_at_least(self.min * 2 ** (errors - 1)), kind)

    def gone_confirm(self, kind: UrlKind) -> int:
        """The level of the revisit that confirms a 404/410: the soonest the URL may use."""
        return self.floor(kind)

    def due(self, fetched_at: float, level: int, u: float) -> float:
        """When a URL fetched at ``fetched_at`` on ``level`` is due: its interval, less up to
        ``jitter`` of it. One-sided: a lane keeps due times in order by raising a push to the
        lane's last due (agents/frontier/revisits.py), so a symmetric spread would end up at
        its top, every interval up to ``jitter`` too long (docs/performance.md, "Continuous
        crawling: freshness and the cost of a revisit"); spread downwards, it stays within the
        interval."""
        return fetched_at + self.interval(level) * (1.0 - self.jitter * u)
