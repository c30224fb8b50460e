"""Write docs/benchmarks.md and docs/benchmarks.png from the results of ``bench/run.py``."""

from __future__ import annotations

import re
from pathlib import Path

from bench.run import ALL
from bench.tables import cell, entries, reason, table

# Targets as multiples of Scrapy's pages per CPU-second in the same run (docs/benchmarks.md)
TARGETS = {"embedded": 8.0, "kafka-1": 4.8, "kafka-2": 4.8}
# Reference CPU per page, not measured by this bench (another machine, the 16 x 1000 site):
# shown beside the measured figures for comparison.
REFERENCE_MS = {"scrapy": 11.9, "crawlee": 6.0}


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
        "services' CPU s",
    ]
    rows = []
    for _, e in entries(main):
        if e["status"] != "ok" or "median" not in e:
            rows.append([e["label"], f"**{e['status']}**: {reason(e)}"] + [""] * (len(header) - 2))
            continue
        m = e["median"]
        ratio = m["pages_per_cpu_s"] / scrapy if scrapy and m["pages_per_cpu_s"] else None
        svc = "-"
        if m["kafka_cpu_s"] is not None:
            svc = f"Kafka {cell(m['kafka_cpu_s'])} / Cassandra {cell(m['cassandra_cpu_s'])}"
        elif m.get("proxy_cpu_s") is not None:
            svc = f"proxy {cell(m['proxy_cpu_s'])}"
        rows.append(
            [
                e["label"],
                str(len(e["runs"]) - len(e.get("excluded", [])))
                + (f" (+{len(e['excluded'])} excluded)" if e.get("excluded") else ""),
                f"{m['pages']:,.0f} / {site['expected']:,}",
                cell(m["wall_s"]),
                cell(m["pages_per_s"]),
                cell(m["cpu_s"]),
                cell(m["ms_cpu_per_page"], 2),
                cell(m["pages_per_cpu_s"]),
                cell(ratio, 2),
                cell(m["peak_rss_mb"], 0),
                cell(m["missed"], 0),
                cell(m["duplicates"], 0),
                str(m["private_fetched_max"]),
                cell(m["nginx_cpu_s"]),
                svc,
            ]
        )
    lines += table(header, rows)
    for _, e in entries(main):
        for x in e.get("excluded", []):
            lines += [
                "",
                f"*{e['label']}*: run {x['run']} is left out of the median: {x['reason']}",
            ]
    others = [e["median"]["other_cpu_s"] for _, e in entries(main) if e.get("median")]
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
    for name, e in entries(main):
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
    lines += table(["crawler", "target", "measured", "verdict"], trows)
    lines += ["", "<details><summary>Every run</summary>", ""]
    rrows = []
    for _, e in entries(main):
        for i, r in enumerate(e.get("runs", []), 1):
            rrows.append(
                [
                    e["label"],
                    f"{i} (excluded)" if r.get("excluded") else str(i),
                    str(r["pages"]),
                    cell(r["wall_s"]),
                    cell(r["span_s"]),
                    cell(r["cpu_s"]),
                    cell(r["ms_cpu_per_page"], 2),
                    cell(r["peak_rss_mb"], 0),
                    str(r["requests"]),
                    str(r["missed"]),
                    str(r["duplicates"]),
                    str(r["robots_duplicates"]),
                    str(r["private_fetched"]),
                    str(r["unexpected"]),
                    cell(r.get("other_cpu_s")),
                    cell(r.get("loadavg_1m"), 2),
                ]
            )
    lines += table(
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
    for _, e in entries(mem):
        for b, r in e["budgets"].items():
            if r["status"] != "ok":
                rows.append([e["label"], b, f"**{r['status']}**: {reason(r)}", "", "", "", "", ""])
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
                    cell(r["wall_s"]),
                    cell(q[0], 0),
                    cell(q[1], 0),
                    cell(q[2], 0),
                    cell(r["peak_rss_mb"], 0),
                ]
            )
    lines += table(
        ["crawler", "budget", "pages", "wall s", "RSS at 25% MB", "at 50%", "at 75%", "peak MB"],
        rows,
    )
    return [*lines, ""]


def reshard_section(part: dict) -> list[str]:
    """The reshard section, from a results file's ``reshard``
    (``bench/probes/reshard.py --out``)."""
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
    return [*lines, *table([*header, "reshard s", "s per million seen", "peak RSS MB"], rows), ""]


def _step_figure(steps: list[str], pattern: str, style: str) -> str:
    """A figure from the lines ``admin reshard`` printed (``-``: none)."""
    for step in steps:
        found = re.search(pattern, step)
        if found:
            return style.format(float(found.group(1)) if "." in style else int(found.group(1)))
    return "-"


def write(results: dict, md: Path, png: Path) -> None:
    from bench.chart import write_chart  # matplotlib: only for the chart

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
    lines += table(
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
        from bench.wire import politeness_section

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
        from bench.doc_site import doc_site_section

        lines += doc_site_section(results["doc_site"])
    if "assets" in results:
        from bench.asset_rows import assets_section

        lines += assets_section(results["assets"])
    if "rendering" in results:
        from bench.render_rows import section as rendering_section

        lines += rendering_section(results["rendering"])
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
        from bench.profile import profile_section

        lines += profile_section(results["profiles"])
    return "\n".join(lines) + "\n"
