"""One function per crawler under test.  Each takes a ``RunContext`` and returns a result dict.

The harness (``bench/run.py``) starts nginx, calls the runner, stops nginx and adds what the
access log shows (pages fetched, missed, duplicates, private fetches, per-origin gaps).  A runner
only runs and measures the crawler:

    {"wall_s", "cpu_s", "peak_rss_mb", "returncode", "timed_out",
     "service_cpu_s": {"kafka": s, "cassandra": s},   # only for the topology, else {}
     "self_report": {...},                            # what the crawler said about itself
     "rss_samples": [(t, MB), ...],                   # kept for the memory run
     "warc_dir", "warc_files", "warc_bytes"}          # only the crawlers that archive

A runner that cannot run (crawler not installed) raises ``NotRun(reason)``: the report shows
"not run: reason", never zeros.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path

from bench.context import (
    BENCH_PYTHON,
    REPO,
    NotRun,
    RunContext,
    code_state,
    py_spy_argv,
    streamcrawl_binary,
    streamcrawl_version,
)
from bench.kafka_runner import run_kafka_topology
from bench.measure import Measured, run_measured
from bench.warc_rows import written

__all__ = ["LABELS", "REPO", "RUNNERS", "NotRun", "RunContext", "streamcrawl_version"]

COMPETITORS = Path(__file__).resolve().parent / "competitors"


def _measure(argv: list[str], ctx: RunContext, env: dict[str, str] | None = None) -> Measured:
    if ctx.profile:
        argv = py_spy_argv(argv, ctx.profile)
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return run_measured(
        argv, env=full_env, cwd=ctx.workdir, timeout=ctx.timeout, log_dir=ctx.workdir / "logs"
    )


def _result(m: Measured, self_report: dict) -> dict:
    d = asdict(m)
    d.pop("argv")
    d["service_cpu_s"] = {}
    d["self_report"] = self_report
    return d


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return {}


def run_scrapy(ctx: RunContext) -> dict:
    """Scrapy CrawlSpider (bench/competitors/scrapy_spider.py) in the benchmark venv."""
    argv = [
        BENCH_PYTHON,
        str(COMPETITORS / "scrapy_spider.py"),
        "--seeds",
        str(ctx.seeds_file),
        "--out",
        str(ctx.workdir / "out"),
    ]
    if ctx.delay:
        argv += ["--delay", str(ctx.delay)]
    if ctx.stock:
        argv.append("--stock")
    if ctx.max_pages:
        raise NotRun("page budgets are only wired for streamcrawl")
    m = _measure(argv, ctx)
    return _result(m, _last_json(m.stdout))


def run_crawlee(ctx: RunContext) -> dict:
    """Crawlee ParselCrawler (bench/competitors/crawlee_crawler.py) in the benchmark venv."""
    if ctx.delay or ctx.max_pages:
        raise NotRun("the crawlee runner has no per-origin delay or page budget wired")
    argv = [
        BENCH_PYTHON,
        str(COMPETITORS / "crawlee_crawler.py"),
        "--seeds",
        str(ctx.seeds_file),
        "--out",
        str(ctx.workdir / "out"),
    ]
    if ctx.stock:
        argv.append("--stock")
    m = _measure(argv, ctx, env={"CRAWLEE_LOG_LEVEL": "WARNING"})
    return _result(m, _last_json(m.stdout))


def embedded_argv(ctx: RunContext, warc: Path | None = None) -> list[str]:
    """The ``streamcrawl crawl`` command line for this run (docs/cli.md); with ``warc``,
    the same crawl archiving into that directory."""
    exe = streamcrawl_binary()
    # Without a budget under test, leave room so that the budget never truncates the crawl.
    budget = ctx.max_pages or 2 * ctx.spec.expected_pages
    per_origin = (
        []
        if ctx.per_origin_concurrency is None
        else ["--per-origin-concurrency", str(ctx.per_origin_concurrency)]
    )
    return [
        exe,
        "crawl",
        *ctx.seeds,
        "--out",
        str(ctx.workdir / "out"),
        "--state-dir",
        str(ctx.workdir / "state"),
        "--delay",
        str(ctx.delay),
        "--concurrency",
        "64",
        "--max-pages",
        str(budget),
        "--allow-host",
        "127.0.0.1",
        "--user-agent",
        "bench-streamcrawl",
        "--json",
        *per_origin,
        *(["--warc", str(warc)] if warc else []),
    ]


def request_flags(ctx: RunContext) -> list[str]:
    """The request options of the ``embedded-requests`` row (docs/requests.md): a header on
    every request, one per origin, and a cookie jar per origin with a preset cookie, so that
    every request builds its headers, matches its jar and sends a Cookie header."""
    flags = ["--header", "X-Bench: 1", "--cookies"]
    for origin in sorted({seed.rstrip("/") for seed in ctx.seeds}):
        flags += ["--header-for", origin, "X-Origin: 1", "--cookie-for", origin, "bench=1"]
    return flags


def run_streamcrawl_requests(ctx: RunContext) -> dict:
    """``embedded`` with request options: what headers and cookies cost a page."""
    return run_streamcrawl_embedded(ctx, extra=request_flags(ctx))


# The extractors of the ``embedded-extract`` row (docs/extraction.md): five selectors that match
# every page of the bench site (bench/site.py), first matches and a list, texts and attributes.
EXTRACT_FLAGS = (
    "--extract", "title=title",
    "--extract", "heading=h1#top",
    "--extract", "lang=html::attr(lang)",
    "--extract", "first_section=p#sec1::text",
    "--extract", "links=all:p > a::attr(href)",
)  # fmt: skip


def run_streamcrawl_extract(ctx: RunContext) -> dict:
    """``embedded`` with five extractors: what extraction costs a page (target: at most 15 %
    more CPU per page than ``embedded``)."""
    return run_streamcrawl_embedded(ctx, extra=list(EXTRACT_FLAGS))


def run_streamcrawl_proxy(ctx: RunContext) -> dict:
    """``embedded`` through Debian's tinyproxy (``--proxy``): the crawler's CPU, and the
    proxy's own CPU as a service (``service_cpu_s["proxy"]``), which users pay for too."""
    import psutil

    from bench.proxy import binary, tinyproxy

    if binary() is None:
        raise NotRun("tinyproxy not installed (apt-get install tinyproxy)")
    with tinyproxy(ctx.workdir / "proxy") as proxy:
        before = psutil.Process(proxy.pid).cpu_times()
        res = run_streamcrawl_embedded(ctx, extra=["--proxy", proxy.url])
        after = psutil.Process(proxy.pid).cpu_times()
        res["service_cpu_s"] = {
            "proxy": (after.user + after.system) - (before.user + before.system)
        }
        res["proxied_requests"] = len(proxy.requests())
    return res


def run_streamcrawl_embedded(
    ctx: RunContext, warc: bool = False, extra: list[str] | None = None
) -> dict:
    """``streamcrawl crawl`` (embedded) as a subprocess; its --json summary is self_report.
    ``warc``: archiving into ``<run>/warc`` (what it wrote: ``warc_rows.written``)."""
    exe = streamcrawl_binary()
    probe = subprocess.run([exe, "crawl", "--help"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        raise NotRun(
            f"`streamcrawl crawl --help` failed: {(probe.stderr or probe.stdout).strip()[-200:]}"
        )
    if warc and "--warc" not in probe.stdout:
        raise NotRun("this `streamcrawl crawl` has no --warc option")
    code = code_state()
    warc_dir = ctx.workdir / "warc" if warc else None
    m = _measure([*embedded_argv(ctx, warc_dir), *(extra or [])], ctx)
    if m.returncode != 0 and not m.timed_out:
        raise RuntimeError(f"streamcrawl crawl exited {m.returncode}: {m.stderr_tail[-500:]}")
    res = _result(m, {**_last_json(m.stdout), "code": code})
    return {**res, **written(warc_dir)} if warc_dir else res


# Wget's own fix for the tracking parameters the other crawlers strip (bench/README.md, "Equal
# work"): links whose query carries one are not followed (their plain spelling is linked too).
WGET_REJECT = r"[?&](utm_[a-z]+|gclid|fbclid)="


def wget_argv(ctx: RunContext, exe: str = "wget") -> list[str]:
    """GNU Wget's command line for this run: recursive without a depth limit, robots.txt obeyed,
    a WARC file ``<run>/warc/wget.warc.gz``, no mirror left behind (``--delete-after``).

    Only the first root is given: wget runs one recursive retrieval per URL on its command
    line, each with its own set of seen URLs, so given every root it fetches the site once per
    root; every page is reachable from any root. All origins are 127.0.0.1 on other ports, and
    wget's host check ignores ports, so no ``--span-hosts`` is needed."""
    run = ctx.workdir
    return [
        exe,
        "--recursive",
        "--level=inf",
        "--execute=robots=on",
        "--no-verbose",
        "--user-agent=bench-wget",
        f"--warc-file={run / 'warc' / 'wget'}",
        f"--warc-tempdir={run}",
        f"--directory-prefix={run / 'wget-files'}",
        "--delete-after",
        *([] if ctx.stock else [f"--reject-regex={WGET_REJECT}"]),
        ctx.seeds[0],
    ]


def run_wget(ctx: RunContext) -> dict:
    """GNU Wget (``wget_argv``), one process; exit 8 (an error response from the server, e.g. a
    404 for a link) still counts as a crawl, its code kept in self_report."""
    if ctx.delay or ctx.max_pages:
        raise NotRun("the wget runner has no per-origin delay or page budget wired")
    exe = shutil.which("wget")
    if exe is None:
        raise NotRun("wget not installed (apt-get install wget)")
    (ctx.workdir / "warc").mkdir(parents=True, exist_ok=True)
    m = _measure(wget_argv(ctx, exe), ctx)
    if m.returncode not in (0, 8) and not m.timed_out:
        raise RuntimeError(f"wget exited {m.returncode}: {m.stderr_tail[-500:]}")
    summary = [ln for ln in m.stderr_tail.splitlines() if ln.startswith("Downloaded:")]
    report = {"returncode": m.returncode, "summary": summary[-1] if summary else None}
    return {**_result(m, report), **written(ctx.workdir / "warc")}


RUNNERS = {
    "scrapy": run_scrapy,
    "crawlee": run_crawlee,
    "embedded": run_streamcrawl_embedded,
    "embedded-warc": lambda ctx: run_streamcrawl_embedded(ctx, warc=True),
    "embedded-requests": run_streamcrawl_requests,
    "embedded-extract": run_streamcrawl_extract,
    "embedded-text": lambda ctx: run_streamcrawl_embedded(ctx, extra=["--text"]),
    "embedded-proxy": run_streamcrawl_proxy,
    "wget": run_wget,
    "kafka-1": lambda ctx: run_kafka_topology(ctx, workers=1),
    "kafka-2": lambda ctx: run_kafka_topology(ctx, workers=2),
    "kafka-1-extract": lambda ctx: run_kafka_topology(ctx, workers=1, flags=EXTRACT_FLAGS),
    "kafka-1-text": lambda ctx: run_kafka_topology(ctx, workers=1, flags=("--text",)),
}

LABELS = {
    "scrapy": "Scrapy (CrawlSpider)",
    "crawlee": "Crawlee for Python (ParselCrawler)",
    "embedded": "streamcrawl crawl (embedded)",
    "embedded-warc": "streamcrawl crawl (embedded) --warc",
    "embedded-requests": "streamcrawl crawl (embedded) --header --cookies",
    "embedded-extract": "streamcrawl crawl (embedded) --extract x5",
    "embedded-text": "streamcrawl crawl (embedded) --text",
    "embedded-proxy": "streamcrawl crawl (embedded) --proxy (tinyproxy)",
    "wget": "GNU Wget -r --warc-file",
    "kafka-1": "streamcrawl Kafka topology, 1 worker",
    "kafka-2": "streamcrawl Kafka topology, 2 workers",
    "kafka-1-extract": "streamcrawl Kafka topology, 1 worker, --extract x5",
    "kafka-1-text": "streamcrawl Kafka topology, 1 worker, --text",
}
