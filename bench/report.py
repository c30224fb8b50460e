"""Write docs/benchmarks.md and docs/benchmarks.png from the results of ``bench/run.py``."""

from __future__ import annotations

import re
from pathlib import Path

from bench.run import ALL

ORDER = [
    "embedded",
    "embedded-warc",
    "kafka-1",
    "kafka-1-rerun",
    "kafka-2",
    "kafka-2-rerun",
    "scrapy",
    "crawlee",
    "wget",
]
# Targets as multiples of Scrapy's pages per CPU-second in the same run (docs/benchmarks.md)
TARGETS = {"embedded": 8.0, "kafka-1": 4.8, "kafka-2": 4.8}
SHORT = {
    "embedded": "streamcrawl\nembedded",
    "embedded-warc": "streamcrawl\nembedded --warc",
    "kafka-1": "streamcrawl\nKafka, 1 worker",
    "kafka-1-rerun": "streamcrawl\nKafka, 1 worker\n(rerun)",
    "kafka-2": "streamcrawl\nKafka, 2 workers",
    "scrapy": "Scrapy",
    "crawlee": "Crawlee",
    "wget": "wget --warc-file",
}
# Reference CPU per page, not measured by this bench (another machine, the 16 x 1000 site):
# shown beside the measured figures for comparison.
REFERENCE_MS = {"scrapy": 11.9, "crawlee": 6.0}


def _f(v, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _reason(entry: dict) -> str:
    """Why a crawler did not run, on one line (a traceback would break the table)."""
    return " ".join(str(entry.get("reason", "")).split()).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(r) + " |" for r in rows],
    ]


def _entries(section: dict) -> list[tuple[str, dict]]:
    return [(n, section[n]) for n in ORDER if n in section]


def _command(args: dict) -> str:
    parts = [
        "python -m bench.run",
        f"--origins {args['origins']}",
        f"--pages {args['pages']}",
        f"--runs {args['runs']}",
    ]
    if args["only"] != ALL:
        parts.append("--only " + ",".join(args["only"]))
    parts += [
        flag
        for flag, on in (
            ("--memory", args["memory"]),
            ("--stock", args["stock"]),
            ("--no-politeness", args["no_politeness"]),
            ("--no-profile", args["no_profile"]),
        )
        if on
    ]
    for flag, key, default in (
        ("--delay-zero", "delay_zero", "4x500"),
        ("--not-saturated", "not_saturated", "16x100@0.5"),
        ("--many-origins", "many_origins", "2000x5@1"),
        ("--split", "split", "1.5"),
        ("--idle-seconds", "idle_seconds", 60.0),
    ):
        value = args.get(key, default)  # older results files lack the newer options
        if value != default:
            parts.append(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}")
    if args.get("memory") and args.get("memory_budgets") != "1000,10000,50000":
        parts.append(f"--memory-budgets {args['memory_budgets']}")
    if args.get("memory") and args.get("memory_site_pages"):
        parts.append(f"--memory-site-pages {args['memory_site_pages']}")
    return " ".join(parts)


command = _command


def main_section(main: dict) -> list[str]:
    site = main["_site"]
    scrapy = main.get("scrapy", {}).get("median", {}).get("pages_per_cpu_s")
    lines = [
        f"## Throughput and cost: {site['origins']} origins x {site['pages']} pages "
        f"({site['expected']:,} pages, ~{site['links_per_page']} links each)",
        "",
        "Median of the runs. *pages* = distinct expected pages the server answered 200 (from the "
        "access log); CPU = user+system seconds of the crawler's own process tree; *x Scrapy* = "
        "pages per CPU-second relative to Scrapy in this same run.",
        "",
    ]
    header = [
        "crawler",
        "runs",
        "pages",
        "wall s",
        "pages/s",
        "CPU s",
        "ms CPU/page",
        "pages/CPU-s",
        "x Scrapy",
        "peak RSS MB",
        "missed",
        "duplicates",
        "private fetched",
        "nginx CPU s",
        "Kafka / Cassandra CPU s",
    ]
    rows = []
    for _, e in _entries(main):
        if e["status"] != "ok" or "median" not in e:
            rows.append([e["label"], f"**{e['status']}**: {_reason(e)}"] + [""] * (len(header) - 2))
            continue
        m = e["median"]
        ratio = m["pages_per_cpu_s"] / scrapy if scrapy and m["pages_per_cpu_s"] else None
        svc = (
            "-"
            if m["kafka_cpu_s"] is None
            else f"{_f(m['kafka_cpu_s'])} / {_f(m['cassandra_cpu_s'])}"
        )
        rows.append(
            [
                e["label"],
                str(len(e["runs"]) - len(e.get("excluded", [])))
                + (f" (+{len(e['excluded'])} excluded)" if e.get("excluded") else ""),
                f"{m['pages']:,.0f} / {site['expected']:,}",
                _f(m["wall_s"]),
                _f(m["pages_per_s"]),
                _f(m["cpu_s"]),
                _f(m["ms_cpu_per_page"], 2),
                _f(m["pages_per_cpu_s"]),
                _f(ratio, 2),
                _f(m["peak_rss_mb"], 0),
                _f(m["missed"], 0),
                _f(m["duplicates"], 0),
                str(m["private_fetched_max"]),
                _f(m["nginx_cpu_s"]),
                svc,
            ]
        )
    lines += _table(header, rows)
    for _, e in _entries(main):
        for x in e.get("excluded", []):
            lines += [
                "",
                f"*{e['label']}*: run {x['run']} is left out of the median: {x['reason']}",
            ]
    others = [e["median"]["other_cpu_s"] for _, e in _entries(main) if e.get("median")]
    if others and max(o or 0 for o in others) > 1:
        lines += [
            "",
            f"**Shared machine**: processes other than the crawler and nginx used up to "
            f"{max(o or 0 for o in others):.0f} CPU-seconds during a run (median per crawler; "
            "see *other CPU s* in "
            "*Every run*). Wall-clock figures suffer most; CPU-seconds per page less so.",
        ]
    lines += ["", "### Targets (reported, not asserted)", ""]
    trows = []
    for name, e in _entries(main):
        m = e.get("median")
        if name in TARGETS:
            if not m or not scrapy:
                verdict, got = "not measured", "-"
            else:
                got = f"{m['pages_per_cpu_s'] / scrapy:.2f}x"
                verdict = "met" if m["pages_per_cpu_s"] / scrapy >= TARGETS[name] else "**not met**"
            trows.append(
                [e["label"], f">= {TARGETS[name]:g}x Scrapy's pages per CPU-second", got, verdict]
            )
        if name in REFERENCE_MS:
            got = f"{m['ms_cpu_per_page']:.2f} ms" if m and m["ms_cpu_per_page"] else "-"
            trows.append(
                [
                    e["label"],
                    f"reference ~{REFERENCE_MS[name]} ms CPU/page (measured elsewhere, 16 x 1000)",
                    got,
                    "for comparison",
                ]
            )
    lines += _table(["crawler", "target", "measured", "verdict"], trows)
    lines += ["", "<details><summary>Every run</summary>", ""]
    rrows = []
    for _, e in _entries(main):
        for i, r in enumerate(e.get("runs", []), 1):
            rrows.append(
                [
                    e["label"],
                    f"{i} (excluded)" if r.get("excluded") else str(i),
                    str(r["pages"]),
                    _f(r["wall_s"]),
                    _f(r["span_s"]),
                    _f(r["cpu_s"]),
                    _f(r["ms_cpu_per_page"], 2),
                    _f(r["peak_rss_mb"], 0),
                    str(r["requests"]),
                    str(r["missed"]),
                    str(r["duplicates"]),
                    str(r["robots_duplicates"]),
                    str(r["private_fetched"]),
                    str(r["unexpected"]),
                    _f(r.get("other_cpu_s")),
                    _f(r.get("loadavg_1m"), 2),
                ]
            )
    lines += _table(
        [
            "crawler",
            "run",
            "pages",
            "wall s",
            "log span s",
            "CPU s",
            "ms CPU/page",
            "peak RSS MB",
            "requests",
            "missed",
            "duplicates",
            "robots.txt repeats",
            "private",
            "unexpected",
            "other CPU s",
            "load 1m",
        ],
        rrows,
    )
    lines += ["", "</details>", ""]
    return lines


def _wire_cells(wire: dict | None) -> list[str]:
    """The capture's min gap and origins under delay; why not, for a run without one."""
    if not wire:
        return ["not captured", "-"]
    if wire.get("status") != "ok":
        return [f"{wire.get('status')}: {wire.get('reason', '')}", "-"]
    return [_f(wire.get("min_gap"), 4), str(len(wire.get("origins_under_delay") or ()))]


def politeness_section(pol: dict) -> list[str]:
    s = pol["_site"]
    lines = [
        f"## Politeness-bound run: {s['origins']} origins x {s['pages']} pages, "
        f"delay {s['delay']} s",
        "",
        f"Ideal throughput = origins / delay = **{s['ideal_pages_per_s']:.0f} pages/s**. Gaps are "
        "between request *starts* on one origin (`$msec - $request_time` in the access log, 1 ms "
        "resolution), robots.txt excluded; *origins under delay* counts origins whose smallest gap "
        "is under the delay minus 2 ms. nginx's clock is cached per turn of its event loop, so "
        "on a loaded machine a logged start can be late by 10-30 ms; *on the wire* gives the "
        "same gaps from the kernel's timestamps of a loopback capture of the requests "
        "(`bench/wire.py`, tcpdump), robots.txt excluded, under the delay if by more than 0.5 ms.",
        "",
    ]
    rows = []
    for _, e in _entries(pol):
        if e["status"] != "ok":
            rows.append([e["label"], f"**{e['status']}**: {_reason(e)}", *[""] * 9])
            continue
        rows.append(
            [
                e["label"],
                f"{e['pages']:,} / {s['expected']:,}",
                _f(e["span_s"]),
                _f(e["span_pages_per_s"], 0),
                f"{e['span_pages_per_s'] / s['ideal_pages_per_s']:.0%}",
                _f(e["min_gap"], 3),
                _f(e["min_gap_with_robots"], 3),
                str(len(e["origins_under_delay"])),
                *_wire_cells(e.get("wire")),
                f"{e['cpu_s'] / e['span_s']:.0%}" if e["span_s"] else "-",
            ]
        )
    lines += _table(
        [
            "crawler",
            "pages",
            "log span s",
            "pages/s",
            "of ideal",
            "min gap s",
            "min gap incl. robots.txt s",
            "origins under delay",
            "min gap on the wire s",
            "origins under delay on the wire",
            "crawler CPU / span",
        ],
        rows,
    )
    lines += [
        "",
        "*crawler CPU / span* near 100% (one core) means the crawler was bound by its own CPU, "
        "not by the delay. Scrapy here puts each origin (host:port) in its own download slot with "
        "CONCURRENT_REQUESTS_PER_DOMAIN=1, DOWNLOAD_DELAY=delay, DOWNLOAD_DELAY_JITTER=0 and "
        "SCHEDULER_PRIORITY_QUEUE=DownloaderAwarePriorityQueue (Scrapy's broad-crawl advice).",
        "",
    ]
    return lines


def memory_section(mem: dict) -> list[str]:
    s = mem["_site"]
    lines = [
        f"## Memory run: one site of {s['expected']:,} pages, growing page budgets",
        "",
        "RSS of the crawler's process tree sampled every 50 ms; "
        "flat means bounded by configuration, "
        "not by the size of the crawl.",
        "",
    ]
    if s.get("note"):  # rows merged from runs on other sites say so
        lines += [s["note"], ""]
    rows = []
    for _, e in _entries(mem):
        for b, r in e["budgets"].items():
            if r["status"] != "ok":
                rows.append([e["label"], b, f"**{r['status']}**: {_reason(r)}", "", "", "", "", ""])
                continue
            samp = [mb for _, mb in r.get("rss_samples", [])]
            q = [
                samp[min(len(samp) - 1, int(len(samp) * f))] if samp else None
                for f in (0.25, 0.5, 0.75)
            ]
            rows.append(
                [
                    e["label"],
                    f"{int(b):,}",
                    f"{r['pages']:,}",
                    _f(r["wall_s"]),
                    _f(q[0], 0),
                    _f(q[1], 0),
                    _f(q[2], 0),
                    _f(r["peak_rss_mb"], 0),
                ]
            )
    lines += _table(
        ["crawler", "budget", "pages", "wall s", "RSS at 25% MB", "at 50%", "at 75%", "peak MB"],
        rows,
    )
    return [*lines, ""]


def profile_section(profiles: dict) -> list[str]:
    lines = ["## Where the CPU goes (py-spy, 100 Hz, one extra run each, not timed)", ""]
    if profiles.get("_note"):  # e.g. profiles taken from another run of the harness
        lines += [profiles["_note"], ""]
    for _, p in _entries(profiles):
        if p["status"] != "ok":
            lines += [f"**{p['label']}**: {p['status']}: {p.get('reason', '')}", ""]
            continue
        total = p["samples"] or 1
        lines += [f"**{p['label']}** ({total:,} samples)", ""]
        rows = []
        for i in range(max(len(p["by_package"]), len(p["self_top"]))):
            pkg = p["by_package"][i] if i < len(p["by_package"]) else None
            fn = p["self_top"][i] if i < len(p["self_top"]) else None
            rows.append(
                [
                    f"{pkg[0]}" if pkg else "",
                    f"{pkg[1] / total:.0%}" if pkg else "",
                    f"`{fn[0]}`" if fn else "",
                    f"{fn[1] / total:.0%}" if fn else "",
                ]
            )
        lines += [*_table(["package (self)", "share", "function (self)", "share"], rows), ""]
    return lines


def reshard_section(part: dict) -> list[str]:
    """The reshard section, from a results file's ``reshard`` (``bench/reshard.py --out``)."""
    source = f"From `{part['source']}`: " if "source" in part else ""
    lines = [
        "",
        "## Reshard: a crawl's tables moved to another partition count",
        "",
        "`streamcrawl admin reshard` timed as a subprocess, all its steps included, on tables the "
        "real frontier built (a share of each origin's URLs still queued, the rest fetched), "
        "written to the changelogs of the local single broker; the workers stopped, as the "
        'command requires (docs/kubernetes.md, "Partitions"). The machine is shared.',
        "",
        f"{source}`{part['command']}`.",
        "",
    ]
    rows = [
        [
            f"{run['seen_urls']:,}",
            f"{run['origins']:,}",
            f"{run['partitions'][0]} -> {run['partitions'][1]}",
            _step_figure(run["steps"], r"moved (\d+) table entries", "{:,}"),
            _step_figure(run["steps"], r"step tables done in ([\d.]+) s", "{:.1f}"),
            _step_figure(run["steps"], r"step verified done in ([\d.]+) s", "{:.1f}"),
            f"{run['reshard_s']:.1f}",
            f"{run['reshard_s_per_million_seen']:.1f}",
            str(run["peak_rss_mb"]),
        ]
        for run in part["runs"]
    ]
    header = ["seen URLs", "origins", "partitions", "entries moved", "tables s", "verify s"]
    return [*lines, *_table([*header, "reshard s", "s per million seen", "peak RSS MB"], rows), ""]


def doc_site_section(part: dict) -> list[str]:
    """The one-real-site section, from a results file's ``doc_site`` (``bench/doc_site.py
    --out``): each package's Kafka and embedded medians, then the targets."""
    from bench.doc_site import WIRINGS, verdicts

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
                rows.append([package, label, f"**{m['status']}**: {_reason(m)}", *[""] * 10])
                continue
            rows.append(
                [
                    package,
                    label,
                    str(m["runs"]),
                    f"{m['pages']:,.0f} / {got['pages']:,}",
                    _f(got["page_kb"]),
                    _f(m["span_s"]),
                    _f(m["span_pages_per_s"], 0),
                    _f(m["crawler_ms"], 2),
                    _f(m["kafka_ms"], 2),
                    _f(m["cassandra_ms"], 2),
                    _f(m["total_ms"], 2),
                    *(
                        ["-", "-"]
                        if wiring == "embedded"
                        else [_ratio(m, base, "span_pages_per_s"), _ratio(m, base, "total_ms")]
                    ),
                ]
            )
    header = ["package", "wiring", "runs", "pages", "page KB", "log span s", "pages/s"]
    header += ["crawler ms/page", "broker ms/page", "Cassandra ms/page", "all-in ms/page"]
    lines += _table([*header, "pages/s x embedded", "all-in x embedded"], rows)
    trows = []
    for c in verdicts(part):
        style = "{:.0f} pages/s" if c["what"] == "rate" else "{:.1f} ms/page"
        shown = "-" if c["value"] is None else style.format(c["value"])
        verdict = "not measured" if c["met"] is None else "met" if c["met"] else "**not met**"
        trows.append([c["package"], WIRINGS[c["wiring"]], c["target"], shown, verdict])
    if trows:
        lines += ["", *_table(["package", "wiring", "target", "measured", "verdict"], trows)]
    return [*lines, ""]


def _ratio(row: dict, base: dict, key: str) -> str:
    """``row[key]`` as a multiple of the embedded crawl's (``-``: either not measured)."""
    if base.get("status") != "ok" or not base.get(key) or row.get(key) is None:
        return "-"
    return f"{row[key] / base[key]:.2f}x"


def _step_figure(steps: list[str], pattern: str, style: str) -> str:
    """A figure from the lines ``admin reshard`` printed (``-``: none)."""
    for step in steps:
        found = re.search(pattern, step)
        if found:
            return style.format(float(found.group(1)) if "." in style else int(found.group(1)))
    return "-"


def write_chart(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = results["main"]
    ok = [
        (SHORT.get(n, n), main[n]["median"]) for n in ORDER if n in main and main[n].get("median")
    ]
    mem = results.get("memory")
    panels = 3 if mem else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2))
    names = [n for n, _ in ok]
    for ax, key, title in (
        (axes[0], "pages_per_cpu_s", "pages per CPU-second (higher is better)"),
        (axes[1], "pages_per_s", "pages per second, wall clock"),
    ):
        vals = [m[key] or 0 for _, m in ok]
        bars = ax.bar(names, vals, color=["#2a7" if "streamcrawl" in n else "#888" for n in names])
        ax.bar_label(bars, fmt="%.0f")
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
    if mem:
        ax = axes[2]
        for name, e in _entries(mem):
            for b, r in e["budgets"].items():
                if r["status"] == "ok" and r.get("rss_samples"):
                    t, mb = zip(*r["rss_samples"], strict=True)
                    ax.plot(t, mb, label=f"{name} {int(b):,} pages")
        ax.set_title("RSS over the crawl (MB)", fontsize=10)
        ax.set_xlabel("seconds")
        ax.legend(fontsize=7)
    site = main["_site"]
    fig.suptitle(
        f"Synthetic web {site['origins']} x {site['pages']} on 127.0.0.1 (median of runs)",
        fontsize=11,
    )
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def write(results: dict, md: Path, png: Path) -> None:
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(markdown(results, png.name))
    write_chart(results, png)


def markdown(results: dict, chart: str) -> str:
    """The report of ``results`` (one results file, or several merged), linking ``chart``."""
    env, args = results["env"], results["args"]
    lines = [
        "# Benchmarks: streamcrawl, Scrapy and Crawlee on one synthetic web",
        "",
        f"Generated by `{_command(args)}` (bench/README.md) on {env['date']} at commit "
        f"{env['repo_commit']}, in {results['elapsed_s'] / 60:.0f} min. "
        "Do not edit by hand: rerun.",
        "",
        f"![chart]({chart})",
        "",
        "## Environment",
        "",
    ]
    lines += _table(
        ["", ""], [[k, str(v)] for k, v in env.items() if k not in ("date", "repo_commit")]
    )
    lines += [
        "",
        "Every crawler runs as its own process on the same site, served by one nginx worker on "
        "127.0.0.1 (restarted per run, so each run has its own access log), seeded with every "
        "origin's root. Competitors strip tracking parameters in their link handling"
        + (" — **not in this run (--stock)**" if args["stock"] else "")
        + " so that all crawlers do the same work; see bench/README.md.",
        "",
    ]
    if results.get("merged_from"):
        lines += ["Sections merged from these runs of the harness (each measured as shown):", ""]
        lines += [f"- `{m['file']}`: `{m['command']}`" for m in results["merged_from"]]
        lines += [""]
    lines += main_section(results["main"])
    from bench.warc_rows import warc_section

    lines += warc_section(results["main"], results.get("warc"))
    if results.get("notes"):
        lines += ["## Findings", "", results["notes"].strip(), ""]
    if "politeness" in results:
        lines += politeness_section(results["politeness"])
    from bench.cpu_split import split_section
    from bench.worker_rows import few_origins_section, idle_section, not_saturated_section

    if "delay_zero" in results:
        lines += few_origins_section(results["delay_zero"])
    if "not_saturated" in results:
        lines += not_saturated_section(results["not_saturated"])
    if "many_origins" in results:
        from bench.many_origins import section

        lines += section(results["many_origins"])
    if "doc_site" in results:
        lines += doc_site_section(results["doc_site"])
    if "reshard" in results:
        lines += reshard_section(results["reshard"])
    if "idle" in results:
        lines += idle_section(results["idle"])
    if "not_saturated" in results:
        lines += split_section(results)
    if "memory" in results:
        lines += memory_section(results["memory"])
    else:
        lines += ["## Memory run", "", "Not part of this run (`--memory`).", ""]
    if "profiles" in results:
        lines += profile_section(results["profiles"])
    return "\n".join(lines) + "\n"
