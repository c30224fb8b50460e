"""Memory and index rebuild of the fetch service over synthetic tables: many origins, no crawl.

``build`` writes three RocksDB tables (``seen``, ``pending``, ``origins``, with the bounded
options of ``agents.frontier.store.rocks_options``) holding ``--origins`` origins, each with one URL
queued, and ``--seen`` seen URLs. ``measure`` (a fresh process per bound) opens them as the
worker's ``TableStore``, builds a ``FetchService`` with ``--max-origins`` (``0``: no bound),
assigns it every partition and reports: the time from the assignment (``_index``) to the first
dispatch, the CPU until the index is full (or holds every origin) and until the census has
walked the whole table (slice by slice, as the dispatch loop does), the origins held in memory
and the process's RSS at each step.

    .venv/bin/python -m bench.probes.origin_memory build --dir /tmp/om --origins 1000000 \\
        --seen 10000000
    .venv/bin/python -m bench.probes.origin_memory measure --dir /tmp/om --max-origins 100000
    .venv/bin/python -m bench.probes.origin_memory measure --dir /tmp/om --max-origins 0

It measures the fetch service and its scheduler with the tables, not a whole Faust worker
(whose own baseline the probe measures: ``bench/probes/kafka_probe.py``'s ``peak_rss_mb``).

Informs: the default bound on the origins the scheduler holds in memory
(``max_origins_in_memory``), by the RSS and the time to the first dispatch it gives
(docs/performance.md, "The scheduler's memory with 1 M origins").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from streamcrawl.agents.stream.fetch_service import FetchService

PARTITIONS = 12


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def open_tables(root: Path) -> dict[str, Any]:
    from rocksdict import Rdict

    from streamcrawl.agents.frontier.store import rocks_options

    return {
        name: Rdict(str(root / name), rocks_options()) for name in ("seen", "pending", "origins")
    }


def build(root: Path, origins: int, seen: int) -> dict[str, Any]:
    from rocksdict import WriteBatch

    from streamcrawl.agents.frontier.records import origin_key
    from streamcrawl.agents.frontier.store import SEEN
    from streamcrawl.schemas.records import OriginState, QueueEntry

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    tables = open_tables(root)
    encode = msgspec.msgpack.Encoder().encode
    started = time.process_time()
    chunk = 100_000
    for first in range(0, origins, chunk):
        batch = WriteBatch(raw_mode=True)
        for i in range(first, min(origins, first + chunk)):
            origin = f"http://o{i}.example"
            entry = QueueEntry(crawl_id="c", url=origin + "/", depth=0)
            state = OriginState(origin=origin, tail=1, inline=[entry], legacy_end=0)
            batch.put(origin_key(origin), encode(state))
        tables["origins"].write(batch)
    prefix = SEEN + b"c\x00"
    for first in range(0, seen, chunk):
        n = min(seen, first + chunk) - first
        digests = os.urandom(16 * n)
        batch = WriteBatch(raw_mode=True)
        for k in range(n):
            batch.put(prefix + digests[16 * k : 16 * k + 16], b"1")
        tables["seen"].write(batch)
    for table in tables.values():
        table.flush()
        table.close()
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    return {
        "origins": origins,
        "seen": seen,
        "cpu_s": round(time.process_time() - started, 1),
        "disk_mb": round(size / 2**20),
    }


def fetch_service(
    store: Any, rules: Any, *, partitions: int, max_origins: int | None
) -> FetchService:
    """A ``FetchService`` over ``store`` that publishes nothing (nothing is fetched here)."""
    from streamcrawl.agents.stream.fetch_service import FetchService
    from streamcrawl.agents.stream.metrics import Metrics

    policy = rules.policy

    class View:
        listeners: list[object] = []  # spec changes: none here
        policies = {policy.crawl_id: policy}

        def rules(self, crawl_id: str) -> Any:
            return rules

    async def nothing(*args: object, **kwargs: object) -> None:
        return None

    return FetchService(
        store=store,
        view=View(),  # type: ignore[arg-type]
        publish=nothing,
        mark=nothing,
        unstick=lambda p: None,
        metrics=Metrics(),
        partitions=partitions,
        concurrency=64,
        max_origins=max_origins,
    )


async def measure(root: Path, max_origins: int | None) -> dict[str, Any]:
    from streamcrawl.agents.policy.rules import CrawlRules
    from streamcrawl.agents.stream.fetch_service import REFILL_ROWS
    from streamcrawl.agents.stream.tables import TableStore
    from streamcrawl.schemas.records import CrawlPolicy

    out: dict[str, Any] = {"max_origins": max_origins, "rss_start_mb": round(rss_mb(), 1)}
    tables = open_tables(root)
    store = TableStore(tables["seen"], tables["pending"], tables["origins"])
    rules = CrawlRules.from_policy(
        CrawlPolicy(crawl_id="c", seeds=("http://o0.example/",), obey_robots=False, delay=0.0)
    )

    svc = fetch_service(store, rules, partitions=PARTITIONS, max_origins=max_origins)
    out["rss_open_mb"] = round(rss_mb(), 1)
    svc.owned = set(range(PARTITIONS))
    wall, cpu = time.perf_counter(), time.process_time()
    svc.index_partitions(set(range(PARTITIONS)))  # what caught_up does once the marker is back
    first = svc.scheduler.take(time.time() + 1.0, 1)
    out["first_dispatch_wall_s"] = round(time.perf_counter() - wall, 2)
    out["first_dispatch_cpu_s"] = round(time.process_time() - cpu, 2)
    out["dispatched"] = len(first)
    cpu = time.process_time()
    full_at = None
    while svc.refill.wanted():  # what the dispatch loop does, a slice per turn
        svc.refill.run(svc.since_of, REFILL_ROWS)
        if full_at is None and (svc.scheduler.full() or not svc.scheduler.overflow):
            full_at = time.process_time() - cpu
            out["in_memory"] = len(svc.scheduler)
            out["rss_index_full_mb"] = round(rss_mb(), 1)
    out["index_full_cpu_s"] = round(full_at if full_at is not None else 0.0, 2)
    out["census_cpu_s"] = round(time.process_time() - cpu, 2)
    out["queued_counted"] = sum(svc.queue_sizes().values())
    out["rss_end_mb"] = round(rss_mb(), 1)
    out["peak_rss_mb"] = round(peak_mb(), 1)
    for table in tables.values():
        table.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.origin_memory")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--dir", type=Path, required=True)
    b.add_argument("--origins", type=int, default=1_000_000)
    b.add_argument("--seen", type=int, default=10_000_000)
    m = sub.add_parser("measure")
    m.add_argument("--dir", type=Path, required=True)
    m.add_argument("--max-origins", type=int, default=100_000, help="0: no bound")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        result = build(args.dir, args.origins, args.seen)
    else:
        result = asyncio.run(measure(args.dir, args.max_origins or None))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
