"""One real site: a Debian package's HTML documentation tree under nginx, one origin, delay 0.

``python -m bench.doc_site [--package postgresql-doc-15,python3.11-doc] [--runs 3] [--out FILE]``
(project venv, services' env sourced; a private broker + Cassandra give clean service figures)
installs each package if its HTML tree is missing (``apt-get install``, root only), serves the
tree with nginx from its installed place (a symlink in the run's directory: nothing is copied,
nothing lands in the repository) and crawls it at ``--delay 0`` and ``--per-origin-concurrency``
1 (the CLI's default; the main bench seeds delay-0 crawls with 8): ``--runs`` rounds, each the
Kafka topology with one worker (bodies in the stream, the default), then the embedded crawl
(``streamcrawl crawl``, bench/runners.py).

Per run, then as medians per wiring: pages (the tree's HTML files the server answered 200, from
the access log), pages/s over the server's span (first request's start to last response's end),
and CPU ms per page of the crawler (the embedded crawl's process tree, start-up included; the
worker from the seed to the last new state), of the broker and of Cassandra over that interval
(raw CPU seconds, their idle work included; the harness's status poller reads the counts topic
as ``streamcrawl status`` does, Cassandra nothing), and their sum. ``--out`` writes
``{"doc_site": ...}`` for ``python -m bench.run --report-from RUN.json,FILE`` (the report's
"One real site" section, judged against ``TARGETS``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.context import compile_streamcrawl
from bench.site import SiteSpec
from bench.tables import cell, reason, table

# postgresql-doc-15: 1,169 pages of 13.5 KB; python3.11-doc: 530 pages of ~93 KB (the large
# pages of the "one real site" shape).
HTML = {
    "postgresql-doc-15": "/usr/share/doc/postgresql-doc-15/html",
    "python3.11-doc": "/usr/share/doc/python3.11/html",
}
PACKAGES = ("postgresql-doc-15", "python3.11-doc")
# HTML files of a tree no page links (found by an embedded crawl of it): the Kafka run's drain
# waits for the others only, not for a 60 s stall. python3.11-doc: three distutils pages and
# includes/wasm-notavail.html.
UNLINKED = {"python3.11-doc": 4}
LARGE_PAGES = "python3.11-doc"
WIRINGS = {"kafka-1": "Kafka topology, 1 worker", "embedded": "streamcrawl crawl (embedded)"}
# (wiring, package (None: each one), what, bound): the Kafka wiring's pages/s over the span,
# and its all-in CPU per page (worker + broker + Cassandra) on the large pages.
TARGETS = (("kafka-1", None, "rate", 100.0), ("kafka-1", LARGE_PAGES, "cpu", 15.0))
MEDIAN_KEYS = (
    "pages",
    "requests",
    "span_s",
    "span_pages_per_s",
    "wall_s",
    "pages_per_s",
    "crawler_ms",
    "kafka_ms",
    "cassandra_ms",
    "total_ms",
    "peak_rss_mb",
)


def html_tree(package: str) -> Path:
    """The package's HTML tree, installed first if missing."""
    root = Path(HTML.get(package, f"/usr/share/doc/{package}/html"))
    if not root.is_dir():
        subprocess.run(["apt-get", "install", "-y", package], check=True, capture_output=True)
    return root


def serve(root: Path, workdir: Path) -> SiteSpec:
    """A one-origin site spec for ``root`` under ``workdir``: the tree linked in as the origin's
    directory, seeded at its index.html, every HTML file of the tree expected."""
    from bench.kafka_topology import _free_port

    port = _free_port()
    site = workdir / "site"
    site.mkdir(parents=True)
    (site / str(port)).symlink_to(root)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))
    (site / "seeds.txt").write_text(f"http://127.0.0.1:{port}/index.html\n")
    (site / "expected.txt").write_text("".join(f"http://127.0.0.1:{port}/{f}\n" for f in files))
    return SiteSpec(str(site), 1, len(files), port, 0, 0, len(files))


def page_kb(root: Path) -> float:
    """Mean size of the tree's HTML files, KB."""
    sizes = [p.stat().st_size for p in root.rglob("*.html")]
    return round(sum(sizes) / max(len(sizes), 1) / 1024, 1)


def figures(spec: SiteSpec, log: Path, res: dict[str, Any]) -> dict[str, Any]:
    """A run's row from its access log and its runner's result (``bench/runners.py``'s keys):
    CPU ms per page of the crawler and of each service measured (total None if one of them was
    not found)."""
    from bench.logs import analyze_file
    from bench.site import read_expected

    report = analyze_file(log, read_expected(spec.root))
    pages, span, wall = report.pages_fetched, report.span, res["wall_s"]
    per = max(pages, 1)
    out: dict[str, Any] = {
        "pages": pages,
        "requests": report.requests,
        "missed": report.pages_missed,
        "duplicates": report.duplicates,
        "span_s": round(span, 2),
        "span_pages_per_s": round(pages / span, 1) if span > 0 else None,
        "wall_s": round(wall, 1),
        "pages_per_s": round(pages / wall, 1) if wall > 0 else None,
        "crawler_ms": round(1000 * res["cpu_s"] / per, 2),
        "peak_rss_mb": round(res["peak_rss_mb"]),
        "timed_out": res["timed_out"],
    }
    services = res["service_cpu_s"]
    for name, cpu in services.items():
        out[f"{name}_ms"] = None if cpu is None else round(1000 * cpu / per, 2)
    parts = [out["crawler_ms"], *(out[f"{name}_ms"] for name in services)]
    out["total_ms"] = None if None in parts else round(sum(parts), 2)
    return out


def kafka_run(spec: SiteSpec, rundir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One crawl by the Kafka topology: one worker, 12 partitions."""
    from bench.kafka_runner import drain, measure, seed
    from bench.kafka_topology import start_topology
    from bench.server import Nginx

    rundir.mkdir(parents=True)
    seeds = Path(spec.root, "seeds.txt").read_text().split()
    expected = spec.expected_pages
    with Nginx(spec, rundir / "nginx") as nginx, start_topology(rundir, 1, 12) as topo:
        seeded = seed(topo, seeds, delay=0.0, per_origin_concurrency=args.per_origin_concurrency,
                      max_pages=10 * expected)  # fmt: skip
        drained = drain(topo, seeded, expected_pages=expected, max_pages=None,
                        timeout=args.timeout, access_log=nginx.access_log)  # fmt: skip
    res = measure(topo, seeded, drained, rss_samples=False)
    # The log once nginx has stopped: its buffer flushed.
    row = figures(spec, nginx.access_log, res)
    return {**row, "states": drained.states, "stalled": drained.stalled}


def embedded_run(spec: SiteSpec, rundir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One crawl by ``streamcrawl crawl``, run and measured as the main bench's embedded row."""
    from bench.suite import one_run

    res = one_run(
        "embedded", spec, rundir, args, per_origin_concurrency=args.per_origin_concurrency
    )
    return figures(spec, rundir / "nginx" / "access.log", res)


RUNS: dict[str, Callable[[SiteSpec, Path, argparse.Namespace], dict[str, Any]]] = {
    "kafka-1": kafka_run,
    "embedded": embedded_run,
}


def median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the ok ``rows`` of one wiring; its status and reason if none is ok."""
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        last = rows[-1] if rows else {"status": "not run", "reason": "no runs"}
        return {"status": last["status"], "reason": last.get("reason", ""), "runs": 0}
    out: dict[str, Any] = {"status": "ok", "runs": len(ok)}
    for key in MEDIAN_KEYS:
        values = [r[key] for r in ok if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def package_part(package: str, args: argparse.Namespace) -> dict[str, Any]:
    """``args.runs`` interleaved rounds (Kafka, then embedded) on ``package``'s tree."""
    root = html_tree(package)
    tmp = Path(tempfile.mkdtemp(prefix="doc-site-"))
    try:
        spec = serve(root, tmp)
        spec = replace(spec, expected_pages=spec.expected_pages - UNLINKED.get(package, 0))
        rows = []
        for i in range(1, args.runs + 1):
            for wiring, run in RUNS.items():
                try:
                    row = {"status": "ok", **run(spec, tmp / f"{wiring}-{i}", args)}
                except Exception as e:  # a failed run must not lose the others
                    row = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
                rows.append({"package": package, "wiring": wiring, "round": i, **row})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    medians = {w: median([r for r in rows if r["wiring"] == w]) for w in RUNS}
    return {"page_kb": page_kb(root), "pages": spec.expected_pages, "runs": rows, "median": medians}


def verdicts(part: dict[str, Any]) -> list[dict[str, Any]]:
    """Each of ``TARGETS`` on each package it names: the measured median and whether it is
    met (both None: not measured)."""
    concurrency = part["per_origin_concurrency"]
    out = []
    for wiring, only, what, bound in TARGETS:
        for package, got in part["packages"].items():
            if only not in (None, package):
                continue
            row = got["median"].get(wiring) or {}
            if what == "rate":
                value = row.get("span_pages_per_s")
                text = f"pages/s over the span >= {bound:g} (one origin, concurrency {concurrency})"
                met = None if value is None else value >= bound
            else:
                value = row.get("total_ms")
                text = f"all-in CPU <= {bound:g} ms/page (worker + broker + Cassandra)"
                met = None if value is None else value <= bound
            out.append(
                dict(package=package, wiring=wiring, what=what, target=text, value=value, met=met)
            )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--package",
        action="append",
        help=f"a Debian documentation package, repeatable or a comma list "
        f"(default {','.join(PACKAGES)})",
    )
    ap.add_argument("--runs", type=int, default=3, help="rounds per package (medians reported)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per crawl")
    ap.add_argument(
        "--per-origin-concurrency",
        type=int,
        default=1,
        help="requests in flight on the one origin (default 1: the CLI's default)",
    )
    ap.add_argument(
        "--out", type=Path, help="also write {'doc_site': ...} there, for bench.run --report-from"
    )
    args = ap.parse_args(argv)
    args.stock = False  # bench.suite.one_run's option for the competitors
    packages = [p for arg in args.package or PACKAGES for p in arg.split(",") if p]
    command = "python -m bench.doc_site " + shlex.join(sys.argv[1:] if argv is None else argv)
    part: dict[str, Any] = {
        "command": command.strip(),
        "delay": 0.0,
        "per_origin_concurrency": args.per_origin_concurrency,
        "packages": {},
    }
    compile_streamcrawl()  # the crawler as installed (bench.context)
    for package in packages:
        part["packages"][package] = got = package_part(package, args)
        print(json.dumps({"package": package, "median": got["median"]}), flush=True)
        if args.out:  # after each package: a stopped run keeps what it measured
            args.out.write_text(json.dumps({"doc_site": part}, indent=1))


if __name__ == "__main__":
    main()


def doc_site_section(part: dict) -> list[str]:
    """The one-real-site section, from a results file's ``doc_site`` (``bench/doc_site.py
    --out``): each package's Kafka and embedded medians, then the targets."""
    source = f"From `{part['source']}`: " if "source" in part else ""
    lines = [
        "## One real site: a documentation tree, one origin, delay 0",
        "",
        "A Debian package's HTML documentation served by nginx as one origin, crawled at delay 0 "
        f"with per-origin concurrency {part['per_origin_concurrency']} by the Kafka topology "
        "(one worker, bodies in the stream) and by the embedded crawl, in interleaved rounds; "
        "medians. *pages* = the tree's HTML files the server answered 200; pages/s over the "
        "access log's span (first request's start to last response's end). CPU per page: the "
        "crawler's (the embedded crawl's process tree, start-up included; the worker's from the "
        "seed to the last new state), and the broker's and Cassandra's over that interval, raw: "
        "their idle work and any other client's (the harness polls the counts topic as "
        "`streamcrawl status` does) included, no idle rate subtracted. *all-in* = the sum. The "
        "machine is shared.",
        "",
        f"{source}`{part['command']}`.",
        "",
    ]
    rows = []
    for package, got in part["packages"].items():
        base = got["median"].get("embedded") or {}
        for wiring, label in WIRINGS.items():
            m = got["median"].get(wiring)
            if not m:
                continue
            if m["status"] != "ok":
                rows.append([package, label, f"**{m['status']}**: {reason(m)}", *[""] * 10])
                continue
            rows.append(
                [
                    package,
                    label,
                    str(m["runs"]),
                    f"{m['pages']:,.0f} / {got['pages']:,}",
                    cell(got["page_kb"]),
                    cell(m["span_s"]),
                    cell(m["span_pages_per_s"], 0),
                    cell(m["crawler_ms"], 2),
                    cell(m["kafka_ms"], 2),
                    cell(m["cassandra_ms"], 2),
                    cell(m["total_ms"], 2),
                    *(
                        ["-", "-"]
                        if wiring == "embedded"
                        else [
                            _ratio(m, base, "span_pages_per_s"),
                            _ratio(m, base, "total_ms"),
                        ]
                    ),
                ]
            )
    header = ["package", "wiring", "runs", "pages", "page KB", "log span s", "pages/s"]
    header += ["crawler ms/page", "broker ms/page", "Cassandra ms/page", "all-in ms/page"]
    lines += table([*header, "pages/s x embedded", "all-in x embedded"], rows)
    trows = []
    for c in verdicts(part):
        style = "{:.0f} pages/s" if c["what"] == "rate" else "{:.1f} ms/page"
        shown = "-" if c["value"] is None else style.format(c["value"])
        verdict = "not measured" if c["met"] is None else "met" if c["met"] else "**not met**"
        trows.append([c["package"], WIRINGS[c["wiring"]], c["target"], shown, verdict])
    if trows:
        lines += ["", *table(["package", "wiring", "target", "measured", "verdict"], trows)]
    return [*lines, ""]


def _ratio(row: dict, base: dict, key: str) -> str:
    """``row[key]`` as a multiple of the embedded crawl's (``-``: either not measured)."""
    if base.get("status") != "ok" or not base.get(key) or row.get(key) is None:
        return "-"
    return f"{row[key] / base[key]:.2f}x"
