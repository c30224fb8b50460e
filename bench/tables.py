"""How the bench's reports write their Markdown: a table, a figure's cell, a skipped row's
reason, and the crawlers' rows in one order (``ORDER``). Used by ``bench.report`` and the modules
that write a section of docs/benchmarks.md."""

from __future__ import annotations

ORDER = [
    "embedded",
    "embedded-warc",
    "embedded-requests",
    "embedded-extract",
    "embedded-text",
    "embedded-proxy",
    "kafka-1",
    "kafka-1-rerun",
    "kafka-1-extract",
    "kafka-1-text",
    "kafka-2",
    "kafka-2-rerun",
    "scrapy",
    "crawlee",
    "wget",
]


def cell(v, digits: int = 1) -> str:
    """A figure as a table shows it: ``-`` for none, a float to ``digits`` places, an int with
    thousands separators."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def reason(entry: dict) -> str:
    """Why a crawler did not run, on one line (a traceback would break the table)."""
    return " ".join(str(entry.get("reason", "")).split()).replace("|", "\\|")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(r) + " |" for r in rows],
    ]


def entries(section: dict) -> list[tuple[str, dict]]:
    """A section's crawler entries, in ``ORDER``."""
    return [(n, section[n]) for n in ORDER if n in section]
