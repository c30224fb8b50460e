"""Throughput/CPU probe of ONE Kafka worker (``streamcrawl worker``) on the generated test site.

Runs the Kafka runner's steps (``bench.kafka_runner``: start, seed, drain, measure) with one
worker on ``ORIGINS x PAGES`` pages served from a child process
(``tests.integration.site_process``) instead of the benchmark's nginx site, seeds every origin's
``/`` with ``--delay D --per-origin-concurrency N``, and prints the runner's figures plus what
only the probe measures: the worker's idle CPU before the seed, its CPU seconds per page, and
Kafka messages per page by topic (sent: ``streamcrawl_kafka_messages_sent`` from the worker's
``/metrics``; stored: the end offsets of every topic of the run's prefix).

    source .services/env                       # or the shared services' env file
    .venv/bin/python -m bench.kafka_probe --origins 3 --pages 100
    .venv/bin/python -m bench.kafka_probe --origins 8 --pages 500 --profile worker.raw.txt

``--profile OUT`` runs the worker under ``py-spy record`` (raw collapsed stacks; py-spy must
be installed next to this python). The worker log and state are kept in ``--tmp``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench.kafka_runner import (
    Topology,
    drain,
    http_get,
    idle_rates,
    measure,
    seed,
    start_topology,
)


def sent(topo: Topology) -> dict[str, float]:
    """Messages the worker has sent so far, by topic (from its ``/metrics``)."""
    from prometheus_client.parser import text_string_to_metric_families

    _, text = http_get(topo.ports[0], "/metrics")
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "streamcrawl_kafka_messages_sent_total":
                out[s.labels["topic"]] = s.value
    return out


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


def topic_sizes(topo: Topology) -> dict[str, int]:
    """Messages in every topic of the run's prefix (changelogs included), by end offsets."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from streamcrawl.topology.settings import load_settings
    from streamcrawl.topology.worker.clients import aiokafka_connection

    prefix = topo.env["STREAMCRAWL_TOPIC_PREFIX"]

    async def sizes() -> dict[str, int]:
        # the security settings (SASL, TLS) come from the environment, as the workers' do
        settings = load_settings(kafka_bootstrap=topo.env["STREAMCRAWL_KAFKA_BOOTSTRAP"])
        consumer = AIOKafkaConsumer(**aiokafka_connection(settings))
        await consumer.start()
        try:
            meta = await consumer._client.fetch_all_metadata()
            names = [t for t in meta.topics() if t.startswith(prefix)]
            tps = [TopicPartition(t, p) for t in names for p in meta.partitions_for_topic(t) or ()]
            out: dict[str, int] = {}
            for tp, end in (await consumer.end_offsets(tps)).items():
                short = tp.topic[len(prefix) :].lstrip(".-")
                out[short] = out.get(short, 0) + end
            return out
        finally:
            await consumer.stop()

    return asyncio.run(sizes())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.kafka_probe", description=(__doc__ or "").splitlines()[0]
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
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    from tests.integration.site_process import serve_site

    args = parse_args(argv)
    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="kafka-probe-"))
    tmp.mkdir(parents=True, exist_ok=True)
    expected = args.origins * args.pages
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
        idle_rate = idle_rates(topo, args.idle, settle=0.0)["worker"] or 0.0
        sent0 = sent(topo)
        seeded = seed(
            topo,
            [s.url("/") for s in servers],
            delay=args.delay,
            max_pages=2 * expected,
            per_origin_concurrency=args.per_origin_concurrency,
        )
        drained = drain(topo, seeded, expected_pages=expected, max_pages=None, timeout=args.timeout)
        sent1 = sent(topo)
        turns = turnaround(topo)
        in_topics = topic_sizes(topo)
    run = measure(topo, seeded, drained, rss_samples=False)
    done = sum(drained.states.values())
    wall, cpu_s = run["wall_s"], run["cpu_s"]
    per_topic = {k: round((v - sent0.get(k, 0.0)) / max(done, 1), 3) for k, v in sent1.items()}
    result = {
        "site": f"{args.origins}x{args.pages}",
        "pages": done,
        "expected": expected,
        "states": drained.states,
        "stalled": drained.stalled,
        "timed_out": drained.timed_out,
        "wall_s": round(wall, 2),
        "pages_per_s": round(done / wall, 1) if wall else None,
        "cpu_s": round(cpu_s, 2),
        "cpu_ms_per_page": round(1000 * cpu_s / max(done, 1), 2),
        "peak_rss_mb": round(run["peak_rss_mb"], 1),
        # what an idle worker burns (timers, commits, polls) is spread over the pages: the
        # same worker on a busier box is slower and shows more ms/page, not more work per page
        "idle_cpu_ms_per_s": round(1000 * idle_rate, 1),
        "cpu_ms_per_page_minus_idle": round(1000 * (cpu_s - idle_rate * wall) / max(done, 1), 2),
        "load_avg_1m": round(os.getloadavg()[0], 2),  # other processes skew the figures
        "turnaround": turns,  # a request's end to its origin's next dispatch
        "sent_per_page": per_topic,
        "in_topics_per_page": {k: round(v / max(done, 1), 3) for k, v in sorted(in_topics.items())},
        "service_cpu_s": run["service_cpu_s"],
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
