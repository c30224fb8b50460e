"""``status --watch``: the counts, rates, queue, lags, owners and slowest origins, refreshed.

Each refresh is one ``StatusReader.read`` (``topology/admin/status.py``): the last ``counts``
message of each partition, watermarks and committed offsets, the workers' group description;
no Cassandra. ``frame`` turns two consecutive readings into one JSON-ready dict, which the three
outputs show: a rich Live view on a terminal (``topology/cli/watch_view.py``), else one line
per refresh, or one JSON object per line with ``--json``.

Ctrl-C or SIGTERM ends the watch with exit 0 (``until_stopped``). A refresh that fails once
the first one succeeded is shown (the view keeps the last reading) and retried at the next
refresh; a first refresh that fails raises, as ``status`` does.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from streamcrawl.agents.errors import CrawlError
from streamcrawl.topology.admin import status as kafka_status
from streamcrawl.topology.admin.status import Snapshot

# A request of a refresh waits at most this long: a broker gone mid-watch shows as an error
# within it, and Ctrl-C (handled between two requests) is never held up longer.
REQUEST_TIMEOUT_S = 5.0
INTERVAL_S = 2.0  # between two refreshes, unless --interval

Read = Callable[[], Snapshot]


def frame(snapshot: Snapshot, previous: Snapshot | None, crawl_id: str | None) -> dict[str, Any]:
    """One refresh as ``status --json`` reports it (``kafka_status.report``), with ``at`` (epoch
    s) first, and per crawl (and in the totals) ``queue_depth`` and ``pages_per_s_now`` (pages
    fetched per second since ``previous``, revisits included; null on the first refresh); then
    ``partitions`` (``PartitionView`` fields plus that partition's ``queue_depth``),
    ``workers_error`` and ``slowest`` (``kafka_status.slowest_origins``)."""
    records = snapshot.records
    report = kafka_status.report(
        snapshot.stats,
        crawl_id,
        revisited=snapshot.revisits,
        errors=snapshot.errors,
        source="counts",
        sink_lag=snapshot.sink_lag,
    )
    depths, by_partition = kafka_status.queue_depths(records, crawl_id)
    crawls = report.get("crawls")
    for cid, crawl in (crawls or {crawl_id: report}).items():
        crawl["queue_depth"] = depths.get(cid or "", 0)
        crawl["pages_per_s_now"] = _rate(snapshot, previous, [cid] if cid else [])
    if crawls is not None:
        report["queue_depth"] = sum(depths.values())
        report["pages_per_s_now"] = _rate(snapshot, previous, list(crawls))
    report["partitions"] = [
        {**vars(p), "queue_depth": by_partition.get(p.partition, 0)} for p in snapshot.partitions
    ]
    report["workers_error"] = snapshot.workers_error
    report["slowest"] = kafka_status.slowest_origins(records, crawl_id)
    return {"at": round(snapshot.at, 3), **report}


def _rate(now: Snapshot, before: Snapshot | None, crawl_ids: list[str]) -> float | None:
    """Pages fetched per second by ``crawl_ids`` between two readings, first fetches and
    revisits (None: one reading)."""
    if before is None or now.at <= before.at:
        return None

    def fetched(s: Snapshot) -> int:
        first = sum(s.stats[c].states.get("fetched", 0) for c in crawl_ids if c in s.stats)
        again: int = sum(s.revisits[c]["fetched"] for c in crawl_ids if c in s.revisits)
        return first + again

    return round(max(0, fetched(now) - fetched(before)) / (now.at - before.at), 2)


def line(f: dict[str, Any]) -> str:
    """The one line of a refresh when stdout is not a terminal, e.g.
    ``2025-06-01 12:00:00 crawl e2e: fetched 300, 12.50 pages/s, queue 40, sink lag 0``."""
    stamp = _stamp(f["at"])
    if "error" in f:
        return f"{stamp} error: {f['error']}"
    crawls = f.get("crawls")
    ids = list(crawls) if crawls is not None else [f["crawl_id"]]
    if not ids:
        return f"{stamp} no crawls recorded yet, sink lag {_lag(f['sink_lag'])}"
    rate = f["pages_per_s_now"]
    return (
        f"{stamp} crawl {','.join(ids)}: fetched {f['states']['fetched']}, "
        f"{'-' if rate is None else f'{rate:.2f}'} pages/s, queue {f['queue_depth']}, "
        f"sink lag {_lag(f['sink_lag'])}"
    )


def error_frame(at: float, exc: BaseException) -> dict[str, Any]:
    """The frame of a failed refresh: ``{"at", "error"}``."""
    return {"at": round(at, 3), "error": str(exc)}


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _lag(lag: int | None) -> str:
    return "not started" if lag is None else str(lag)


def refreshes(read: Read, crawl_id: str | None, interval: float) -> Iterator[dict[str, Any]]:
    """A frame every ``interval`` seconds, forever; a failed refresh yields ``error_frame``,
    except the first, which raises."""
    previous: Snapshot | None = None
    while True:
        started = time.monotonic()
        try:
            snapshot = read()
        except CrawlError as exc:
            if previous is None:
                raise
            yield error_frame(time.time(), exc)
        else:
            yield frame(snapshot, previous, crawl_id)
            previous = snapshot
        time.sleep(max(0.0, interval - (time.monotonic() - started)))


def run(
    read: Read, crawl_id: str | None, interval: float, as_json: bool, out: TextIO | None = None
) -> None:
    """Show ``refreshes`` until interrupted (``until_stopped``): rich Live on a terminal, else
    one line (JSON with ``as_json``) per refresh, flushed. Returns when stdout is closed."""
    out = out if out is not None else sys.stdout
    frames = refreshes(read, crawl_id, interval)
    if not as_json and out.isatty():
        from streamcrawl.topology.cli.watch_view import live

        live(frames, interval, out)
        return
    show = json.dumps if as_json else line
    try:
        for f in frames:
            out.write(show(f) + "\n")
            out.flush()
    except BrokenPipeError:  # `status --watch | head`: not an error
        sys.stderr.close()


@contextmanager
def until_stopped() -> Iterator[None]:
    """Ends the block quietly on Ctrl-C or SIGTERM (made to raise KeyboardInterrupt too)."""
    before = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, before)
