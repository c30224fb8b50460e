"""The report of the rendering bench (bench/render_rows.py): its targets and the "Rendering"
section of docs/benchmarks.md, from ``{"rendering": part}`` (``python -m bench.render_rows
--out``, or ``python -m bench.run --report-from RUN.json,FILE``)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.tables import cell, reason, table

CRAWLERS = {
    "embedded": "streamcrawl crawl --render always (embedded)",
    "crawlee": "Crawlee for Python (PlaywrightCrawler)",
}
RSS_TOLERANCE = 0.2  # the long run's target: within 20 % of the level after the first 100
RSS_AFTER = 100
WINDOW = 100  # renders per window of the long run's memory samples
HEADING = "## Rendering"
PARTS = ("crawler", "driver", "chromium")  # process kinds, in the order the report shows them


def windows(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The long run's samples by windows of ``WINDOW`` renders from ``RSS_AFTER`` on: in each,
    the median and the largest summed RSS and PSS, and the median process count. The browser's
    processes come and go with its pages (a sample may catch one more renderer or one less), so
    a window's median is its level; a leak raises the medians window after window."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for s in samples:
        done = s.get("renders") or 0
        if done >= RSS_AFTER and s["rss_mb"] > 0:
            groups.setdefault(RSS_AFTER + (done - RSS_AFTER) // WINDOW * WINDOW, []).append(s)
    out = []
    for start, group in sorted(groups.items()):
        row: dict[str, Any] = {"renders": start, "samples": len(group)}
        row["procs"] = statistics.median(s["procs"] for s in group)
        for key in ("rss_mb", "pss_mb"):
            row[key] = statistics.median(s[key] for s in group)
            row[f"max_{key}"] = max(s[key] for s in group)
        out.append(row)
    return out


def flatness(samples: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The long run's memory against its level, the median of the first window (renders
    ``RSS_AFTER`` to ``RSS_AFTER + WINDOW``): every later window's median within
    ``RSS_TOLERANCE`` of it is flat (None: the run never got past the first window)."""
    rows = windows(samples)
    if len(rows) < 2:
        return None
    level = rows[0][key]
    ratios = [r[key] / level for r in rows]
    return {
        "level": round(level),
        "max": round(max(r[key] for r in rows)),
        "min": round(min(r[key] for r in rows)),
        "max_ratio": round(max(ratios), 3),
        "min_ratio": round(min(ratios), 3),
        "peak": round(max(r[f"max_{key}"] for r in rows)),
        "renders": max(s.get("renders") or 0 for s in samples),
        "met": all(abs(r - 1) <= RSS_TOLERANCE for r in ratios),
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
    text = (
        f"browser RSS within {RSS_TOLERANCE:.0%} of its level after {RSS_AFTER} renders "
        f"(medians of {WINDOW} renders)"
    )
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
        lines += [*table(header, rows), ""]
        for name, label in CRAWLERS.items():
            m = cmp["median"].get(name) or {}
            types = sorted(
                ((k[9:-7], v) for k, v in m.items() if k.startswith("chromium.") and v),
                key=lambda kv: -kv[1],
            )
            if types:
                shown = ", ".join(f"{t} {v:,.0f}" for t, v in types)
                lines.append(f"- {label}: Chromium's CPU ms per render by process type: {shown}.")
        lines += ["", "Every run:", ""]
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
    source = f" (`{long['command']}`)" if "command" in long else ""
    lines = [
        f"Long run{source}: one `streamcrawl crawl --render always` of {long['pages']:,} pages; "
        f"{long['renders']:,} rendered in {long['wall_s']:,.0f} s, "
        f"{long['wall_ms']:,.0f} wall ms per render (render time p50 "
        f"{cell(long.get('render_ms_p50'))} ms, p95 {cell(long.get('render_ms_p95'))} ms). "
        f"The renderer replaces its browser every {rec['after']} renders (and above "
        f"{rec['max_pss_mb']:,} MiB of its processes' PSS), {rec['concurrency']} pages at once; "
        f"browsers seen: {cell(long.get('launches'))}. The "
        "browser's processes sampled every 2 s: summed RSS and PSS (shared pages counted once), "
        "the renders done read from the access log.",
        "",
    ]
    samples = long["samples"]
    rows = [
        [f"{w['renders']:,}-{w['renders'] + WINDOW - 1:,}", str(w["samples"]),
         cell(float(w["procs"]), 0), cell(w["rss_mb"], 0), cell(w["max_rss_mb"], 0),
         cell(w["pss_mb"], 0), cell(w["max_pss_mb"], 0)]
        for w in windows(samples)
    ]  # fmt: skip
    header = ["renders", "samples", "processes", "RSS MiB median", "RSS max", "PSS median"]
    lines += [*table([*header, "PSS max"], rows), ""]
    for key in ("rss_mb", "pss_mb"):
        f = flatness(samples, key)
        if f:
            lines.append(
                f"- {key[:3].upper()}: level {f['level']} MiB (the median of renders "
                f"{RSS_AFTER}-{RSS_AFTER + WINDOW - 1}); the later windows' medians "
                f"{f['min']} to {f['max']} MiB ({f['min_ratio']:.2f}x to {f['max_ratio']:.2f}x "
                f"the level), the largest sample {f['peak']} MiB, up to {f['renders']:,} renders."
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
