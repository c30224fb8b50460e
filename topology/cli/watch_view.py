"""The terminal view of ``status --watch``: a rich Live of the frames of ``topology/cli/watch.py``.

Tables, top to bottom: the crawls (a column each: rates, queue depth, the URLs per terminal
state that has any, revisits) and a red line per error of a crawl's own (a plugin a worker
lacks), the frontier partitions (owner, input lags, queue depth), the slowest origins. A failed
refresh keeps the last reading on screen under a red line that says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text


def live(frames: Iterable[dict[str, Any]], interval: float, out: TextIO) -> None:
    """Show each frame in place, until ``frames`` ends or raises (KeyboardInterrupt)."""
    last: dict[str, Any] | None = None
    with Live(console=Console(file=out), auto_refresh=False) as screen:
        for f in frames:
            failed = f if "error" in f else None
            last = last if failed is not None else f
            screen.update(view(last, failed, interval), refresh=True)


def view(f: dict[str, Any] | None, failed: dict[str, Any] | None, interval: float) -> Group:
    """The screen for the reading ``f`` (None: none yet) and a failed refresh after it."""
    parts: list[RenderableType] = [_header(f, interval)]
    if failed is not None:
        shown = f" (showing {_clock(f['at'])})" if f is not None else ""
        parts.append(
            Text(
                f"refresh failed at {_clock(failed['at'])}{shown}, retrying every "
                f"{interval:g} s: {failed['error']}",
                style="bold red",
            )
        )
    if f is not None:
        parts += [_crawls(f), *_errors(f), _partitions(f), _slowest(f)]
    return Group(*parts)


def _errors(f: dict[str, Any]) -> list[Text]:
    """A red line per error of a crawl's own (a plugin a worker lacks)."""
    crawls = f.get("crawls")
    if crawls is None:
        crawls = {f["crawl_id"]: f}
    return [
        Text(f"crawl {cid}: {error} ({n} failed)", style="bold red")
        for cid, crawl in crawls.items()
        for error, n in crawl.get("errors", {}).items()
    ]


def _header(f: dict[str, Any] | None, interval: float) -> Text:
    text = Text("streamcrawl status --watch", style="bold")
    if f is not None:
        lag = f["sink_lag"]
        text.append(f"  {_clock(f['at'])}  every {interval:g} s  sink lag ")
        text.append("not started" if lag is None else f"{lag} messages")
    text.append("  (Ctrl-C quits)", style="dim")
    return text


def _crawls(f: dict[str, Any]) -> RenderableType:
    crawls = f.get("crawls")
    if crawls is None:
        crawls = {f["crawl_id"]: f}
    if not crawls:
        return Text("no crawls recorded yet")
    table = Table(title="crawls", title_justify="left")
    table.add_column("")
    for cid in crawls:
        table.add_column(cid, justify="right")
    table.add_row("pages/s now", *(_rate(c["pages_per_s_now"]) for c in crawls.values()))
    table.add_row("pages/s overall", *(_rate(c["pages_per_s"]) for c in crawls.values()))
    table.add_row("queue depth", *(str(c["queue_depth"]) for c in crawls.values()))
    first = next(iter(crawls.values()))
    states = [s for s in first["states"] if any(c["states"][s] for c in crawls.values())]
    for i, state in enumerate(states):
        cells = (str(c["states"][state]) for c in crawls.values())
        table.add_row(state, *cells, end_section=i == len(states) - 1)
    table.add_row("total", *(str(sum(c["states"].values())) for c in crawls.values()))
    if any("revisits" in c for c in crawls.values()):
        _revisit_rows(table, list(crawls.values()))
    return table


def _revisit_rows(table: Table, crawls: list[dict[str, Any]]) -> None:
    table.rows[-1].end_section = True
    rows = (
        ("revisits waiting", "waiting"),
        ("  due now", "due_now"),
        ("  due next hour", "due_next_hour"),
        ("  oldest due since", "oldest_due_at"),
    )
    for label, key in rows:
        cells = []
        for crawl in crawls:
            value = crawl.get("revisits", {}).get(key)
            if key == "oldest_due_at":
                cells.append("-" if value is None else _clock(value))
            else:
                cells.append("-" if value is None else str(value))
        table.add_row(label, *cells)


def _partitions(f: dict[str, Any]) -> RenderableType:
    table = Table(title="frontier partitions", title_justify="left")
    for name in ("partition", "owner", "frontier lag", "outcomes lag", "queue depth"):
        table.add_column(name, justify="left" if name == "owner" else "right")
    for p in f["partitions"]:
        table.add_row(
            str(p["partition"]),
            p["owner"] or "-",
            str(p["frontier_lag"]),
            str(p["outcomes_lag"]),
            str(p["queue_depth"]),
        )
    if f["workers_error"] is not None:
        table.caption = f"workers' group unreadable: {f['workers_error']}"
        table.caption_style = "red"
    return table


def _slowest(f: dict[str, Any]) -> RenderableType:
    if not f["slowest"]:
        return Text("slowest origins: none measured yet")
    table = Table(title="slowest origins (smoothed fetch latency)", title_justify="left")
    for name in ("origin", "latency", "fetches", "partition", "crawl"):
        table.add_column(name, justify="left" if name in ("origin", "crawl") else "right")
    for s in f["slowest"]:
        table.add_row(
            s["origin"],
            f"{s['latency_s']:.3f} s",
            str(s["fetches"]),
            str(s["partition"]),
            s["crawl_id"],
        )
    return table


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.2f}"


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))
