"""The many-origins row: the web's shape, where most origins hold a handful of pages.

``python -m bench.run --many-origins 2000x5@1`` (the default; ``none`` skips) crawls a site of
2,000 origins (one nginx ``server`` per port, bench/site.py) of 5 pages each, every origin at a
1 s delay, with the embedded crawl and the Kafka wiring with one and two workers, ``--runs``
interleaved runs each, medians. The ideal rate is origins / delay; an origin's robots.txt comes
first and takes its own turn of the delay, so a crawler that keeps every origin busy still
spends a sixth of the requests of this shape on robots.txt (the site lists no sitemap). What
each crawler costs is charged to the pages: CPU per page includes the robots.txt requests.

Per row: pages/s over the access log's span against the ideal, requests/s (robots.txt included),
the crawler's CPU per page (the embedded process; the Kafka workers'), the broker's and
Cassandra's per page less their idle rate (measured for ``suite.IDLE_WINDOW_S`` before each
seed), peak RSS, the smallest per-origin gap on the wire. The targets beside it compare the
Kafka rows with the embedded crawl's on the same site (``TARGETS``).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from bench import cpu_split
from bench.site import SiteSpec

NAMES = ("embedded", "kafka-1", "kafka-2")
# (row, what is compared, bound): the Kafka wiring's rate as a share of the embedded crawl's on
# this shape, and its workers' CPU per page as a multiple of the embedded crawl's.
TARGETS = (
    ("kafka-1", "rate", 0.50),
    ("kafka-2", "rate", 0.90),
    ("kafka-1", "cpu", 1.5),
    ("kafka-2", "cpu", 1.5),
)


def measure(spec: SiteSpec, names: list[str], runs: int, workdir: Path, args, delay: float) -> dict:
    """The rows of ``names`` (of ``NAMES``) on ``spec`` at ``delay``: ``runs`` interleaved runs
    each, medians (``cpu_split.median_row``) and the median requests of the access log."""
    from bench import suite  # psutil and nginx: only where the bench runs
    from bench.runners import LABELS

    variants = []
    for n in [n for n in NAMES if n in names]:
        idle = 0.0 if n == "embedded" else suite.IDLE_WINDOW_S  # no broker, no Cassandra
        variants.append((n, n, {"delay": delay, "idle_window_s": idle}))
    got = suite.repeated(spec, variants, runs, workdir, args)
    out: dict = {
        "_site": {
            "origins": spec.origins,
            "pages": spec.pages,
            "expected": spec.expected_pages,
            "links_per_page": spec.links_per_page,
            "delay": delay,
            "ideal_pages_per_s": spec.origins / delay,
        }
    }
    for key, runs_of in got.items():
        row = cpu_split.median_row(LABELS[key], runs_of)
        done = row.get("runs") or []
        if done:
            row["requests"] = statistics.median(r["requests"] for r in done)
        out[key] = row
    return out


def figures(row: dict, site: dict) -> dict:
    """The row's derived figures: rates over the log span, CPU per page of the crawler and of
    each service (less its idle rate x the row's wall seconds, when measured)."""
    pages, span, wall = row["pages"], row["span_s"], row["wall_s"]
    rates = row.get("idle_rates") or {}
    out = {
        "pages_per_s": pages / span if span else 0.0,
        "requests_per_s": row.get("requests", 0) / span if span else 0.0,
        "ms_cpu_per_page": 1000 * row["cpu_s"] / pages if pages else None,
        "cpu_per_span": row["cpu_s"] / span if span else None,
    }
    out["of_ideal"] = out["pages_per_s"] / site["ideal_pages_per_s"]
    for svc in cpu_split.SERVICES:
        part = cpu_split.less_idle(row.get(f"{svc}_cpu_s"), rates.get(svc), wall)
        cpu = part["crawl_s"] if part["crawl_s"] is not None else part["cpu_s"]
        out[f"{svc}_ms_per_page"] = 1000 * cpu / pages if cpu is not None and pages else None
    return out


def verdicts(part: dict) -> list[dict]:
    """Each of ``TARGETS`` whose rows were measured: the measured ratio and whether it is met."""
    base = part.get("embedded")
    if not base or base.get("status") != "ok":
        return []
    ref = figures(base, part["_site"])
    out = []
    for name, what, bound in TARGETS:
        row = part.get(name)
        if not row or row.get("status") != "ok":
            continue
        got = figures(row, part["_site"])
        if what == "rate":
            ratio = got["pages_per_s"] / ref["pages_per_s"]
            text = f"pages/s >= {bound:.0%} of the embedded crawl's"
            met = ratio >= bound
        else:
            ratio = got["ms_cpu_per_page"] / ref["ms_cpu_per_page"]
            text = f"workers' CPU per page <= {bound:g}x the embedded crawl's"
            met = ratio <= bound
        out.append({"row": name, "target": text, "ratio": ratio, "met": met})
    return out


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def section(part: dict) -> list[str]:
    """The report's many-origins section (``bench/report.py``)."""
    s = part["_site"]
    lines = [
        f"## Many origins: {s['origins']:,} origins x {s['pages']} pages, delay {s['delay']:g} s",
        "",
        "The web's shape: most origins hold a handful of pages. Ideal throughput = origins / "
        f"delay = **{s['ideal_pages_per_s']:,.0f} pages/s**; each origin's robots.txt takes a "
        "turn of its delay too (the site lists no sitemap). Pages/s and requests/s (robots.txt "
        "included) over the access log's span; CPU per page charges every request to the pages: "
        "the crawler's process tree (embedded) or its workers from the seed to the last new "
        "state (Kafka); the broker's and Cassandra's less their idle rate (measured before each "
        "seed) x the row's seconds. Medians of the runs; the machine is shared, so CPU-seconds "
        "say more than wall-clock rates.",
        "",
        *([f"From `{part['source']}`.", ""] if part.get("source") else []),
        "| crawler | runs | pages | log span s | pages/s | of ideal | requests/s | CPU s "
        "| ms CPU/page | broker ms/page | Cassandra ms/page | CPU / span | peak RSS MB "
        "| min gap s (wire) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in NAMES:
        row = part.get(name)
        if not row:
            continue
        if row.get("status") != "ok":
            reason = " ".join(str(row.get("reason", "")).split()).replace("|", "\\|")
            lines.append(f"| {row['label']} | **{row.get('status')}**: {reason} |" + "|" * 12)
            continue
        f = figures(row, s)
        wire = (row.get("wire") or {}).get("min_gap")
        lines.append(
            f"| {row['label']} | {len(row['runs'])} | {row['pages']:,.0f} / {s['expected']:,} | "
            f"{row['span_s']:.1f} | {f['pages_per_s']:,.0f} | {f['of_ideal']:.0%} | "
            f"{f['requests_per_s']:,.0f} | {row['cpu_s']:.2f} | {_ms(f['ms_cpu_per_page'])} | "
            f"{_ms(f['kafka_ms_per_page'])} | {_ms(f['cassandra_ms_per_page'])} | "
            f"{f['cpu_per_span']:.0%} | {row['peak_rss_mb']:.0f} | "
            f"{'-' if wire is None else f'{wire:.4f}'} |"
        )
    checks = verdicts(part)
    if checks:
        lines += ["", "| row | target | measured | verdict |", "|---|---|---|---|"]
        for c in checks:
            shown = f"{c['ratio']:.0%}" if "%" in c["target"] else f"{c['ratio']:.2f}x"
            verdict = "met" if c["met"] else "**not met**"
            lines.append(f"| {part[c['row']]['label']} | {c['target']} | {shown} | {verdict} |")
    return [*lines, ""]
