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

Targets (bench/render_report.py): CPU per rendered page <= Crawlee's in the same run; the
browser's RSS within 20 % of its level after the first 100 renders, all the way. ``--md``
replaces the "Rendering" section of that file (``section``); ``--out`` writes
``{"rendering": ...}`` for ``python -m bench.run --report-from RUN.json,FILE``.
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
from bench.render_report import CRAWLERS, section, verdicts, write_section

__all__ = ["main", "section"]  # ``section``: what bench/report.py writes for a results file
from bench.render_site import generate

REPO = Path(__file__).resolve().parent.parent
MEDIAN_KEYS = ("pages", "renders", "wall_s", "cpu_s", "cpu_ms", "wall_ms", "peak_rss_mb")


def kind(proc: Any) -> str:
    """Which part of a crawl a process is: ``chromium``, ``driver`` (Playwright's node) or
    ``crawler`` (the Python process); ``gone`` once it exited (a browser replaced or a
    renderer closed between the tree's listing and this)."""
    import psutil

    try:
        name = proc.name()
    except psutil.Error:
        return "gone"
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
    _kinds: dict[int, str] = field(default_factory=dict)
    _cpu_at: float = -1.0
    _memory_at: float = -1.0

    def __call__(self, tree: list[Any], seconds: float) -> None:
        import psutil

        if seconds - self._cpu_at >= self.cpu_every:
            self._cpu_at = seconds
            for p in tree:
                try:
                    t = p.cpu_times()
                    self.cpu[p.pid] = (self._kind(p), t.user + t.system)
                except psutil.Error:
                    pass
        if self.memory_every and seconds - self._memory_at >= self.memory_every:
            self._memory_at = seconds
            rss = pss = 0
            browsers = [p for p in tree if kind(p) == "chromium"]
            pids = {p.pid for p in browsers}
            main = None  # the browser process: a Chromium whose parent is none
            for p in browsers:
                try:
                    info = p.memory_full_info()
                    rss, pss = rss + info.rss, pss + info.pss
                    main = p.pid if p.ppid() not in pids else main
                except psutil.Error:
                    pass
            done = self.count() if self.count else None
            mib = 2**20
            row = {"t": round(seconds, 1), "renders": done, "procs": len(browsers), "main": main}
            row |= {"rss_mb": round(rss / mib, 1), "pss_mb": round(pss / mib, 1)}
            self.memory.append(row)
            if self.log is not None:
                with self.log.open("a") as f:
                    f.write(json.dumps(row) + "\n")

    def _kind(self, proc: Any) -> str:
        """``kind``, and for Chromium its process type: ``chromium.renderer``, ``.gpu-process``,
        ``.utility``, ``.zygote``, ``.browser`` (cached per process)."""
        if proc.pid not in self._kinds:
            k = kind(proc)
            if k == "chromium":
                types = [a[7:] for a in proc.cmdline() if a.startswith("--type=")]
                k = f"chromium.{types[0] if types else 'browser'}"
            self._kinds[proc.pid] = k
        return self._kinds[proc.pid]

    def cpu_by_kind(self) -> dict[str, float]:
        """CPU seconds by ``kind``, and by Chromium's process types (``chromium.TYPE``)."""
        out: dict[str, float] = {}
        for k, s in self.cpu.values():
            out[k] = out.get(k, 0.0) + s
            if k.startswith("chromium."):
                out["chromium"] = out.get("chromium", 0.0) + s
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
    launches = len({s["main"] for s in sampler.memory if s.get("main")})
    return {**row, "recycle": recycle_settings(), "launches": launches, "samples": sampler.memory}


def recycle_settings() -> dict[str, Any]:
    """The renderer's recycling limits of the streamcrawl under test (``RenderSettings``)."""
    import subprocess

    from bench.context import streamcrawl_binary

    python = Path(streamcrawl_binary()).with_name("python")
    code = (
        "from streamcrawl.agents.render.browser import RenderSettings as S; s = S(); "
        "print(s.recycle_after, s.max_pss, s.concurrency)"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    after, max_pss, concurrency = (int(v) for v in out.stdout.split())
    return {"after": after, "max_pss_mb": max_pss // 2**20, "concurrency": concurrency}


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
    ap.add_argument(
        "--long-from",
        type=Path,
        help="take the long run from an earlier --out file (its command shown) instead of "
        "running it",
    )
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
    if args.long_from:
        earlier = json.loads(args.long_from.read_text())["rendering"]
        part["long"] = {**earlier["long"], "command": earlier["command"]}
        save()
    elif args.renders:
        try:
            part["long"] = long_run(workdir / "long", args)
        except Exception as e:
            part["long"] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
        save()
    for v in verdicts(part):
        print(json.dumps(v), flush=True)


if __name__ == "__main__":
    main()
