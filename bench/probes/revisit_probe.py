"""``python -m bench.probes.kafka_probe --revisits S``: what a 304 revisit costs a worker against a
first fetch (the probe's docstring says how the crawl is read: the seed, the first cycle's end,
the revisit window).

Informs: what a 304 revisit costs a Kafka worker against a first fetch (docs/performance.md,
"Continuous crawling: freshness and the cost of a revisit"); run through
``python -m bench.probes.kafka_probe --revisits S``."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.kafka_runner import Seeded, seed
from bench.kafka_topology import Topology
from bench.probes.kafka_probe import Fetch, Key, by_label, metrics, page_fetches, topic_sizes

if TYPE_CHECKING:
    from tests.integration.site_process import RemoteServer


SETTLE_S = 1.0  # the first cycle's last first fetch to its end: the fetch's report and writes


def revisit_flags(seconds: float) -> list[str]:
    """The seed options of a continuous crawl revisiting every URL every ``seconds``."""
    every = f"{seconds:g}s"
    return [
        *("--recrawl-mode", "fixed", "--recrawl-after", every, "--recrawl-min", every),
        *("--recrawl-jitter", "0"),
    ]


def site_requests(servers: Iterable[RemoteServer]) -> list[tuple[float, str]]:
    """(arrival time, URL) of every request the site has logged, in arrival order."""
    return sorted((r.t, s.url(r.path)) for s in servers for r in s.log)


def _robots(url: str) -> bool:
    return url.endswith("/robots.txt")


def first_requests(requests: Iterable[tuple[float, str]]) -> dict[str, float]:
    """Each page's first request time (robots.txt apart), of requests in arrival order."""
    out: dict[str, float] = {}
    for t, url in requests:
        if not _robots(url):
            out.setdefault(url, t)
    return out


@dataclass(frozen=True)
class Phases:
    """Page requests of the first cycle (before ``c``) and the revisit window (``c`` to ``d``):
    a page's first request is a first fetch, any later one a revisit; robots.txt apart."""

    first: int  # first fetches before c
    overlap: int  # revisits before c: pages due again while the first cycle still ran
    revisits: int  # revisits in the window
    late_first: int  # first fetches in the window: 0 when the first cycle was complete at c
    robots: tuple[int, int]  # robots.txt requests before c, in the window
    span: float  # seconds from the first page request to the last one before c


def phases(requests: Iterable[tuple[float, str]], c: float, d: float) -> Phases:
    seen: set[str] = set()
    n: Counter[tuple[bool, str]] = Counter()
    before: list[float] = []
    for t, url in sorted(requests):
        if t >= d:
            break
        window = t >= c
        kind = "robots" if _robots(url) else "again" if url in seen else "first"
        n[window, kind] += 1
        seen.add(url)
        if not window and kind != "robots":
            before.append(t)
    span = before[-1] - before[0] if before else 0.0
    robots = (n[False, "robots"], n[True, "robots"])
    return Phases(
        n[False, "first"], n[False, "again"], n[True, "again"], n[True, "first"], robots, span
    )


def per_request(cycle: float, window: float, p: Phases) -> tuple[float | None, float | None]:
    """(per first fetch, per revisit) of a quantity that sums to ``cycle`` over the first cycle
    and to ``window`` over the revisit window: a revisit costs the window's total over its
    revisits; a first fetch, the cycle's total less its revisits at that cost, over its first
    fetches (None: no request to divide by)."""
    if not p.revisits:
        return None, None
    revisit = window / p.revisits
    return ((cycle - revisit * p.overlap) / p.first if p.first else None), revisit


@dataclass(frozen=True)
class Point:
    """The crawl at one moment: CPU-seconds since the seed (worker, kafka, cassandra; None: not
    measured) and the worker's metrics."""

    t: float  # epoch seconds
    cpu: dict[str, float | None]
    values: dict[Key, float]
    stored: dict[str, int] = field(default_factory=dict)  # topic_sizes
    read_s: float = 0.0  # how long reading the topics and metrics took, before ``t``


def point(topo: Topology, seeded: Seeded) -> Point:
    """The slow readings first (the broker's end offsets, then ``/metrics``), the CPU last: a
    second between them shifts a window's messages against its CPU (seen while crawling)."""
    began = time.monotonic()
    stored, values = topic_sizes(topo), metrics(topo)
    snap = seeded.snapshot()
    cpu = {"worker": snap.cpu_s, **snap.service_cpu_s}
    return Point(time.time(), cpu, values, stored, time.monotonic() - began)


def _total(values: dict[Key, float], name: str) -> float:
    return sum(v for (n, _), v in values.items() if n == name)


# worker metrics counted per request: (report name, /metrics sample, scale)
COUNTED = (
    ("frontier_batches", "streamcrawl_frontier_batch_events_count", 1.0),
    ("frontier_events", "streamcrawl_frontier_batch_events_sum", 1.0),
    ("frontier_apply_ms", "streamcrawl_frontier_batch_seconds_sum", 1e3),
    ("sink_batches", "streamcrawl_sink_write_latency_seconds_count", 1.0),
    ("sink_write_ms", "streamcrawl_sink_write_latency_seconds_sum", 1e3),
)
BY_LABEL = (  # (report prefix, /metrics sample, label)
    ("sent", "streamcrawl_kafka_messages_sent_total", "topic"),
    ("sink_records", "streamcrawl_sink_records_total", "kind"),
)


def window_totals(
    p0: Point, p1: Point, p2: Point, idle: dict[str, float | None]
) -> dict[str, tuple[float, float]]:
    """Each quantity over the first cycle (p0 to p1) and the revisit window (p1 to p2): CPU ms
    (the worker's as measured, and each process's less its idle rate), worker metrics."""
    out: dict[str, tuple[float, float]] = {}

    def add(name: str, at: list[float | None], rate: float = 0.0) -> None:
        """``at``: the running total at p0, p1 and p2 (None: not measured)."""
        a, b, c = at
        if a is not None and b is not None and c is not None:
            out[name] = (b - a - rate * (p1.t - p0.t), c - b - rate * (p2.t - p1.t))

    points = (p0, p1, p2)
    for k in p0.cpu:
        ms = [None if (v := p.cpu.get(k)) is None else 1e3 * v for p in points]
        if k == "worker":
            add("worker_cpu_ms", ms)
        add(f"{k}_cpu_ms_minus_idle", ms, rate=1e3 * (idle.get(k) or 0.0))
    for name, sample, scale in COUNTED:
        add(name, [scale * _total(p.values, sample) for p in points])
    for prefix, sample, label in BY_LABEL:
        labelled = [by_label(p.values, sample, label) for p in points]
        for value in sorted(set(labelled[2])):
            add(f"{prefix}.{value}", [v.get(value, 0.0) for v in labelled])
    for topic in sorted(p2.stored):  # changelogs too: the frontier's table writes
        add(f"stored.{topic}", [p.stored.get(topic, 0) for p in points])
    return out


def revisit_report(
    p: tuple[Point, Point, Point],
    requests: list[tuple[float, str]],
    fetches: list[Fetch],
    idle: dict[str, float | None],
) -> dict[str, Any]:
    """The first cycle and the revisit window per request (``per_request``), their ratio, and
    the share of the window's page records that are 304s found unchanged."""
    p0, p1, p2 = p
    ph = phases(requests, p1.t, p2.t)
    totals = window_totals(p0, p1, p2, idle)
    split = {k: per_request(a, b, ph) for k, (a, b) in totals.items()}
    first = {k: None if f is None else round(f, 3) for k, (f, _) in split.items()}
    again = {k: None if r is None else round(r, 3) for k, (_, r) in split.items()}
    seen = [f for f in fetches if p1.t <= f.fetched_at < p2.t]
    unchanged = sum(f.status == 304 and f.change == "unchanged" for f in seen)

    def ratio(k: str) -> float | None:
        a, b = first.get(k), again.get(k)
        return round(b / a, 3) if a and b is not None else None

    def per_batch(i: int) -> float | None:
        events, batches = (
            totals.get(k, (0.0, 0.0))[i] for k in ("frontier_events", "frontier_batches")
        )
        return round(events / batches, 2) if batches else None

    cycle_requests = ph.first + ph.overlap
    return {
        "first_cycle": {
            "seconds": round(p1.t - p0.t, 2),
            "first_fetches": ph.first,
            "revisits": ph.overlap,
            "robots": ph.robots[0],
            "requests_per_s": round((cycle_requests - 1) / ph.span, 1) if ph.span else None,
            "worker_cpu_ms_per_request": round(
                totals["worker_cpu_ms"][0] / max(cycle_requests, 1), 3
            ),
            "frontier_events_per_batch": per_batch(0),
            "sink_lag_at_end": _total(p1.values, "streamcrawl_sink_consumer_lag"),
        },
        "revisit_window": {
            "seconds": round(p2.t - p1.t, 2),
            "revisits": ph.revisits,
            "first_fetches": ph.late_first,
            "robots": ph.robots[1],
            "requests_per_s": round(ph.revisits / (p2.t - p1.t), 1),
            "page_records": len(seen),
            "answered_304": round(unchanged / len(seen), 4) if seen else None,
            "frontier_events_per_batch": per_batch(1),
            "sink_lag_at_end": _total(p2.values, "streamcrawl_sink_consumer_lag"),
        },
        "boundary_read_s": [round(p1.read_s, 3), round(p2.read_s, 3)],
        "ratio": ratio("worker_cpu_ms"),
        "ratio_minus_idle": ratio("worker_cpu_ms_minus_idle"),
        "per_first_fetch": first,
        "per_revisit": again,
    }


def _wait(topo: Topology, done: Callable[[], float | None], deadline: float, what: str) -> float:
    """Poll ``done`` every second until it returns a value; RuntimeError past ``deadline``."""
    while (value := done()) is None:
        topo.check_workers(f" {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out {what}")
        time.sleep(1.0)
    return value


def revisit_probe(
    args: argparse.Namespace,
    servers: list[RemoteServer],
    topo: Topology,
    idle: dict[str, float | None],
) -> dict[str, Any]:
    """Seed a continuous crawl, wait for its first cycle, measure a window of revisits."""
    pages = args.origins * args.pages
    m0, stored0 = metrics(topo), topic_sizes(topo)
    seeded = seed(
        topo,
        [s.url("/") for s in servers],
        delay=args.delay,
        max_pages=2 * pages,
        per_origin_concurrency=args.per_origin_concurrency,
        flags=revisit_flags(args.revisits),
    )
    zero = {"worker": 0.0, **{k: 0.0 if m else None for k, m in seeded.services.items()}}
    p0 = Point(seeded.t0_unix, zero, m0, stored0)
    deadline = time.monotonic() + args.timeout

    def cycle_done() -> float | None:
        firsts = first_requests(site_requests(servers))
        return max(firsts.values()) if len(firsts) >= pages else None

    last_first = _wait(topo, cycle_done, deadline, "in the first cycle")
    time.sleep(max(0.0, last_first + SETTLE_S - time.time()))
    p1 = point(topo, seeded)

    def window_done() -> float | None:
        n = sum(t >= p1.t and not _robots(u) for t, u in site_requests(servers))
        return n if n >= args.revisit_cycles * pages else None

    _wait(topo, window_done, deadline, "in the revisit window")
    p2 = point(topo, seeded)
    time.sleep(SETTLE_S)  # the window's last page records reach the topic
    report = revisit_report((p0, p1, p2), site_requests(servers), page_fetches(topo), idle)
    return {**report, "peak_rss_mb": round(seeded.workers.peak_rss_mb, 1)}
