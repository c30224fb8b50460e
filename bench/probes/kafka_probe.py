"""Throughput/CPU probe of ONE Kafka worker (``streamcrawl worker``) on the generated test site.

Runs the Kafka runner's steps (start: ``bench.kafka_topology``; seed, drain, measure:
``bench.kafka_runner``) with one worker on ``ORIGINS x PAGES`` pages served from a child process
(``tests.integration.site_process``) instead of the benchmark's nginx site, seeds every origin's
``/`` with ``--delay D --per-origin-concurrency N``, and prints the runner's figures plus what
only the probe measures: the worker's idle CPU before the seed, its CPU seconds per page, and
Kafka messages per page by topic (sent: ``streamcrawl_kafka_messages_sent`` from the worker's
``/metrics``; stored: the end offsets of every topic of the run's prefix).

    source .services/env                       # or the shared services' env file
    .venv/bin/python -m bench.probes.kafka_probe --origins 3 --pages 100
    .venv/bin/python -m bench.probes.kafka_probe --origins 8 --pages 500 --profile worker.raw.txt

``--profile OUT`` runs the worker under ``py-spy record`` (raw collapsed stacks; py-spy must
be installed next to this python). The worker log and state are kept in ``--tmp``.

``--revisits S`` seeds a continuous crawl instead (``--recrawl-mode fixed``, every ``S`` s, no
jitter; the site answers a revisit 304, ``tests/integration/site.py``) and reads it at three
moments: the seed; a second after the site's log holds every page's first request (the *first
cycle* ends); once the site has seen ``--revisit-cycles`` x the site's pages of requests since
(the *revisit window*). Each quantity (CPU of the worker, and of the broker and Cassandra less
their idle rate; the worker's messages by topic, frontier batches, sink writes; messages stored
per topic, changelogs included) is split per request: a revisit costs the window's total over
its requests; a first fetch, the first cycle's total less the revisits it also held (pages due
again before every page was fetched once) at that cost, over the pages. ``ratio`` is revisit /
first fetch of the worker's CPU, as ``bench/probes/freshness.py`` reports it for the embedded crawl;
``answered_304`` is the share of the window's ``pages`` records that are 304s found unchanged.
One origin's rate is 1/``--delay`` in both phases when the interval is shorter than an origin's
cycle (pages x delay): revisits are then always due.

    .venv/bin/python -m bench.probes.kafka_probe --origins 4 --pages 100 --delay 0.05 --revisits 3

Informs: the worker's tuning, one variant at a time, by its CPU and Kafka messages per page
(docs/performance.md, "Where a worker's CPU goes", "Kafka messages per page", "Changelog writes
per page", "Latency at delay 0: the link flush and the frontier's hurry", "Producer settings and
compression", "The sink's requests"); with ``--revisits``, what a 304 revisit costs a worker
(docs/performance.md, "Continuous crawling: freshness and the cost of a revisit").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from bench.kafka_runner import Drained, Seeded, drain, measure, seed
from bench.kafka_topology import Topology, http_get, idle_rates, start_topology

if TYPE_CHECKING:
    from tests.integration.site_process import RemoteServer

T = TypeVar("T")


Key = tuple[str, tuple[tuple[str, str], ...]]  # a /metrics sample: its name and sorted labels


def metrics(topo: Topology) -> dict[Key, float]:
    """Every sample of the worker's ``/metrics`` but histogram buckets, by name and labels."""
    from prometheus_client.parser import text_string_to_metric_families

    _, text = http_get(topo.ports[0], "/metrics")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith(("_bucket", "_created"))
    }


def by_label(values: dict[Key, float], name: str, label: str) -> dict[str, float]:
    """The samples of ``name`` by the value of their ``label``."""
    return {dict(labels)[label]: v for (n, labels), v in values.items() if n == name}


def sent(topo: Topology) -> dict[str, float]:
    """Messages the worker has sent so far, by topic (from its ``/metrics``)."""
    return by_label(metrics(topo), "streamcrawl_kafka_messages_sent_total", "topic")


def turnaround(topo: Topology) -> dict[str, float | None]:
    """The worker's ``streamcrawl_scheduler_turnaround_seconds`` histogram: how many dispatches
    followed a request's end, the share that started within 20 ms of it, and the bucket bound
    the median falls under (None: the worker has no such metric, or nothing was counted)."""
    from prometheus_client.parser import text_string_to_metric_families

    _, text = http_get(topo.ports[0], "/metrics")
    buckets: list[tuple[float, float]] = []
    for family in text_string_to_metric_families(text):
        if family.name == "streamcrawl_scheduler_turnaround_seconds":
            buckets = [
                (float(s.labels["le"]), s.value)
                for s in family.samples
                if s.name.endswith("_bucket")
            ]
    buckets.sort()
    count = buckets[-1][1] if buckets else 0.0
    if not count:
        return {"count": count, "within_20ms": None, "median_le_s": None}
    within = next((n for le, n in buckets if le >= 0.02), count)
    median = next(le for le, n in buckets if n >= count / 2)
    return {"count": count, "within_20ms": round(within / count, 3), "median_le_s": median}


def _with_consumer(topo: Topology, work: Callable[[Any, Any], Awaitable[T]]) -> T:
    """``await work(consumer, metadata)``: an aiokafka consumer of the run's broker (no group)
    and the broker's metadata of every topic."""
    from aiokafka import AIOKafkaConsumer

    from streamcrawl.topology.settings import load_settings
    from streamcrawl.topology.worker.clients import aiokafka_connection

    async def run() -> T:
        # the security settings (SASL, TLS) come from the environment, as the workers' do
        settings = load_settings(kafka_bootstrap=topo.env["STREAMCRAWL_KAFKA_BOOTSTRAP"])
        consumer = AIOKafkaConsumer(
            **aiokafka_connection(settings),
            enable_auto_commit=False,
            max_partition_fetch_bytes=16 * 2**20,
        )
        await consumer.start()
        try:
            return await work(consumer, await consumer._client.fetch_all_metadata())
        finally:
            await consumer.stop()

    return asyncio.run(run())


def topic_sizes(topo: Topology) -> dict[str, int]:
    """Messages in every topic of the run's prefix (changelogs included), by end offsets."""
    from aiokafka import TopicPartition

    prefix = topo.env["STREAMCRAWL_TOPIC_PREFIX"]

    async def sizes(consumer: Any, meta: Any) -> dict[str, int]:
        names = [t for t in meta.topics() if t.startswith(prefix)]
        tps = [TopicPartition(t, p) for t in names for p in meta.partitions_for_topic(t) or ()]
        out: dict[str, int] = {}
        for tp, end in (await consumer.end_offsets(tps)).items():
            short = tp.topic[len(prefix) :].lstrip(".-")
            out[short] = out.get(short, 0) + end
        return out

    return _with_consumer(topo, sizes)


class Fetch(msgspec.Struct):
    """What the probe reads of a ``pages`` record (``streamcrawl.schemas.records.Page``)."""

    fetched_at: float  # the request's start, epoch seconds
    status: int
    change: str | None = None  # "new", "changed", "unchanged" (a 304 or the same body), "gone"


def page_fetches(topo: Topology, timeout: float = 60.0) -> list[Fetch]:
    """Every record of the run's ``pages`` topic up to its end offsets when called."""
    from aiokafka import TopicPartition

    topic = f"{topo.env['STREAMCRAWL_TOPIC_PREFIX']}.pages"
    decode = msgspec.json.Decoder(Fetch).decode

    async def read(consumer: Any, meta: Any) -> list[Fetch]:
        tps = [TopicPartition(topic, p) for p in meta.partitions_for_topic(topic) or ()]
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Fetch] = []
        left, deadline = set(tps), time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            for tp, batch in (await consumer.getmany(*left, timeout_ms=500)).items():
                out += [decode(m.value) for m in batch if m.offset < ends[tp]]
            # positions, not offsets: transaction markers take offsets too
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
        return out

    return _with_consumer(topo, read)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.probes.kafka_probe", description=(__doc__ or "").splitlines()[0]
    )
    ap.add_argument("--origins", type=int, default=3)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=64, help="the worker's concurrency")
    ap.add_argument("--per-origin-concurrency", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of idle CPU measured first")
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--profile", metavar="OUT", type=Path, help="py-spy record the worker")
    ap.add_argument("--tmp", help="directory for the worker's state and log (default: temp)")
    ap.add_argument("--json", action="store_true", help="print one JSON line only")
    ap.add_argument(
        "--revisits",
        type=float,
        metavar="SECONDS",
        help="a continuous crawl revisiting every page every SECONDS (fixed, no jitter): CPU "
        "per first fetch against per 304 revisit",
    )
    ap.add_argument(
        "--revisit-cycles",
        type=float,
        default=2.0,
        help="with --revisits: the revisit window holds this many times the site's pages",
    )
    return ap.parse_args(argv)


@dataclass
class Crawled:
    """A crawl to its end (``drain``) and what the probe read around it."""

    seeded: Seeded
    drained: Drained
    sent0: dict[str, float]
    sent1: dict[str, float]
    turns: dict[str, float | None]
    in_topics: dict[str, int]


def crawl(args: argparse.Namespace, servers: list[RemoteServer], topo: Topology) -> Crawled:
    """Seed every origin's root and drain the crawl."""
    expected = args.origins * args.pages
    sent0 = sent(topo)
    seeded = seed(
        topo,
        [s.url("/") for s in servers],
        delay=args.delay,
        max_pages=2 * expected,
        per_origin_concurrency=args.per_origin_concurrency,
    )
    drained = drain(topo, seeded, expected_pages=expected, max_pages=None, timeout=args.timeout)
    return Crawled(seeded, drained, sent0, sent(topo), turnaround(topo), topic_sizes(topo))


def crawl_report(topo: Topology, c: Crawled, idle_rate: float) -> dict[str, Any]:
    """The crawl's figures, once ``topo`` has stopped."""
    run = measure(topo, c.seeded, c.drained, rss_samples=False)
    done = sum(c.drained.states.values())
    wall, cpu_s = run["wall_s"], run["cpu_s"]
    per_topic = {k: round((v - c.sent0.get(k, 0.0)) / max(done, 1), 3) for k, v in c.sent1.items()}
    return {
        "pages": done,
        "states": c.drained.states,
        "stalled": c.drained.stalled,
        "timed_out": c.drained.timed_out,
        "wall_s": round(wall, 2),
        "pages_per_s": round(done / wall, 1) if wall else None,
        "cpu_s": round(cpu_s, 2),
        "cpu_ms_per_page": round(1000 * cpu_s / max(done, 1), 2),
        "peak_rss_mb": round(run["peak_rss_mb"], 1),
        # what an idle worker burns (timers, commits, polls) is spread over the pages: the
        # same worker on a busier box is slower and shows more ms/page, not more work per page
        "idle_cpu_ms_per_s": round(1000 * idle_rate, 1),
        "cpu_ms_per_page_minus_idle": round(1000 * (cpu_s - idle_rate * wall) / max(done, 1), 2),
        "turnaround": c.turns,  # a request's end to its origin's next dispatch
        "sent_per_page": per_topic,
        "in_topics_per_page": {
            k: round(v / max(done, 1), 3) for k, v in sorted(c.in_topics.items())
        },
        "service_cpu_s": run["service_cpu_s"],
    }


def main(argv: list[str] | None = None) -> None:
    from tests.integration.site_process import serve_site

    args = parse_args(argv)
    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="kafka-probe-"))
    tmp.mkdir(parents=True, exist_ok=True)
    with (
        serve_site(args.origins, args.pages) as servers,
        start_topology(
            tmp,
            1,
            args.partitions,
            profile=args.profile,
            concurrency=args.concurrency,
            log_level=args.log_level,
        ) as topo,
    ):
        idle = idle_rates(topo, args.idle, settle=0.0)
        if args.revisits:
            from bench.probes.revisit_probe import revisit_probe

            result = revisit_probe(args, servers, topo, idle)
        else:
            crawled = crawl(args, servers, topo)
    if not args.revisits:
        result = crawl_report(topo, crawled, idle["worker"] or 0.0)
    result = {
        "site": f"{args.origins}x{args.pages}",
        "expected": args.origins * args.pages,
        **result,
        "idle_ms_per_s": {k: None if v is None else round(1e3 * v, 1) for k, v in idle.items()},
        "load_avg_1m": round(os.getloadavg()[0], 2),  # other processes skew the figures
        "worker_exit_codes": topo.exit_codes,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=1))
        print(f"worker log: {topo.logs / 'worker-1.log'}", file=sys.stderr)
    if not args.tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
