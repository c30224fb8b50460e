"""Read the benchmark's nginx access log: what each crawler actually asked the server for.

The log format (see ``nginx.conf.tmpl``) is tab-separated::

    $msec  $server_port  $request_method  $request_uri  $status  $body_bytes_sent
    $request_time  $http_user_agent

``$msec`` is when the response ended, so a request started at ``msec - request_time``.

A request's *canonical URL* is ``http://127.0.0.1:PORT`` + its path without query (the synthetic
web has no meaningful query parameters, only tracking ones, and fragments never reach a server).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

ROBOTS = "/robots.txt"
PRIVATE_PREFIX = "/private/"


@dataclass(frozen=True)
class Hit:
    start: float
    end: float
    port: int
    method: str
    uri: str
    status: int
    size: int
    agent: str

    @property
    def path(self) -> str:
        return self.uri.split("?", 1)[0].split("#", 1)[0]

    @property
    def canonical(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"


def parse_line(line: str) -> Hit | None:
    """One log line -> ``Hit``; ``None`` for a blank or malformed line."""
    parts = line.rstrip("\n").split("\t")
    if len(parts) < 8:
        return None
    try:
        end, rtime = float(parts[0]), float(parts[6])
        return Hit(
            end - rtime,
            end,
            int(parts[1]),
            parts[2],
            parts[3],
            int(parts[4]),
            int(parts[5]),
            "\t".join(parts[7:]),
        )
    except ValueError:
        return None


def read_hits(path: str | Path) -> list[Hit]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [h for h in map(parse_line, f) if h is not None]


@dataclass
class LogReport:
    """What the server saw. All counts are requests unless named pages."""

    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    robots_requests: int = 0
    robots_duplicates: int = 0  # robots.txt fetched more than once for an origin
    pages_fetched: int = 0  # distinct expected pages answered 200
    pages_missed: int = 0  # expected pages never requested with a 200 answer
    duplicates: int = 0  # repeat requests of the same canonical URL (robots.txt excluded)
    duplicate_urls: int = 0  # canonical URLs requested more than once
    private_fetched: int = 0  # requests under /private/ (robots-disallowed: must be 0)
    unexpected: int = 0  # other requests for URLs outside the expected set
    first_start: float = 0.0
    last_end: float = 0.0
    min_gap: float | None = (
        None  # smallest gap between request starts on one origin (robots excluded)
    )
    min_gap_with_robots: float | None = None
    gaps_by_origin: dict[int, float] = field(default_factory=dict)
    missed_sample: list[str] = field(default_factory=list)

    @property
    def span(self) -> float:
        """Seconds from the first request's start to the last response's end."""
        return max(0.0, self.last_end - self.first_start)

    def origins_under(self, delay: float, tolerance: float = 0.002) -> list[int]:
        """Ports whose minimum gap fell under ``delay`` (minus the log's ~1 ms resolution)."""
        return sorted(p for p, g in self.gaps_by_origin.items() if g < delay - tolerance)


def _min_gap(starts: list[float]) -> float | None:
    starts = sorted(starts)
    gaps = [b - a for a, b in pairwise(starts)]
    return min(gaps) if gaps else None


def origin_gaps(
    pages: Mapping[int, list[float]], every: Mapping[int, list[float]]
) -> tuple[dict[int, float], float | None, float | None]:
    """Per port, the smallest gap between request starts of ``pages`` (robots.txt excluded);
    the smallest of those; and the smallest over ``every`` request (robots.txt included).
    Shared by the access log's analysis and the capture's (``bench.wire``)."""
    by_origin = {p: g for p, s in pages.items() if (g := _min_gap(s)) is not None}
    with_robots = [g for g in map(_min_gap, every.values()) if g is not None]
    return (
        by_origin,
        min(by_origin.values()) if by_origin else None,
        min(with_robots) if with_robots else None,
    )


def analyze(hits: Iterable[Hit], expected: set[str]) -> LogReport:
    hits = list(hits)
    r = LogReport(requests=len(hits))
    if not hits:
        r.pages_missed = len(expected)
        r.missed_sample = sorted(expected)[:5]
        return r
    r.statuses = dict(Counter(h.status for h in hits))
    r.first_start = min(h.start for h in hits)
    r.last_end = max(h.end for h in hits)
    per_url: Counter[str] = Counter()
    robots_per_origin: Counter[int] = Counter()
    ok_pages: set[str] = set()
    starts: dict[int, list[float]] = defaultdict(list)
    starts_all: dict[int, list[float]] = defaultdict(list)
    for h in hits:
        starts_all[h.port].append(h.start)
        if h.path == ROBOTS:
            robots_per_origin[h.port] += 1
            continue
        starts[h.port].append(h.start)
        per_url[h.canonical] += 1
        if h.path.startswith(PRIVATE_PREFIX):
            r.private_fetched += 1
        elif h.canonical not in expected:
            r.unexpected += 1
        elif h.status == 200:
            ok_pages.add(h.canonical)
    r.robots_requests = sum(robots_per_origin.values())
    r.robots_duplicates = sum(n - 1 for n in robots_per_origin.values())
    r.duplicates = sum(n - 1 for n in per_url.values())
    r.duplicate_urls = sum(1 for n in per_url.values() if n > 1)
    r.pages_fetched = len(ok_pages)
    missed = expected - ok_pages
    r.pages_missed = len(missed)
    r.missed_sample = sorted(missed)[:5]
    r.gaps_by_origin, r.min_gap, r.min_gap_with_robots = origin_gaps(starts, starts_all)
    return r


def analyze_file(path: str | Path, expected: set[str]) -> LogReport:
    return analyze(read_hits(path), expected)
