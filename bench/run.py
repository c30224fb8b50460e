"""The one benchmark command: ``python -m bench.run [options]`` from the repo root.

Generates the synthetic web, serves it with nginx on 127.0.0.1, runs every crawler on it
(interleaved, ``--runs`` times each), validates the WARC files of the crawlers that archive
and compares their archives, then the politeness-bound run, the Kafka worker's rows
(few origins at delay 0, not saturated at two delays), the many-origins row (embedded and
Kafka, bench/many_origins.py), the idle worker, the memory run (``--memory``)
and the profiles, and writes ``docs/benchmarks.md`` and ``docs/benchmarks.png``.  Raw results
go to ``bench/results/`` (git-ignored).  See bench/README.md.

It re-executes itself in the benchmark venv (default ``.bench-venv`` in the checkout, created with
bench/requirements.txt if missing), so the project venv never gets Scrapy or Crawlee.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.cpu_split import MIN_RATE_RATIO  # standard library only, as this module before re-exec

REPO = Path(__file__).resolve().parent.parent
# Defaults relative to the checkout or the system temp dir: no path of one machine.
VENV = Path(os.environ.get("STREAMCRAWL_BENCH_VENV") or REPO / ".bench-venv")
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
ALL = [
    "scrapy",
    "crawlee",
    "embedded",
    "embedded-warc",
    "embedded-requests",
    "embedded-extract",
    "embedded-text",
    "embedded-proxy",
    "wget",
    "kafka-1",
    "kafka-2",
    "kafka-1-extract",
    "kafka-1-text",
]


def ensure_bench_venv(module: str = "bench.run") -> None:
    """Create the benchmark venv if needed and re-execute ``python -m module`` (this command)
    inside it."""
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not python.exists():
        print(f"creating the benchmark venv {VENV} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    probe = "import scrapy, crawlee, parsel, playwright, psutil, matplotlib"
    if subprocess.run([str(python), "-c", probe], capture_output=True).returncode != 0:
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True
        )
    os.chdir(REPO)
    os.execv(str(python), [str(python), "-m", module, *sys.argv[1:]])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    ap.add_argument("--origins", type=int, default=16, help="origins (ports) of the main site")
    ap.add_argument("--pages", type=int, default=1000, help="pages per origin of the main site")
    ap.add_argument("--runs", type=int, default=3, help="runs per crawler (the median is reported)")
    ap.add_argument(
        "--only",
        default=",".join(ALL),
        help=f"comma list from {','.join(ALL)} (default: all; embedded-warc and wget are the "
        "WARC rows, bench/warc_rows.py)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="4 origins x 250 pages, 1 run, small politeness, few-origins and many-origins runs "
        "(a given --delay-zero or --many-origins stands), no CPU split, no profiles",
    )
    ap.add_argument("--no-politeness", action="store_true")
    ap.add_argument("--politeness-origins", type=int, default=256)
    ap.add_argument("--politeness-pages", type=int, default=20)
    ap.add_argument("--politeness-delay", type=float, default=0.5)
    ap.add_argument(
        "--not-saturated",
        default="16x100@0.5",
        help="ORIGINSxPAGES@DELAY of the Kafka not-saturated row (kafka-1, kafka-2); 'none' skips",
    )
    ap.add_argument(
        "--many-origins",
        default="2000x5@1",
        metavar="ORIGINSxPAGES@DELAY",
        help="the many-origins row (embedded, kafka-1, kafka-2; bench/many_origins.py): the "
        "web's shape, many origins of a few pages each at a delay; 'none' skips",
    )
    ap.add_argument(
        "--split",
        default="1.5",
        metavar="DELAY",
        help="second delay of the not-saturated shape (same site, kafka-1 and kafka-2): the "
        "worker's CPU split into a per-page and a per-second part; 'none' skips",
    )
    ap.add_argument(
        "--delay-zero",
        default="4x500",
        metavar="ORIGINSxPAGES",
        help="few origins at delay 0, one request per origin at a time (kafka-1, and embedded "
        "for reference); 'none' skips",
    )
    ap.add_argument(
        "--idle-seconds",
        type=float,
        default=60.0,
        help="seconds of the idle-worker row (12 partitions, with kafka-1); 0 skips",
    )
    ap.add_argument(
        "--memory", action="store_true", help="also the long memory run (1k/10k/50k pages)"
    )
    ap.add_argument("--memory-budgets", default="1000,10000,50000")
    ap.add_argument(
        "--memory-site-pages",
        type=int,
        help="pages of the memory run's site (default 1.25 x the largest budget); give the same "
        "value to runs with different budgets so that they crawl the same site",
    )
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument(
        "--stock",
        action="store_true",
        help="competitors without tracking-parameter stripping (more duplicates)",
    )
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per crawler run")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "streamcrawl-bench"))
    ap.add_argument("--base-port", type=int, default=20000)
    ap.add_argument("--md", default=str(REPO / "docs" / "benchmarks.md"))
    ap.add_argument("--png", default=str(REPO / "docs" / "benchmarks.png"))
    ap.add_argument(
        "--report-from",
        metavar="JSON[,JSON...]",
        help="only rewrite --md/--png from bench/results file(s); the politeness, memory and "
        "profile rows of later files are merged into the first (each keeps its own runs), and "
        "a later file's not-saturated, many-origins and idle sections replace the first's whole",
    )
    ap.add_argument(
        "--exclude-run",
        action="append",
        default=[],
        metavar="NAME:RUN:REASON",
        help="with --report-from: leave run RUN (1-based) of crawler NAME out of the main median, "
        "listed with REASON under the table (e.g. a run the harness measured wrongly)",
    )
    ap.add_argument(
        "--notes",
        metavar="MD",
        help="with --report-from: a markdown file of findings added to the report as written",
    )
    a = ap.parse_args(argv)
    if a.quick:
        a.origins, a.pages, a.runs, a.no_profile = 4, 250, 1, True
        a.politeness_origins, a.politeness_pages = 32, 10
        a.split = "none"
        if a.many_origins == ap.get_default("many_origins"):  # an explicit one stands
            a.many_origins = "200x5@1"
        if a.delay_zero == ap.get_default("delay_zero"):  # an explicit --delay-zero stands
            a.delay_zero = "2x250"
    a.only = [x.strip() for x in a.only.split(",") if x.strip()]
    bad = set(a.only) - set(ALL)
    if bad:
        ap.error(f"unknown crawler(s) {sorted(bad)}; choose from {ALL}")
    try:
        a.not_saturated_shape = shape(a.not_saturated, 0.5)
        a.delay_zero_shape = shape(a.delay_zero)
        a.many_origins_shape = shape(a.many_origins, 1.0)
        a.split_delay = None if a.split == "none" else float(a.split)
    except ValueError as e:
        ap.error(str(e))
    if a.not_saturated_shape and a.split_delay:
        delays = sorted((a.not_saturated_shape[2], a.split_delay))
        if delays[1] < MIN_RATE_RATIO * delays[0]:  # the fit would be noise
            ap.error(f"--split: the two delays must differ by {MIN_RATE_RATIO}x at least")
    return a


def shape(text: str, default_delay: float = 0.0) -> tuple[int, int, float] | None:
    """``ORIGINSxPAGES[@DELAY]`` as (origins, pages, delay); None for 'none'."""
    if text == "none":
        return None
    size, _, delay = text.partition("@")
    origins, _, pages = size.partition("x")
    try:
        return int(origins), int(pages), float(delay) if delay else default_delay
    except ValueError:
        raise ValueError(f"{text!r}: expected ORIGINSxPAGES[@DELAY] or 'none'") from None


# Sections of a results file that are one measurement each: a later file's replaces the first's
# whole (its rows are compared with each other, never with another run's).
WHOLE_SECTIONS = (
    "delay_zero", "not_saturated", "idle", "many_origins", "reshard", "doc_site", "assets",
    "rendering",
)  # fmt: skip


def source_command(results: dict) -> str:
    """The command that wrote a results file: ``bench.run``'s arguments, or the command a
    file of one section records (``bench/probes/reshard.py --out``)."""
    from bench import report

    if "args" in results:
        return report.command(results["args"])
    return next(part["command"] for part in results.values() if "command" in part)


def merge_results(sources: list[Path], exclude_run: list[str]) -> dict:
    """The first results file with ``exclude_run`` (``NAME:RUN:REASON``) left out of its main
    medians, and the later files merged in: their main rows as separate runs, their politeness,
    memory and profile rows by crawler (a later file's row replaces the first's, labelled with
    its file), their not-saturated, many-origins and idle sections whole (``source`` names the
    file)."""
    from bench import suite

    results: dict = json.loads(sources[0].read_text())
    for spec in exclude_run:
        name, run, reason = spec.split(":", 2)
        entry = results["main"][name]
        bad = entry["runs"][int(run) - 1]
        bad["excluded"] = reason
        entry.setdefault("excluded", []).append({"run": int(run), "reason": reason})
        entry["median"] = suite._median([r for r in entry["runs"] if "excluded" not in r])
    for extra in sources[1:]:
        more = json.loads(extra.read_text())
        for name, entry in more.get("main", {}).items():
            if name != "_site" and entry.get("runs"):
                if more["main"]["_site"] != results["main"]["_site"]:
                    raise SystemExit(f"{extra}: main is on another site than {sources[0]}")
                entry["label"] += f" — separate run ({extra.name})"
                results["main"][f"{name}-rerun"] = entry
        for key in ("politeness", "memory", "profiles"):
            if key in more:
                merged = results.setdefault(key, {})
                for name, entry in more[key].items():
                    if name == "_site" and "_site" in merged and merged["_site"] != entry:
                        raise SystemExit(f"{extra}: {key} is on another site than {sources[0]}")
                    if isinstance(entry, dict) and "label" in entry:
                        entry["label"] += f" ({extra.name})"
                    merged[name] = entry
        for key in WHOLE_SECTIONS:
            if key in more:
                results[key] = {**more[key], "source": extra.name}
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    ensure_bench_venv()
    # SIGTERM unwinds like Ctrl-C, so that nginx and the crawler under test are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from bench import report, suite, warc_rows  # psutil: only inside the benchmark venv
    from bench.context import compile_streamcrawl

    if args.report_from:
        sources = [Path(f) for f in args.report_from.split(",")]
        results = merge_results(sources, args.exclude_run)
        if len(sources) > 1:
            results["merged_from"] = [
                {"file": f.name, "command": source_command(json.loads(f.read_text()))}
                for f in sources
            ]
            merged_file = REPO / "bench" / "results" / time.strftime("merged-%Y%m%d-%H%M%S.json")
            merged_file.write_text(json.dumps(results, indent=1, default=str))
            print(f"merged into {merged_file}")
        if args.notes:
            results["notes"] = Path(args.notes).read_text()
        report.write(results, Path(args.md), Path(args.png))
        print(f"wrote {args.md} and {args.png} from {args.report_from}")
        return
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    compile_streamcrawl()  # measure the crawler as installed, not its compilation at each start
    t0 = time.time()
    results: dict = {"args": dict(vars(args)), "env": suite.environment(), "elapsed_s": 0.0}
    raw = REPO / "bench" / "results" / time.strftime("%Y%m%d-%H%M%S.json")
    raw.parent.mkdir(parents=True, exist_ok=True)

    def checkpoint() -> None:  # a run stopped half-way keeps what it measured
        results["elapsed_s"] = time.time() - t0
        raw.write_text(json.dumps(results, indent=1, default=str))

    site = suite.ensure_site(workdir, args.origins, args.pages, args.base_port)
    results["main"] = suite.compare(site, args.only, args.runs, workdir / "main", args)
    checkpoint()
    if any(n in args.only for n in warc_rows.ARCHIVING):
        results["warc"] = warc_rows.check(results["main"])  # after the runs: not in their CPU
        checkpoint()
    if not args.no_politeness:
        psite = suite.ensure_site(
            workdir, args.politeness_origins, args.politeness_pages, args.base_port + 1000
        )
        results["politeness"] = suite.politeness(psite, args.only, workdir / "politeness", args)
        checkpoint()
    few = [n for n in args.only if n in ("embedded", "kafka-1")]
    if few and args.delay_zero_shape:
        origins, pages, _ = args.delay_zero_shape
        zsite = suite.ensure_site(workdir, origins, pages, args.base_port + 4000)
        results["delay_zero"] = suite.few_origins(
            zsite, few, args.runs, workdir / "delay-zero", args
        )
        checkpoint()
    kafka = [n for n in args.only if n in ("kafka-1", "kafka-2")]
    if kafka and args.not_saturated_shape:
        origins, pages, delay = args.not_saturated_shape
        nsite = suite.ensure_site(workdir, origins, pages, args.base_port + 3000)
        results["not_saturated"] = suite.not_saturated(
            nsite, kafka, args.runs, workdir / "not-saturated", args, delay, args.split_delay
        )
        checkpoint()
    many = [n for n in args.only if n in ("embedded", "kafka-1", "kafka-2")]
    if many and args.many_origins_shape:
        from bench import many_origins

        origins, pages, delay = args.many_origins_shape
        msite = suite.ensure_site(workdir, origins, pages, args.base_port + 5000)
        results["many_origins"] = many_origins.measure(
            msite, many, args.runs, workdir / "many-origins", args, delay
        )
        checkpoint()
    if "kafka-1" in args.only and args.idle_seconds > 0:
        from bench.worker_rows import idle

        try:
            results["idle"] = idle(workdir / "idle", 12, args.idle_seconds)
        except Exception as e:  # a failed row must not lose the others
            results["idle"] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
        checkpoint()
    if args.memory:
        budgets = [int(b) for b in args.memory_budgets.split(",")]
        per_origin = 1000
        site_pages = args.memory_site_pages or int(max(budgets) * 1.25)
        msite = suite.ensure_site(
            workdir, -(-site_pages // per_origin), per_origin, args.base_port + 2000
        )
        results["memory"] = suite.memory(msite, args.only, budgets, workdir / "memory", args)
        checkpoint()
    if not args.no_profile:
        results["profiles"] = suite.profiles(site, args.only, workdir / "profiles", args)
    checkpoint()
    report.write(results, Path(args.md), Path(args.png))
    print(f"wrote {args.md}, {args.png} and {raw} in {results['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()
