"""docs/benchmarks.png: the main table's pages per CPU-second and per second, and the memory
run's RSS over a crawl, from the results of ``bench/run.py``."""

from __future__ import annotations

from pathlib import Path

from bench.tables import ORDER, entries

SHORT = {
    "embedded": "streamcrawl\nembedded",
    "embedded-warc": "streamcrawl\nembedded --warc",
    "embedded-requests": "streamcrawl\nembedded\n--header --cookies",
    "embedded-text": "streamcrawl\nembedded --text",
    "embedded-extract": "streamcrawl\nembedded\n--extract x5",
    "embedded-proxy": "streamcrawl\nembedded --proxy",
    "kafka-1": "streamcrawl\nKafka, 1 worker",
    "kafka-1-rerun": "streamcrawl\nKafka, 1 worker\n(rerun)",
    "kafka-1-extract": "streamcrawl\nKafka, 1 worker\n--extract x5",
    "kafka-1-text": "streamcrawl\nKafka, 1 worker\n--text",
    "kafka-2": "streamcrawl\nKafka, 2 workers",
    "scrapy": "Scrapy",
    "crawlee": "Crawlee",
    "wget": "wget --warc-file",
}


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
        for name, e in entries(mem):
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
