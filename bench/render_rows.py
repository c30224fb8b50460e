"""The rendering bench: streamcrawl's renderer against Crawlee's PlaywrightCrawler, and a long
run of renders with the browser's memory sampled.

``python -m bench.render_rows [--origins 2] [--pages 40] [--runs 3] [--renders 2000]
[--out FILE] [--md docs/benchmarks.md]`` (re-executes itself in the benchmark venv, as
``bench.run``) writes the app site of bench/render_site.py (every page built by its script from
a same-origin JSON fetch; nothing is found without rendering) and, served by the bench's nginx:

- *Against Crawlee*: ``--runs`` interleaved rounds of ``streamcrawl crawl --render always``
  (embedded, the CLI's defaults: one request per origin at a time, the renderer's pages at once)
  and ``bench/competitors/crawlee_playwright.py`` (Crawlee's PlaywrightCrawler, the same
  Chromium, as many pages at once), each measured as the main bench measures a crawler
  (bench/measure.py: CPU of the whole process tree, the browser included, from ``os.wait4``
  under a subreaper, bench/reaper.py, so that the browser's orphaned processes count too; peak
  summed RSS of the tree), medians. Per rendered page: CPU ms and wall ms; the CPU is also
  split by process (the crawler's Python, Playwright's driver, Chromium) from polled CPU times.
- *Long run*: one ``streamcrawl crawl --render always`` of ``--renders`` pages, the browser's
  processes sampled every 2 s (summed RSS, PSS: shared pages counted once), against the renders
  done so far (the JSON fetches in the access log).

Targets (``verdicts``): CPU per rendered page <= Crawlee's in the same run; the browser's RSS
within 20 % of its level after the first 100 renders, all the way. ``--md`` replaces the
"Rendering" section of that file; ``--out`` writes ``{"rendering": ...}`` for ``python -m
bench.run --report-from RUN.json,FILE``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import reaper
from bench.render_site import generate
from bench.tables import cell, reason, table

REPO = Path(__file__).resolve().parent.parent
CRAWLERS = {
    "embedded": "streamcrawl crawl --render always (embedded)",
    "crawlee": "Crawlee for Python (PlaywrightCrawler)",
}
MEDIAN_KEYS = ("pages", "renders", "wall_s", "cpu_s", "cpu_ms", "wall_ms", "peak_rss_mb")
RSS_TOLERANCE = 0.2  # the long run's target: within 20 % of the level after the first 100
RSS_AFTER = 100
HEADING = "## Rendering"
PARTS = ("crawler", "driver", "chromium")  # ``kind``s, in the order the report shows them


def kind(proc: Any) -> str:
    """Which part of a crawl a process is: ``chromium``, ``driver`` (Playwright's node) or
    ``crawler`` (the Python process)."""
    name = proc.name()
    if name.startswith("chrom") or name == "headless_shell":
        return "chromium"
    return "driver" if name.startswith("node") else "crawler"  # node-MainThread


@dataclass
class TreeSampler:
    """``on_sample`` of ``run_measured``: each process's last CPU time (by ``kind``), and every
    ``memory_every`` s the browser's processes' summed RSS and PSS (MiB) with ``count()``."""

    count: Any = None  # () -> renders so far, or None
    memory_every: float = 0.0  # 0: no memory samples
    log: Path | None = None  # each memory sample appended there too (a stopped run keeps them)
    cpu_every: float = 0.2
    cpu: dict[int, tuple[str, float]] = field(default_factory=dict)
    memory: list[dict[str, float]] = field(default_factory=list)
    _cpu_at: float = -1.0
    _memory_at: float = -1.0

    def __call__(self, tree: list[Any], seconds: float) -> None:
        import psutil

        if seconds - self._cpu_at >= self.cpu_every:
            self._cpu_at = seconds
            for p in tree:
                try:
                    t = p.cpu_times()
                    self.cpu[p.pid] = (kind(p), t.user + t.system)
                except psutil.Error:
                    pass
        if self.memory_every and seconds - self._memory_at >= self.memory_every:
            self._memory_at = seconds
            rss = pss = 0
            browsers = 0
            for p in tree:
                try:
                    if kind(p) != "chromium":
                        continue
                    info = p.memory_full_info()
                    rss, pss, browsers = rss + info.rss, pss + info.pss, browsers + 1
                except psutil.Error:
                    pass
            done = self.count() if self.count else None
            mib = 2**20
            row = {"t": round(seconds, 1), "renders": done, "procs": browsers}
            row |= {"rss_mb": round(rss / mib, 1), "pss_mb": round(pss / mib, 1)}
            self.memory.append(row)
            if self.log is not None:
                with self.log.open("a") as f:
                    f.write(json.dumps(row) + "\n")

    def cpu_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, s in self.cpu.values():
            out[k] = out.get(k, 0.0) + s
        return out


def embedded_argv(seeds: list[str], run: Path, pages: int) -> list[str]:
    from bench.context import streamcrawl_binary

    return [
        streamcrawl_binary(), "crawl", *seeds, "--render", "always",
        "--out", str(run / "out"), "--state-dir", str(run / "state"),
        "--delay", "0", "--max-pages", str(2 * pages), "--allow-host", "127.0.0.1",
        "--user-agent", "bench-streamcrawl", "--json", "--no-progress",
    ]  # fmt: skip


def crawlee_argv(seeds_file: Path, run: Path, chromium: str, concurrency: int) -> list[str]:
    from bench.context import BENCH_PYTHON

    script = REPO / "bench" / "competitors" / "crawlee_playwright.py"
    return [
        BENCH_PYTHON, str(script), "--seeds", str(seeds_file), "--out", str(run / "out"),
        "--chromium", chromium, "--concurrency", str(concurrency),
    ]  # fmt: skip


def rendered(name: str, out: Path) -> int:
    """Pages the crawler says it rendered: streamcrawl's records with ``render`` ``browser``,
    Crawlee's pages whose DOM had a link (the HTML of every page has none)."""
    if name == "embedded":
        rows = _jsonl(out / "pages.jsonl")
        return sum(1 for r in rows if r.get("render") == "browser")
    return sum(1 for r in _jsonl(out / "items.jsonl") if r.get("links"))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def data_fetches(log: Path) -> int:
    """The page JSON fetches in an access log: one per render that ran the page's script."""
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text(errors="replace").splitlines() if "\t/data/" in line)


def figures(measured: Any, pages: int, renders: int, cpu: dict[str, float]) -> dict[str, Any]:
    """A run's row: totals, and CPU ms and wall ms per rendered page."""
    per = max(renders, 1)
    split = {f"{k}_cpu_ms": round(1000 * v / per, 1) for k, v in sorted(cpu.items())}
    return {
        "pages": pages,
        "renders": renders,
        "wall_s": round(measured.wall_s, 1),
        "cpu_s": round(measured.cpu_s, 1),
        "cpu_ms": round(1000 * measured.cpu_s / per, 1),
        "wall_ms": round(1000 * measured.wall_s / per, 1),
        "peak_rss_mb": round(measured.peak_rss_mb),
        **split,
        "returncode": measured.returncode,
        "timed_out": measured.timed_out,
    }


def one_run(name: str, spec: Any, run: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One crawl of the app site by ``name``, with a fresh nginx; its row."""
    import os

    from bench.logs import analyze_file
    from bench.measure import run_measured
    from bench.server import Nginx
    from bench.site import read_expected

    seeds_file = Path(spec.root) / "seeds.txt"
    argv = (
        embedded_argv(seeds_file.read_text().split(), run, spec.expected_pages)
        if name == "embedded"
        else crawlee_argv(seeds_file, run, args.chromium, args.concurrency)
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    env |= {"CRAWLEE_LOG_LEVEL": "WARNING", "STREAMCRAWL_CHROMIUM": args.chromium}
    sampler = TreeSampler()
    with Nginx(spec, run / "nginx"):
        m = run_measured(
            reaper.argv(argv), env=env, cwd=run, timeout=args.timeout, log_dir=run / "logs",
            on_sample=sampler,
        )  # fmt: skip
    if m.returncode != 0 or m.timed_out:
        raise RuntimeError(f"{name} exited {m.returncode}: {m.stderr_tail[-300:]}")
    log = run / "nginx" / "access.log"
    pages = analyze_file(log, read_expected(spec.root)).pages_fetched
    row = figures(m, pages, rendered(name, run / "out"), sampler.cpu_by_kind())
    return row | {"data_fetches": data_fetches(log)}


def median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the ok ``rows`` of one crawler; its status and reason if none is ok."""
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        last = rows[-1] if rows else {"status": "not run", "reason": "no runs"}
        return {"status": last["status"], "reason": last.get("reason", ""), "runs": 0}
    keys = [*MEDIAN_KEYS, *sorted({k for r in ok for k in r if k.endswith("_cpu_ms")})]
    out: dict[str, Any] = {"status": "ok", "runs": len(ok)}
    for key in keys:
        values = [r[key] for r in ok if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def compare(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``args.runs`` interleaved rounds of each crawler on one app site; rows and medians."""
    spec = generate(workdir / "site", args.origins, args.pages, args.base_port)
    rows = []
    for i in range(1, args.runs + 1):
        for name in CRAWLERS:
            try:
                row = {"status": "ok", **one_run(name, spec, workdir / f"{name}-{i}", args)}
            except Exception as e:  # a failed run must not lose the others
                row = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
            rows.append({"crawler": name, "round": i, **row})
            print(json.dumps(rows[-1]), flush=True)
    medians = {n: median([r for r in rows if r["crawler"] == n]) for n in CRAWLERS}
    return {"origins": args.origins, "pages": spec.expected_pages, "runs": rows, "median": medians}


def long_run(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One crawl of ``args.renders`` pages by ``streamcrawl crawl --render always``, the
    browser's memory sampled against the renders done."""
    import os

    from bench.measure import run_measured
    from bench.server import Nginx

    origins = args.origins
    spec = generate(workdir / "site", origins, -(-args.renders // origins), args.base_port + 100)
    run = workdir / "run"
    log = run / "nginx" / "access.log"
    sampler = TreeSampler(lambda: data_fetches(log), 2.0, log=workdir / "memory.jsonl")
    argv = embedded_argv(spec.seeds, run, spec.expected_pages)
    env = {**os.environ, "STREAMCRAWL_CHROMIUM": args.chromium}
    with Nginx(spec, run / "nginx"):
        m = run_measured(
            reaper.argv(argv), env=env, cwd=workdir, timeout=args.timeout * 20,
            log_dir=run / "logs", on_sample=sampler,
        )  # fmt: skip
    renders = rendered("embedded", run / "out")
    row = figures(m, spec.expected_pages, renders, sampler.cpu_by_kind())
    times = [r["render_ms"] for r in _jsonl(run / "out" / "pages.jsonl") if r.get("render_ms")]
    if len(times) >= 20:
        q = statistics.quantiles(times, n=20)
        row |= {"render_ms_p50": round(statistics.median(times)), "render_ms_p95": round(q[18])}
    return {**row, "recycle": recycle_settings(), "samples": sampler.memory}


def recycle_settings() -> dict[str, Any]:
    """The renderer's recycling limits of the streamcrawl under test (``RenderSettings``)."""
    import subprocess

    from bench.context import streamcrawl_binary

    python = Path(streamcrawl_binary()).with_name("python")
    code = (
        "from streamcrawl.agents.render.browser import RenderSettings as S; s = S(); "
        "print(s.recycle_after, s.max_rss, s.concurrency)"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    after, max_rss, concurrency = (int(v) for v in out.stdout.split())
    return {"after": after, "max_rss_mb": max_rss // 2**20, "concurrency": concurrency}


def flatness(samples: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The long run's memory against its level: the first sample at ``RSS_AFTER`` renders or
    more, and the largest and smallest after it (None: the run never got there)."""
    after = [s for s in samples if (s.get("renders") or 0) >= RSS_AFTER and s[key] > 0]
    if not after:
        return None
    level = after[0][key]
    top, low = max(s[key] for s in after), min(s[key] for s in after)
    return {
        "level": round(level),
        "max": round(top),
        "min": round(low),
        "max_ratio": round(top / level, 3),
        "min_ratio": round(low / level, 3),
        "renders": max(s["renders"] for s in after),
        "met": top <= level * (1 + RSS_TOLERANCE),
    }


def verdicts(part: dict[str, Any]) -> list[dict[str, Any]]:
    """The two targets: CPU per rendered page against Crawlee's, and the browser's RSS flat
    over the long run (``met`` None: not measured)."""
    out = []
    cmp = part.get("compare") or {}
    ours, theirs = (cmp.get("median", {}).get(n) or {} for n in CRAWLERS)
    value = ours.get("cpu_ms")
    bound = theirs.get("cpu_ms")
    met = None if value is None or bound is None else value <= bound
    text = "CPU per rendered page <= Crawlee's in the same run"
    out.append({"target": text, "value": value, "bound": bound, "met": met})
    flat = flatness((part.get("long") or {}).get("samples") or [], "rss_mb")
    text = f"browser RSS within {RSS_TOLERANCE:.0%} of its level after {RSS_AFTER} renders"
    level = None if flat is None else flat["level"]
    out.append(
        {
            "target": text,
            "value": None if flat is None else flat["max"],
            "bound": level,
            "met": None if flat is None else flat["met"],
        }
    )
    return out


def checkpoints(samples: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """The first memory sample at each multiple of ``every`` renders (and at ``RSS_AFTER``)."""
    out, marks = [], sorted({RSS_AFTER, *range(every, 10**7, every)})
    for s in samples:
        if marks and (s.get("renders") or 0) >= marks[0]:
            out.append(s)
            marks = [m for m in marks if m > s["renders"]]
    return out


def section(part: dict[str, Any]) -> list[str]:
    """The "Rendering" section of docs/benchmarks.md from ``{"rendering": part}``."""
    source = f"From `{part['source']}`: " if "source" in part else ""
    lines = [HEADING, "", f"{source}`{part['command']}` (bench/render_rows.py).", ""]
    cmp = part.get("compare")
    if cmp:
        lines += [
            f"The app site of bench/render_site.py, {cmp['origins']} origins, {cmp['pages']:,} "
            "pages: each page an empty root and a script that fetches the page's JSON (same "
            "origin) and builds its text and links, so only a rendering crawler finds the next "
            "page. Each crawler in its own process with the same Chromium, fresh nginx per run, "
            "runs interleaved, medians. CPU: the whole process tree's (`os.wait4` under a "
            "subreaper, bench/reaper.py: the browser and its orphaned processes included); "
            "*crawler / driver / Chromium* split it by process from polled CPU times "
            "(short-lived processes partly missed). Peak RSS: the tree's summed RSS (shared "
            "pages counted once per process). *per render* = over the pages rendered.",
            "",
        ]
        rows = []
        base = cmp["median"].get("crawlee") or {}
        for name, label in CRAWLERS.items():
            m = cmp["median"].get(name) or {}
            if m.get("status") != "ok":
                rows.append([label, f"**{m.get('status')}**: {reason(m)}", *[""] * 9])
                continue
            ratio = f"{m['cpu_ms'] / base['cpu_ms']:.2f}x" if base.get("cpu_ms") else "-"
            rows.append(
                [label, str(m["runs"]), f"{m['renders']:,.0f} / {cmp['pages']:,}",
                 cell(m["wall_s"]), cell(m["wall_ms"], 0), cell(m["cpu_s"]),
                 cell(m["cpu_ms"], 0),
                 " / ".join(cell(m.get(f"{k}_cpu_ms"), 0) for k in PARTS),
                 cell(m["peak_rss_mb"], 0), ratio]
            )  # fmt: skip
        header = ["crawler", "runs", "rendered", "wall s", "wall ms/render", "CPU s"]
        header += ["CPU ms/render", "crawler / driver / Chromium ms", "peak RSS MB"]
        header.append("CPU x Crawlee")
        lines += [*table(header, rows), "", "Every run:", ""]
        runs = [
            [r["crawler"], str(r["round"]), r["status"], cell(r.get("renders")),
             cell(r.get("wall_s")), cell(r.get("cpu_ms")), cell(r.get("peak_rss_mb"))]
            for r in cmp["runs"]
        ]  # fmt: skip
        header = ["crawler", "round", "status", "rendered", "wall s", "CPU ms/render"]
        lines += [*table([*header, "peak RSS MB"], runs), ""]
    lines += long_section(part.get("long"))
    trows = [
        [v["target"], cell(v["value"]), cell(v["bound"]),
         "not measured" if v["met"] is None else "met" if v["met"] else "**not met**"]
        for v in verdicts(part)
    ]  # fmt: skip
    return [*lines, *table(["target", "measured", "bound", "verdict"], trows), ""]


def long_section(long: dict[str, Any] | None) -> list[str]:
    if not long:
        return ["Long run: not part of this run.", ""]
    if long.get("status") == "failed":
        return [f"Long run: **failed**: {reason(long)}", ""]
    rec = long["recycle"]
    lines = [
        f"Long run: one `streamcrawl crawl --render always` of {long['pages']:,} pages; "
        f"{long['renders']:,} rendered in {long['wall_s']:,.0f} s, "
        f"{long['cpu_ms']:,.0f} CPU ms and {long['wall_ms']:,.0f} wall ms per render (render "
        f"time p50 {cell(long.get('render_ms_p50'))} ms, p95 {cell(long.get('render_ms_p95'))} "
        f"ms). The renderer replaces its browser every {rec['after']} renders (and above "
        f"{rec['max_rss_mb']:,} MiB summed RSS), {rec['concurrency']} pages at once. The "
        "browser's processes sampled every 2 s: summed RSS and PSS (shared pages counted once), "
        "the renders done read from the access log.",
        "",
    ]
    samples = long["samples"]
    rows = [
        [cell(s["renders"]), cell(s["t"]), str(s["procs"]), cell(s["rss_mb"], 0),
         cell(s["pss_mb"], 0)]
        for s in checkpoints(samples, rec["after"] // 2 or 100)
    ]  # fmt: skip
    lines += [*table(["renders", "s", "processes", "RSS MiB", "PSS MiB"], rows), ""]
    for key in ("rss_mb", "pss_mb"):
        f = flatness(samples, key)
        if f:
            lines.append(
                f"- {key[:3].upper()}: level {f['level']} MiB after {RSS_AFTER} renders; "
                f"after it, {f['min']} to {f['max']} MiB ({f['min_ratio']:.2f}x to "
                f"{f['max_ratio']:.2f}x the level) up to {f['renders']:,} renders."
            )
    return [*lines, ""]


def write_section(md: Path, lines: list[str]) -> None:
    """Replace the "Rendering" section of ``md`` (or add it before "## Memory run")."""
    text = md.read_text() if md.exists() else ""
    body = "\n".join(lines).rstrip("\n") + "\n\n"
    if HEADING + "\n" in text:
        head, _, rest = text.partition(HEADING + "\n")
        nxt = rest.find("\n## ")
        tail = rest[nxt + 1 :] if nxt >= 0 else ""
        text = head + body + tail
    elif "## Memory run\n" in text:
        head, _, rest = text.partition("## Memory run\n")
        text = head + body + "## Memory run\n" + rest
    else:
        text = text + ("\n" if text else "") + body
    md.write_text(text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--origins", type=int, default=2, help="origins of the app site")
    ap.add_argument("--pages", type=int, default=40, help="pages per origin (against Crawlee)")
    ap.add_argument("--runs", type=int, default=3, help="rounds against Crawlee (0 skips)")
    ap.add_argument("--renders", type=int, default=2000, help="the long run's pages (0 skips)")
    ap.add_argument("--concurrency", type=int, default=2, help="Crawlee's pages at once")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per crawl")
    ap.add_argument("--base-port", type=int, default=23000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, help="also write {'rendering': ...} there")
    ap.add_argument("--md", type=Path, help="replace the Rendering section of this file")
    args = ap.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    from bench.run import ensure_bench_venv

    ensure_bench_venv("bench.render_rows")
    from bench.context import compile_streamcrawl

    compile_streamcrawl()  # the crawler as installed (bench.context)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="render-bench-"))
    part: dict[str, Any] = {"command": "python -m bench.render_rows " + shlex.join(given)}
    part["date"] = time.strftime("%Y-%m-%d %H:%M")

    def save() -> None:  # after each part: a stopped run keeps what it measured
        if args.out:
            args.out.write_text(json.dumps({"rendering": part}, indent=1))
        if args.md:
            write_section(args.md, section(part))

    if args.runs:
        part["compare"] = compare(workdir / "compare", args)
        save()
    if args.renders:
        try:
            part["long"] = long_run(workdir / "long", args)
        except Exception as e:
            part["long"] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
        save()
    for v in verdicts(part):
        print(json.dumps(v), flush=True)


if __name__ == "__main__":
    main()
