"""How fresh a continuous crawl keeps its copies, measured: the installed ``streamcrawl crawl`` on
a local living site, adaptive revisits against fixed ones. The measured counterpart of
``bench/probes/freshness_sim.py``, whose change process, policies and figures it reuses.

Run: ``python -m bench.probes.freshness [--pages N] [--minutes M] [--scale S] [--runs K] [--json]``.
Loopback only. A run takes 3 x M minutes and a CPU probe of under a minute (defaults: 20 min).

The site: ``tests/living_site.py`` behind ``tests/httpserver.py``'s ``RecordingServer`` (a thread
of this process) on 127.0.0.1: a home page linking ``N`` pages of about 24 KB and 30 links, with
ETag, Last-Modified and 304s, no sitemap. They change as in the simulation (``living_web``: 10 %
every 5 min on average, 30 % hourly, 60 % never, Poisson) with time running ``S`` times faster:
a thread applies each change at its scaled time, and the site's version history logs it. Rates
and intervals are given in simulated time; the crawl's flags are scaled.

Run k crawls three fresh sites with the changes of seed k, M minutes each, then SIGINT:
adaptive at the simulation's headline setting (after 1 h, min 2 min, max 1 d); fixed at the same
budget (interval = N / the adaptive fetches per hour); fixed at the interval the simulation finds
to reach, on these changes, the adaptive run's measured freshness (never faster than the site's
politeness allows). After a warm-up they are measured from ``pages.jsonl`` and the site's logs:
freshness, the share of page-time in which the crawler's copy (the version whose body digest its
latest record names) is the live version; fetches per hour; the share of revisits answered 304;
each revisit's gap over the interval the policy had it due at (1 +/- jitter when on time); the
smallest gap between request arrivals, robots.txt included (the crawl delay is the floor). What
fixed revisits would need for the adaptive freshness, or give at its rate, is interpolated between
the two fixed crawls; ``simulated`` is the simulation's freshness for the same policy and changes.

CPU (psutil: user + system of the crawler process): a static site of ``--cpu-pages`` pages crawled
with fixed revisits every second, so that once every page has been fetched every request is a 304
revisit; both phases run at the politeness rate (one request per ``--delay``), so the CPU per
request of the first cycle and of a later window of revisits are compared at the same rate.

Informs: whether the adaptive revisit schedule keeps copies fresher than fixed intervals for the
same fetches on a real crawl, and what a 304 revisit costs the embedded crawl against a first
fetch (docs/performance.md, "Continuous crawling: freshness and the cost of a revisit").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from bench.context import streamcrawl_binary
from bench.probes.freshness_sim import HOUR, MAIN, Web, crawl, duration, living_web, solve
from streamcrawl.agents.policy.revisit import RevisitPolicy
from streamcrawl.schemas.records import CrawlPolicy, RecrawlMode
from tests.httpserver import RecordingServer
from tests.living_site import LivingSite

History = Sequence[tuple[float, int]]  # (time, version), ascending
Record = dict[str, Any]  # one line of pages.jsonl
SAMPLE = 0.1  # seconds between CPU samples of the crawler
STOP_WAIT = 60.0  # seconds a crawler gets to exit after SIGINT
INTERRUPTED = 130  # the exit status of a crawl stopped by SIGINT (resumable)


def fresh_seconds(copies: History, history: History, start: float, end: float) -> float:
    """Seconds of [start, end) in which the crawler's copy was the live page. ``copies``: (fetch
    time, version fetched); ``history``: (change time, new version), the page's creation first.
    Before its first fetch a page has no copy: stale."""
    if end <= start:
        return 0.0
    cuts = sorted({start, end, *(t for t, _ in (*copies, *history) if start < t < end)})
    fetched, changed = [t for t, _ in copies], [t for t, _ in history]
    total = 0.0
    for a, b in pairwise(cuts):
        i, j = bisect_right(fetched, a), bisect_right(changed, a)
        if i and j and copies[i - 1][1] == history[j - 1][1]:
            total += b - a
    return total


def by_page(records: Iterable[Record], paths: Iterable[str]) -> dict[str, list[Record]]:
    """The records of each of ``paths`` (URL paths), in fetch order."""
    out: dict[str, list[Record]] = {path: [] for path in paths}
    for r in sorted(records, key=lambda r: float(r["fetched_at"])):
        out.get(urlsplit(r["url"]).path, []).append(r)
    return out


def held(pages: dict[str, list[Record]], digests: dict[str, dict[str, int]]) -> dict[str, History]:
    """(fetched_at, version) of each record of each page (``by_page``), the version named by its
    body digest (``digests``: path -> sha256 -> version); a digest of no version of the page is
    version 0, never live."""
    return {
        path: [(r["fetched_at"], digests[path].get(r["body_sha256"], 0)) for r in records]
        for path, records in pages.items()
    }


def freshness(
    copies: Mapping[str, History], histories: Mapping[str, History], start: float, end: float
) -> float:
    """The share of (page, time) in [start, end) in which the copy was the live page."""
    fresh = sum(fresh_seconds(copies[p], histories[p], start, end) for p in histories)
    return fresh / (len(histories) * (end - start))


def due_ratios(records: Sequence[Record], policy: RevisitPolicy, scale: float) -> list[float]:
    """Each revisit's gap after the fetch before it (one page's records, in order) over the
    interval ``policy`` (simulated seconds) had it due at: within 1 +/- jitter when on time."""
    level, ratios = policy.first("page"), []
    for before, after in pairwise(records):
        gap = (after["fetched_at"] - before["fetched_at"]) * scale
        ratios.append(gap / policy.interval(level))
        level = policy.next(level, after["change"] == "changed", "page")
    return ratios


def cpu_at(samples: Sequence[tuple[float, float]], t: float) -> float:
    """CPU seconds at time ``t``, linear between (time, CPU seconds) samples; clamped."""
    i = bisect_right([s for s, _ in samples], t)
    if i == 0 or i == len(samples):
        return samples[min(i, len(samples) - 1)][1]
    (t0, c0), (t1, c1) = samples[i - 1], samples[i]
    return c0 + (c1 - c0) * (t - t0) / (t1 - t0)


WORDS = ("crawl", "fresh", "copy", "page", "site", "change", "revisit", "origin", "link", "lane")
LINKS = 30  # links per page, and about PAGE_BYTES of text: the bench's synthetic web (site.py)
PAGE_BYTES = 24 * 1024


def page_html(i: int, pages: int) -> str:
    """Page i: the home page and the next pages (a ring), text, and ``{version}`` for the site."""
    hrefs = ["/", *(f"/p/{(i + k) % pages}" for k in range(1, min(LINKS, pages)))]
    items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in hrefs)
    text = " ".join(random.Random(i).choices(WORDS, k=PAGE_BYTES // 7))
    head = f"<!doctype html><html><head><title>/p/{i} v{{version}}</title></head>"
    return (
        f"{head}<body><h1>/p/{i}</h1><p>version {{version}}</p><ul>{items}</ul><p>{text}</p></body>"
    )


class Living:
    """A living site on 127.0.0.1: a home page linking ``pages`` pages (``/p/0``...)."""

    def __init__(self, pages: int) -> None:
        self.paths = [f"/p/{i}" for i in range(pages)]
        spec: dict[str, list[str] | str] = {"/": self.paths}
        spec.update((path, page_html(i, pages)) for i, path in enumerate(self.paths))
        self.site = LivingSite(spec, sitemap=False)
        self.server = RecordingServer(self.site.routes())
        self.digests = {p: {hashlib.sha256(self.site.body(p)).hexdigest(): 1} for p in self.paths}
        self.stopped = threading.Event()

    def drive(self, web: Web, scale: float, t0: float) -> None:
        """Change page i at each of ``web.changes[i]`` (simulated seconds after ``t0``, scaled)
        until ``stopped``; remember each version's body digest."""
        events = sorted((t, i) for i, times in enumerate(web.changes) for t in times)
        for t, i in events:
            if self.stopped.wait(max(0.0, t0 + t / scale - time.time())):
                return
            path = self.paths[i]
            version = self.site.change(path)
            self.digests[path][hashlib.sha256(self.site.body(path)).hexdigest()] = version


def run_crawler(
    url: str, flags: list[str], delay: float, workdir: Path, done: Callable[[], bool]
) -> tuple[list[Record], list[tuple[float, float]], float]:
    """``streamcrawl crawl url`` until ``done()``, then SIGINT: its pages.jsonl records, its CPU
    samples (time, user + system seconds) and the time it was told to stop."""
    workdir.mkdir(parents=True)
    out, stderr = workdir / "out", workdir / "stderr.log"
    argv = [streamcrawl_binary(), "crawl", url, "--out", str(out), "--no-progress", "--json"]
    argv += ["--state-dir", str(workdir / "state"), "--delay", f"{delay:g}", *flags]
    with stderr.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    samples: list[tuple[float, float]] = []
    try:
        meter = psutil.Process(proc.pid)
        while proc.poll() is None and not done():
            cpu = meter.cpu_times()
            samples.append((time.time(), cpu.user + cpu.system))
            time.sleep(SAMPLE)
        stopped = time.time()
        exited = proc.poll()
        proc.send_signal(signal.SIGINT)
        proc.wait(STOP_WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if exited is not None or proc.returncode != INTERRUPTED:
        tail = stderr.read_text(errors="replace")[-2_000:]
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{tail}")
    lines = (out / "pages.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines], samples, stopped


def revisits(
    scale: float, after: float, bounds: tuple[float, float] | None = None
) -> RevisitPolicy:
    """Revisits in simulated seconds, adaptive within ``bounds`` or fixed, whose flags scaled
    down the CLI accepts (every interval at least 1 s): the feed minimum, the ladder's first
    step, is a second of real time when the simulation's (``min / 4``) would be shorter."""
    low, high = bounds or (after, after)
    mode: RecrawlMode = "fixed" if bounds is None else "adaptive"
    spec = CrawlPolicy(
        crawl_id="bench",
        recrawl_after=after,
        recrawl_min=low,
        recrawl_max=high,
        recrawl_feed_min=max(scale, low / 4),
        recrawl_mode=mode,
    )
    policy = RevisitPolicy.from_policy(spec)
    assert policy is not None
    return policy


def recrawl_flags(policy: RevisitPolicy, scale: float) -> list[str]:
    """The crawl flags of ``policy`` (simulated seconds), ``scale`` times faster."""
    bounds = {"after": policy.after, "min": policy.min, "max": policy.max}
    flags = [f"--recrawl-{name}={value / scale:.6f}s" for name, value in bounds.items()]
    flags.append(f"--recrawl-feed-min={policy.feed_min / scale:.6f}s")
    return [*flags, f"--recrawl-mode={policy.mode}", f"--recrawl-jitter={policy.jitter:g}"]


@dataclass(frozen=True, slots=True)
class Run:
    """One crawl of the living site, measured after the warm-up."""

    interval: float  # fixed: the interval; adaptive: recrawl_after (simulated seconds)
    freshness: float
    simulated: float  # the simulation's freshness for the same policy and changes
    fetches_per_hour: float
    revisits_304: float  # share of revisits answered 304
    due_p50: float  # revisit gap / the interval it was due at: median...
    due_p95: float  # ...and 95th percentile
    gap: float  # the smallest gap between request arrivals at the site (s)
    unknown: int  # records whose digest is no version of their page


def measure(web: Web, policy: RevisitPolicy, args: argparse.Namespace, workdir: Path) -> Run:
    """Crawl a fresh living site with ``web``'s changes under ``policy`` for ``--minutes``."""
    living = Living(args.pages)
    with living.server as srv:
        t0 = time.time()
        driver = threading.Thread(target=living.drive, args=(web, args.scale, t0), daemon=True)
        driver.start()
        try:
            flags = recrawl_flags(policy, args.scale)
            end = t0 + args.minutes * 60
            records, _, stopped = run_crawler(
                srv.url("/"), flags, args.delay, workdir, lambda: time.time() >= end
            )
        finally:
            living.stopped.set()
            driver.join()
        gap = min(srv.gaps(), default=0.0)
    start = t0 + args.warmup * HOUR / args.scale
    pages = by_page(records, living.paths)
    copies = held(pages, living.digests)
    counted = [r for rs in pages.values() for r in rs if start <= r["fetched_at"] < stopped]
    again = [r for r in counted if r["change"] != "new"]
    ratios = [x for rs in pages.values() for x in due_ratios(rs, policy, args.scale)]
    twentieths = statistics.quantiles(ratios, n=20)
    return Run(
        interval=policy.after,
        freshness=freshness(copies, {p: living.site.history(p) for p in pages}, start, stopped),
        simulated=crawl(web, policy, args.warmup * HOUR).freshness,
        fetches_per_hour=len(counted) * HOUR / ((stopped - start) * args.scale),
        revisits_304=sum(r["status"] == 304 for r in again) / max(1, len(again)),
        due_p50=twentieths[9],
        due_p95=twentieths[18],
        gap=gap,
        unknown=sum(v == 0 for page in copies.values() for _, v in page),
    )


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU of the crawler per request: first fetches against 304 revisits, at one rate."""

    first_ms: float
    revisit_ms: float
    ratio: float  # revisit_ms / first_ms
    first_per_s: float  # requests per second in each window
    revisit_per_s: float
    revisits_304: float  # share of the revisit window's requests answered 304


def cpu_probe(args: argparse.Namespace, workdir: Path) -> Cpu:
    """The static site crawled until every page was fetched once and twice revisited."""
    living = Living(args.cpu_pages)
    requests = 3 * (args.cpu_pages + 1) + 1  # robots.txt, 3 cycles of the pages and home
    limit: float = time.time() + 60 + 10 * requests * args.delay
    flags = ["--recrawl-mode=fixed", "--recrawl-after=1s"]
    with living.server as srv:

        def done() -> bool:
            return len(srv.log) >= requests or time.time() > limit

        _, samples, _ = run_crawler(srv.url("/"), flags, args.delay, workdir, done)
    served = living.site.served()
    first: dict[str, float] = {}
    for s in served:
        first.setdefault(s.path, s.t)
    a, b = min(first.values()), max(first.values())
    c, d = b + 1.0, samples[-1][0]  # a second after the last first fetch: revisits only
    later = [s for s in served if c < s.t <= d]
    first_ms = (cpu_at(samples, b) - cpu_at(samples, a)) * 1e3 / max(1, len(first) - 1)
    revisit_ms = (cpu_at(samples, d) - cpu_at(samples, c)) * 1e3 / max(1, len(later))
    return Cpu(
        first_ms=first_ms,
        revisit_ms=revisit_ms,
        ratio=revisit_ms / first_ms,
        first_per_s=(len(first) - 1) / (b - a),
        revisit_per_s=len(later) / (d - c),
        revisits_304=sum(s.status == 304 for s in later) / max(1, len(later)),
    )


def through(x: float, a: tuple[float, float], b: tuple[float, float]) -> float:
    """y at ``x`` on the line through points ``a`` and ``b`` (b's y if they share x)."""
    return b[1] if a[0] == b[0] else a[1] + (x - a[0]) * (b[1] - a[1]) / (b[0] - a[0])


@dataclass(frozen=True, slots=True)
class Matched:
    """Fixed revisits against the adaptive run, linear through the two fixed runs."""

    freshness: float  # at the adaptive fetches/h
    fetches_per_hour: float  # at the adaptive freshness
    ratio: float  # adaptive fetches / those


def matched(own: Run, a: Run, b: Run) -> Matched:
    rates = (a.fetches_per_hour, a.freshness), (b.fetches_per_hour, b.freshness)
    fetches = through(own.freshness, *((r[1], r[0]) for r in rates))
    return Matched(through(own.fetches_per_hour, *rates), fetches, own.fetches_per_hour / fetches)


LABELS = ("adaptive", "fixed, same fetches/h", "fixed, same freshness")
Result = tuple[dict[str, Run], Matched, Cpu]


def one_run(seed: int, args: argparse.Namespace, root: Path) -> Result:
    """Run ``seed``: the three crawls of the living site, and the CPU probe."""
    web = living_web(args.pages, args.minutes * 60 * args.scale / HOUR, seed)
    scale = args.scale
    own = measure(web, revisits(scale, HOUR, MAIN), args, root / f"{seed}-adaptive")
    budget = revisits(scale, max(scale, args.pages * HOUR / own.fetches_per_hour))
    same = measure(web, budget, args, root / f"{seed}-budget")

    def simulated(interval: float) -> float:
        return crawl(web, revisits(scale, interval), args.warmup * HOUR).freshness

    fastest = max(scale, 1.25 * args.pages * args.delay * scale)  # 80 % of the politeness limit
    target = max(fastest, solve(simulated, own.freshness, budget.after))
    fresh = measure(web, revisits(scale, target), args, root / f"{seed}-fresh")
    runs = dict(zip(LABELS, (own, same, fresh), strict=True))
    return runs, matched(own, same, fresh), cpu_probe(args, root / f"{seed}-cpu")


def median(items: Sequence[Any]) -> Any:
    """A dataclass whose every field is the median of that field over ``items``."""
    kind = type(items[0])
    return kind(*(statistics.median(getattr(x, f.name) for x in items) for f in fields(kind)))


def table(runs: dict[str, Run], fixed: Matched, cpu: Cpu, args: argparse.Namespace) -> str:
    hours = args.minutes * 60 * args.scale / HOUR
    lines = [
        f"{args.pages} pages (10 % change every 5 min, 30 % hourly, 60 % never) at {args.scale:g}x "
        f"time: {args.minutes:g} min per crawl = {hours:g} h simulated, the first "
        f"{args.warmup:g} h skipped; --delay {args.delay:g}s; jitter 0.1; medians of {args.runs} "
        "run(s). Intervals and fetches/h in simulated time.",
        "",
        "| crawl | interval | freshness | simulated | fetches/h | revisits 304 "
        "| revisit gap / due: p50, p95 | smallest arrival gap |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for label, r in runs.items():
        interval = f"after {duration(r.interval)}" if label == LABELS[0] else duration(r.interval)
        lines.append(
            f"| {label} | {interval} | {r.freshness:.3f} | {r.simulated:.3f} "
            f"| {r.fetches_per_hour:,.0f} | {r.revisits_304:.1%} | {r.due_p50:.2f}, "
            f"{r.due_p95:.2f} | {r.gap * 1e3:.1f} ms |"
        )
    lines += [
        "",
        f"Fixed, interpolated between its two crawls: freshness {fixed.freshness:.3f} at the "
        f"adaptive fetches/h; {fixed.fetches_per_hour:,.0f} fetches/h at the adaptive freshness "
        f"(adaptive / fixed fetches: {fixed.ratio:.2f}).",
        f"CPU per request ({args.cpu_pages} pages): first fetch {cpu.first_ms:.2f} ms "
        f"({cpu.first_per_s:.1f}/s), 304 revisit {cpu.revisit_ms:.2f} ms ({cpu.revisit_per_s:.1f}"
        f"/s, {cpu.revisits_304:.0%} 304); revisit / first = {cpu.ratio:.2f} (target <= 0.40).",
    ]
    if unknown := sum(r.unknown for r in runs.values()):
        lines.append(f"{unknown:g} records named a body digest of no version of their page.")
    return "\n".join(lines)


def as_json(runs: dict[str, Run], fixed: Matched, cpu: Cpu) -> dict[str, Any]:
    return {
        "runs": {k: asdict(v) for k, v in runs.items()},
        "fixed": asdict(fixed),
        "cpu": asdict(cpu),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.probes.freshness", description=__doc__)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=6.0, help="per crawl (3 per run)")
    parser.add_argument("--scale", type=float, default=120.0, help="simulated s per real s")
    parser.add_argument("--runs", type=int, default=1, help="runs of each figure (median)")
    parser.add_argument("--warmup", type=float, default=2.0, help="simulated hours skipped")
    parser.add_argument("--delay", type=float, default=0.02, help="the crawl's --delay (s)")
    parser.add_argument("--cpu-pages", type=int, default=500, help="pages of the CPU probe")
    parser.add_argument("--json", action="store_true", help="JSON instead of markdown")
    args = parser.parse_args(argv)
    if args.minutes * 60 * args.scale <= args.warmup * HOUR or min(args.pages, args.runs) < 1:
        parser.error("need --pages >= 1, --runs >= 1 and more simulated time than --warmup")
    if not 1 <= args.scale <= MAIN[0]:  # the CLI's shortest interval is 1 s
        parser.error(f"--scale must be within [1, {MAIN[0]:g}]: recrawl-min is {MAIN[0]:g} s")
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="freshness-") as tmp:
        results = [one_run(seed, args, Path(tmp)) for seed in range(args.runs)]
    runs = {label: median([r[label] for r, _, _ in results]) for label in LABELS}
    fixed, cpu = median([m for _, m, _ in results]), median([c for _, _, c in results])
    if not args.json:
        print(table(runs, fixed, cpu, args))
        print(f"\nWall time: {time.monotonic() - began:.0f} s.")
        return
    report = {"args": vars(args), "wall_s": time.monotonic() - began, **as_json(runs, fixed, cpu)}
    print(json.dumps({**report, "per_run": [as_json(*result) for result in results]}, indent=1))


if __name__ == "__main__":
    main()
