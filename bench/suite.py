"""The benchmark's parts: comparison, politeness-bound run, memory run, profiles.

Each crawler run gets a fresh nginx (its own access log) and a fresh work directory; the runner's
measurements are merged with what the access log shows.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import cpu_split, runners
from bench.logs import analyze_file
from bench.measure import machine_busy_cpu_s
from bench.profile import summarize
from bench.runners import LABELS, RUNNERS, NotRun, RunContext
from bench.server import Nginx, ensure_nginx
from bench.site import SiteSpec, generate, read_expected
from bench.wire import Capture

MEDIAN_KEYS = (
    "wall_s",
    "span_s",
    "cpu_s",
    "peak_rss_mb",
    "nginx_cpu_s",
    "pages",
    "missed",
    "duplicates",
    "robots_duplicates",
    "unexpected",
    "requests",
    "pages_per_s",
    "ms_cpu_per_page",
    "pages_per_cpu_s",
    "kafka_cpu_s",
    "cassandra_cpu_s",
    "proxy_cpu_s",
    "other_cpu_s",
    "warc_bytes",
    "warc_bytes_per_page",
)


def ensure_site(workdir: Path, origins: int, pages: int, base_port: int, seed: int = 6) -> SiteSpec:
    root = workdir / f"site-{origins}x{pages}-p{base_port}-s{seed}"
    try:
        spec = SiteSpec.load(root)
        if (spec.origins, spec.pages, spec.base_port, spec.seed) == (
            origins,
            pages,
            base_port,
            seed,
        ):
            return spec
    except (OSError, ValueError, TypeError):
        pass
    shutil.rmtree(root, ignore_errors=True)
    t = time.monotonic()
    spec = generate(root, origins, pages, base_port, seed)
    print(
        f"generated {root} ({spec.expected_pages} pages) in {time.monotonic() - t:.0f} s",
        flush=True,
    )
    return spec


def _cmd(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def environment() -> dict:
    from importlib.metadata import version

    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    mem_kb = int(
        next(
            ln.split()[1]
            for ln in Path("/proc/meminfo").read_text().splitlines()
            if ln.startswith("MemTotal")
        )
    )
    return {
        "cpu": cpu,
        "nproc": _cmd(["nproc"]),
        "mem_gib": round(mem_kb / 2**20, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "nginx": _cmd([ensure_nginx(), "-v"]),
        "scrapy": version("scrapy"),
        "twisted": version("twisted"),
        "crawlee": version("crawlee"),
        "impit": version("impit"),
        "wget": _cmd(["wget", "--version"]),
        "streamcrawl": runners.streamcrawl_version() or "not installed",
        "repo_commit": _cmd(["git", "-C", str(runners.REPO), "rev-parse", "--short", "HEAD"]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def one_run(name: str, spec: SiteSpec, rundir: Path, args, **ctx_kw) -> dict:
    """Run crawler ``name`` once on ``spec`` behind a fresh nginx; merge runner and log figures."""
    shutil.rmtree(rundir, ignore_errors=True)
    rundir.mkdir(parents=True)
    ctx = RunContext(spec, rundir, timeout=args.timeout, stock=args.stock, **ctx_kw)
    nginx = Nginx(spec, rundir / "nginx").start()
    ctx.extra["access_log"] = nginx.access_log  # the Kafka runner watches it for progress
    busy0 = machine_busy_cpu_s()
    # Politeness runs: the requests' arrival times on loopback too (bench/wire.py).
    ports = spec.ports
    wire = Capture(rundir / "wire.pcap", min(ports), max(ports)) if ctx.delay else None
    try:
        with wire or contextlib.nullcontext():
            res = RUNNERS[name](ctx)
        res["nginx_cpu_s"] = nginx.cpu_seconds()
    finally:
        nginx.stop()
    # The machine is shared: CPU that neither the crawler nor nginx used during the run.
    res["other_cpu_s"] = max(
        0.0,
        machine_busy_cpu_s()
        - busy0
        - res["cpu_s"]
        - res["nginx_cpu_s"]
        - sum(v for v in res["service_cpu_s"].values() if v),
    )
    res["loadavg_1m"] = os.getloadavg()[0]
    log = analyze_file(nginx.access_log, read_expected(spec.root))
    pages = log.pages_fetched
    res.update(
        pages=pages,
        missed=log.pages_missed,
        missed_sample=log.missed_sample,
        duplicates=log.duplicates,
        duplicate_urls=log.duplicate_urls,
        robots_duplicates=log.robots_duplicates,
        private_fetched=log.private_fetched,
        unexpected=log.unexpected,
        requests=log.requests,
        statuses=log.statuses,
        span_s=log.span,
        min_gap=log.min_gap,
        min_gap_with_robots=log.min_gap_with_robots,
        pages_per_s=pages / res["wall_s"] if res["wall_s"] else 0.0,
        ms_cpu_per_page=1000 * res["cpu_s"] / pages if pages else None,
        pages_per_cpu_s=pages / res["cpu_s"] if res["cpu_s"] else None,
        warc_bytes_per_page=res["warc_bytes"] / pages if "warc_bytes" in res and pages else None,
        kafka_cpu_s=res["service_cpu_s"].get("kafka"),
        cassandra_cpu_s=res["service_cpu_s"].get("cassandra"),
        proxy_cpu_s=res["service_cpu_s"].get("proxy"),
    )
    if ctx.delay:
        res["origins_under_delay"] = log.origins_under(ctx.delay)
        assert wire is not None
        res["wire"] = wire.report().as_dict(ctx.delay)
        res["span_pages_per_s"] = pages / log.span if log.span else 0.0
    if not ctx.max_pages:  # the RSS series is only reported by the memory run
        res.pop("rss_samples", None)
    res.pop("stdout", None)
    return res


def _median(runs: list[dict]) -> dict:
    med = {}
    for k in MEDIAN_KEYS:
        vals = [r[k] for r in runs if r.get(k) is not None]
        med[k] = statistics.median(vals) if vals else None
    med["private_fetched_max"] = max(r["private_fetched"] for r in runs)
    return med


def _try(name: str, spec: SiteSpec, rundir: Path, args, **ctx_kw) -> dict:
    """``one_run``, with NotRun/NotImplementedError/failures turned into a status for the report."""
    try:
        return {"status": "ok", **one_run(name, spec, rundir, args, **ctx_kw)}
    except NotRun as e:
        return {"status": "not run", "reason": str(e)}
    except NotImplementedError as e:
        return {"status": "not run", "reason": f"NotImplementedError: {e}"}
    except Exception as e:  # a crawler failing must not lose the others' results
        return {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}


def compare(spec: SiteSpec, names: list[str], runs: int, workdir: Path, args) -> dict:
    """``runs`` rounds; in each, every crawler once (interleaved, so drift hits all alike)."""
    out = {n: {"label": LABELS[n], "runs": [], "status": "ok"} for n in names}
    out["_site"] = {
        "origins": spec.origins,
        "pages": spec.pages,
        "expected": spec.expected_pages,
        "links_per_page": spec.links_per_page,
    }
    for i in range(runs):
        for n in names:
            if out[n]["status"] != "ok":
                continue
            print(f"[main] run {i + 1}/{runs}: {n} ...", flush=True)
            r = _try(n, spec, workdir / f"{n}-{i + 1}", args)
            if r["status"] != "ok":
                out[n].update(status=r["status"], reason=r["reason"])
                print(f"  {n}: {r['status']}: {r['reason']}", flush=True)
                continue
            r.pop("status")
            out[n]["runs"].append(r)
            print(
                f"  {n}: {r['pages']} pages in {r['wall_s']:.1f} s, {r['cpu_s']:.1f} CPU-s, "
                f"{r['peak_rss_mb']:.0f} MB, missed {r['missed']}, dup {r['duplicates']}, "
                f"private {r['private_fetched']}",
                flush=True,
            )
    for n in names:
        if out[n]["runs"]:
            out[n]["median"] = _median(out[n]["runs"])
    return out


def politeness(
    spec: SiteSpec, names: list[str], workdir: Path, args, delay: float | None = None
) -> dict:
    """Many origins, per-origin delay: throughput vs origins/delay, and every origin's min gap."""
    delay = args.politeness_delay if delay is None else delay
    out: dict = {
        "_site": {
            "origins": spec.origins,
            "pages": spec.pages,
            "expected": spec.expected_pages,
            "delay": delay,
            "ideal_pages_per_s": spec.origins / delay,
        }
    }
    for n in [x for x in names if x in ("embedded", "kafka-1", "kafka-2", "scrapy")]:
        print(f"[politeness] {n} ...", flush=True)
        r = _try(n, spec, workdir / n, args, delay=delay)
        out[n] = {"label": LABELS[n], **r}
        if r["status"] == "ok":
            print(
                f"  {n}: {r['pages']} pages, {r['span_pages_per_s']:.0f} pages/s (log span), "
                f"min gap {r['min_gap']}, origins under delay {len(r['origins_under_delay'])}",
                flush=True,
            )
        else:
            print(f"  {n}: {r['status']}: {r['reason']}", flush=True)
    return out


def repeated(
    spec: SiteSpec, variants: list[tuple[str, str, dict]], runs: int, workdir: Path, args
) -> dict[str, list[dict]]:
    """``runs`` rounds; in each, every variant ``(key, crawler, RunContext fields)`` once
    (interleaved, so drift hits all alike); a variant stops at its first failed run. Each
    variant's ``_try`` results, in order."""
    out: dict[str, list[dict]] = {key: [] for key, _, _ in variants}
    for i in range(runs):
        for key, name, kw in variants:
            if out[key] and out[key][-1]["status"] != "ok":
                continue
            print(f"[{key}] run {i + 1}/{runs} ...", flush=True)
            r = _try(name, spec, workdir / f"{key}-{i + 1}", args, **kw)
            out[key].append(r)
            if r["status"] != "ok":
                print(f"  {r['status']}: {r['reason']}", flush=True)
                continue
            services = "/".join(
                "-" if r.get(k) is None else f"{r[k]:.2f}"
                for k in ("kafka_cpu_s", "cassandra_cpu_s")
            )
            print(
                f"  {r['pages']} pages in {r['wall_s']:.1f} s, {r['cpu_s']:.2f} CPU-s, "
                f"Kafka/Cassandra {services} CPU-s",
                flush=True,
            )
    return out


# Seconds each Kafka run of the shapes below is measured idle before its seed (cpu_split.py).
IDLE_WINDOW_S = 5.0


def few_origins(spec: SiteSpec, names: list[str], runs: int, workdir: Path, args) -> dict:
    """Few origins at delay 0, one request in flight per origin: the rate is set by how soon a
    crawler sends an origin's next request after a response. One worker, and the embedded
    crawl for reference; ``runs`` interleaved runs, medians (``cpu_split.median_row``)."""
    names = [n for n in names if n in ("embedded", "kafka-1")]
    variants = []
    for n in names:
        idle = 0.0 if n == "embedded" else IDLE_WINDOW_S  # no broker, no Cassandra
        variants.append((n, n, {"per_origin_concurrency": 1, "idle_window_s": idle}))
    got = repeated(spec, variants, runs, workdir, args)
    out: dict = {"_site": _site(spec, per_origin_concurrency=1)}
    out.update({n: cpu_split.median_row(LABELS[n], got[n]) for n in names})
    return out


def not_saturated(
    spec: SiteSpec,
    names: list[str],
    runs: int,
    workdir: Path,
    args,
    delay: float,
    split_delay: float | None,
) -> dict:
    """The Kafka rows ``names`` on many origins with a long ``delay`` (the rate is set by the
    delay, not by CPU), ``runs`` interleaved runs, medians; with ``split_delay``, the same at
    that delay too (``split``), each run with an idle window, and the worker's CPU split into a
    per-page and a per-second part (``cpu_split``)."""
    delays = [delay, *([split_delay] if split_delay else [])]
    idle_s = IDLE_WINDOW_S if split_delay else 0.0
    variants = [
        (f"{d:g}s-{n}", n, {"delay": d, "idle_window_s": idle_s}) for d in delays for n in names
    ]
    got = repeated(spec, variants, runs, workdir, args)

    def part(d: float) -> dict:
        rows = {n: cpu_split.median_row(LABELS[n], got[f"{d:g}s-{n}"]) for n in names}
        return {"_site": _site(spec, delay=d, ideal_pages_per_s=spec.origins / d), **rows}

    out = part(delay)
    if split_delay:
        out["split"] = part(split_delay)
        out["cpu_split"] = cpu_split.split(out)
    return out


def _site(spec: SiteSpec, **more) -> dict:
    return {"origins": spec.origins, "pages": spec.pages, "expected": spec.expected_pages, **more}


def memory(spec: SiteSpec, names: list[str], budgets: list[int], workdir: Path, args) -> dict:
    """RSS of the embedded crawl (and one worker) at growing page budgets on one big site."""
    out: dict = {
        "_site": {"origins": spec.origins, "pages": spec.pages, "expected": spec.expected_pages}
    }
    for n in [x for x in names if x in ("embedded", "kafka-1")]:
        out[n] = {"label": LABELS[n], "budgets": {}}
        for b in budgets:
            print(f"[memory] {n} budget {b} ...", flush=True)
            r = _try(n, spec, workdir / f"{n}-{b}", args, max_pages=b)
            out[n]["budgets"][str(b)] = r
            if r["status"] != "ok":
                print(f"  {n}: {r['status']}: {r['reason']}", flush=True)
                break
    return out


def profiles(spec: SiteSpec, names: list[str], workdir: Path, args) -> dict:
    """One py-spy-profiled run per crawler (not used for the timing figures)."""
    out: dict = {}
    profiled = ("embedded", "embedded-warc", "kafka-1", "scrapy", "crawlee")
    for n in [x for x in names if x in profiled]:
        print(f"[profile] {n} ...", flush=True)
        prof = workdir / f"{n}.raw.txt"
        workdir.mkdir(parents=True, exist_ok=True)
        r = _try(n, spec, workdir / n, args, profile=prof)
        if r["status"] == "ok" and prof.exists():
            s = summarize(prof)
            out[n] = {
                "label": LABELS[n],
                "status": "ok",
                "samples": s.samples,
                "by_package": s.by_package,
                "self_top": s.self_top,
                "inclusive_top": s.inclusive_top,
                "raw": str(prof),
            }
        else:
            out[n] = {
                "label": LABELS[n],
                "status": r["status"],
                "reason": r.get("reason", "no profile written"),
            }
    return out
