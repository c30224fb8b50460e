"""The Cassandra sink's CPU per page against the bounds of its batches.

Writes ``--pages`` pages of the many-origins shape (2,000 origins, 28 links a page, ~1.75
terminal states a page: its own ``fetched`` and a robots.txt-denied URL of another origin for
three pages in four) through ``CassandraSink.write`` in writes of ``--per-write`` pages, as the
worker's sink does, once per bound given (``PARTITIONS:BYTES``, interleaved over ``--rounds``),
and prints per bound the medians of this process's CPU per page (the event loop's and the
driver's thread), Cassandra's CPU per page (its process, by psutil, when
``--cassandra-pid`` names it) and the requests per page. The bounds are forced, not read from
the cluster: a bound over the cluster's warnings makes every node log each batch.

    source .services/env      # the Cassandra of scripts/services.sh
    .venv/bin/python -m bench.probes.sink_batches \\
        --cassandra-pid "$(cat .services/cassandra/pid)" \\
        --bounds 10:4096,10:32768,100:32768 --rounds 3

Informs: how large the Cassandra sink's batches may be, and what to set in the nodes' warnings
for a crawl (docs/performance.md, "The sink's requests"; docs/operations.md, "Cassandra's batch
warnings").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from pathlib import Path

import psutil

from streamcrawl.agents.sinks.cassandra import pack
from streamcrawl.agents.sinks.cassandra.config import CassandraConfig
from streamcrawl.agents.sinks.cassandra.driver import create_schema
from streamcrawl.agents.sinks.cassandra.sink import CassandraSink
from streamcrawl.schemas.records import Outlink, Page, TerminalState, UrlStatus

ORIGINS = 2000
LINKS = 28
DENIED = 0.75  # robots.txt-denied URLs of other origins per page (the many-origins row's)


def records(n: int, seed: int = 0) -> tuple[list[Page], list[list[UrlStatus]]]:
    """``n`` pages of the many-origins shape and, page by page, the terminal states each
    brought (its own, and a denied URL of another origin for three pages in four)."""
    rnd = random.Random(seed)
    now = time.time()
    pages: list[Page] = []
    states: list[list[UrlStatus]] = []
    for i in range(n):
        origin = f"http://127.0.0.1:{25000 + rnd.randrange(ORIGINS)}"
        url = f"{origin}/p/{i}.html"
        links = tuple(
            Outlink(f"http://127.0.0.1:{25000 + rnd.randrange(ORIGINS)}/p/{j}.html", f"link {j}")
            for j in range(LINKS)
        )
        pages.append(
            Page(
                crawl_id="sink-batches", url=url, final_url=url, origin=origin, status=200,
                headers={"content-type": "text/html", "server": "nginx", "etag": '"5f-1a"'},
                content_type="text/html", charset="utf-8", title=f"Page {i}", depth=1,
                fetched_at=now + i / 1000, elapsed_ms=2.0, body_sha256="a" * 64,
                body_bytes=3000, outlinks=LINKS, links=links, links_total=LINKS,
            )
        )  # fmt: skip
        ended = [
            UrlStatus(crawl_id="sink-batches", url=url, origin=origin, status=200, depth=1,
                      state=TerminalState.FETCHED, updated_at=now)
        ]  # fmt: skip
        states.append(ended)
        if rnd.random() < DENIED:
            other = f"http://127.0.0.1:{25000 + rnd.randrange(ORIGINS)}"
            ended.append(
                UrlStatus(crawl_id="sink-batches", url=f"{other}/private/{i}.html", depth=2,
                          origin=other, state=TerminalState.ROBOTS_DENIED, updated_at=now)
            )  # fmt: skip
    return pages, states


def _cpu(process: psutil.Process | None) -> float:
    """CPU seconds of ``process`` so far (0.0 without one)."""
    return 0.0 if process is None else sum(process.cpu_times()[:2])


async def one_run(
    sink: CassandraSink, bounds: pack.Bounds, n: int, per_write: int, pid: int | None
) -> dict[str, float]:
    pages, states = records(n, seed=int(time.time()))
    sink.bounds = bounds
    requests = 0
    execute = sink._execute

    async def counting(calls: list) -> list:
        nonlocal requests
        requests += len(calls)
        return await execute(calls)

    sink._execute = counting  # type: ignore[method-assign]
    writes = [
        (pages[i : i + per_write], [s for ended in states[i : i + per_write] for s in ended])
        for i in range(0, n, per_write)
    ]
    node = psutil.Process(pid) if pid is not None else None
    cpu, other, wall = time.process_time(), _cpu(node), time.monotonic()
    for batch_pages, batch_states in writes:
        await sink.write(batch_pages, batch_states)
    cpu, other = time.process_time() - cpu, _cpu(node) - other
    sink._execute = execute  # type: ignore[method-assign]
    return {
        "sink_ms_per_page": 1000 * cpu / n,
        "cassandra_ms_per_page": 1000 * other / n,
        "requests_per_page": requests / n,
        "wall_s": time.monotonic() - wall,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bounds", default="10:4096,100:32768", help="PARTITIONS:BYTES,...")
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--per-write", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cassandra-pid", type=int, help="Cassandra's PID, to count its CPU too")
    ap.add_argument("--out", type=Path, help="write the runs as JSON here")
    args = ap.parse_args()
    host, _, port = os.environ["STREAMCRAWL_CASSANDRA_HOSTS"].split(",")[0].partition(":")
    config = CassandraConfig(
        hosts=(host,), port=int(port or 9042), where=host, keyspace="bench_sink_batches",
        write_consistency="ONE", read_consistency="ONE",
    )  # fmt: skip
    await asyncio.to_thread(create_schema, config)
    sink = CassandraSink(config)
    await sink.start()
    bounds = [pack.Bounds(*map(int, b.split(":"))) for b in args.bounds.split(",")]
    runs: dict[str, list[dict[str, float]]] = {f"{b.partitions}:{b.nbytes}": [] for b in bounds}
    try:
        await one_run(sink, bounds[0], args.per_write * 5, args.per_write, None)  # warm up
        for _ in range(args.rounds):
            for b in bounds:
                run = await one_run(sink, b, args.pages, args.per_write, args.cassandra_pid)
                runs[f"{b.partitions}:{b.nbytes}"].append(run)
                print(f"{b.partitions:>4} partitions {b.nbytes:>6} bytes: {json.dumps(run)}")
    finally:
        await sink.stop()
    print("medians (partitions:bytes -> sink ms/page, Cassandra ms/page, requests/page)")
    for key, found in runs.items():
        med = {k: statistics.median(r[k] for r in found) for k in found[0]}
        print(
            f"  {key}: {med['sink_ms_per_page']:.3f}, {med['cassandra_ms_per_page']:.3f}, "
            f"{med['requests_per_page']:.3f}"
        )
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "runs": runs}))


if __name__ == "__main__":
    asyncio.run(main())
