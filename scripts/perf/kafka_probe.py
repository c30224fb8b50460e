"""Throughput/CPU probe of ONE Kafka worker (``streamcrawl worker``) on the generated test site.

Creates topics + keyspace with a unique prefix, starts one worker subprocess, serves
``ORIGINS x PAGES`` pages from a child process (``tests.integration.site_process``), seeds every
origin's ``/`` with ``--delay 0 --per-origin-concurrency N``, waits until Cassandra holds a
terminal state for every page, then prints pages/s, the worker's CPU seconds per page (psutil,
user+sys, measured from the seed to the last terminal state) and Kafka messages sent per page
by topic (``streamcrawl_kafka_messages_sent`` from the worker's ``/metrics``).

    source .services/env
    /work/venv/bin/python -m scripts.perf.kafka_probe --origins 3 --pages 100
    /work/venv/bin/python -m scripts.perf.kafka_probe --origins 4 --pages 500 --py-spy /tmp/w.svg

``--py-spy OUT`` records the worker with py-spy during the crawl (``--py-spy-args`` adds flags,
e.g. ``--idle`` for wall time). The worker log and state are kept in ``--tmp``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.integration.site import Cluster, serve_site


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def sent(worker) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from prometheus_client.parser import text_string_to_metric_families

    _, text = worker.get("/metrics")
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "streamcrawl_kafka_messages_sent_total":
                out[s.labels["topic"]] = s.value
    return out


def topic_sizes(cluster: Cluster) -> dict[str, int]:
    """Messages in every topic of the cluster's prefix (changelogs included), by end offsets."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    prefix = cluster.env["STREAMCRAWL_TOPIC_PREFIX"]

    async def sizes() -> dict[str, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.env["STREAMCRAWL_KAFKA_BOOTSTRAP"])
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--origins", type=int, default=3)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--per-origin-concurrency", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of idle CPU measured first")
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--py-spy", metavar="OUT", help="py-spy record the worker into OUT (svg)")
    ap.add_argument("--py-spy-args", default="", help="extra py-spy record flags")
    ap.add_argument("--tmp", help="directory for the worker's state and log (default: temp)")
    ap.add_argument("--json", action="store_true", help="print one JSON line only")
    args = ap.parse_args()

    tmp = Path(args.tmp or tempfile.mkdtemp(prefix="kafka-probe-"))
    tmp.mkdir(parents=True, exist_ok=True)
    cluster = Cluster.create(tmp, args.partitions)
    cluster.env["STREAMCRAWL_LOG_LEVEL"] = args.log_level
    expected = args.origins * args.pages
    spy = None
    try:
        with serve_site(args.origins, args.pages) as servers:
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            proc = psutil.Process(worker.proc.pid)
            if args.py_spy:
                spy = subprocess.Popen(
                    [
                        str(Path(sys.executable).parent / "py-spy"),
                        "record",
                        "-o",
                        args.py_spy,
                        "--pid",
                        str(proc.pid),
                        *args.py_spy_args.split(),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)
            idle0, i0 = cpu(proc), time.monotonic()
            time.sleep(args.idle)
            idle_rate = (cpu(proc) - idle0) / (time.monotonic() - i0)
            cpu0, sent0, t0 = cpu(proc), sent(worker), time.monotonic()
            cluster.seed(
                [s.url("/") for s in servers],
                "probe",
                "--delay",
                str(args.delay),
                "--per-origin-concurrency",
                str(args.per_origin_concurrency),
            )
            done = 0
            while time.monotonic() - t0 < args.timeout:
                assert worker.proc.poll() is None, f"worker exited: see {worker.log}"
                done = cluster.query("SELECT count(*) FROM {ks}.url_status")[0][0]
                if done >= expected:
                    break
                time.sleep(0.2)
            wall = time.monotonic() - t0
            cpu1, sent1 = cpu(proc), sent(worker)
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes the profile
                spy.wait(60)
                spy = None
        in_topics = topic_sizes(cluster)
    finally:
        if spy is not None:
            spy.kill()
        cluster.stop_all()
    per_topic = {k: round((v - sent0.get(k, 0.0)) / max(done, 1), 3) for k, v in sent1.items()}
    result = {
        "site": f"{args.origins}x{args.pages}",
        "pages": done,
        "expected": expected,
        "wall_s": round(wall, 2),
        "pages_per_s": round(done / wall, 1),
        "cpu_s": round(cpu1 - cpu0, 2),
        "cpu_ms_per_page": round(1000 * (cpu1 - cpu0) / max(done, 1), 2),
        # what an idle worker burns (timers, commits, polls) is spread over the pages: the
        # same worker on a busier box is slower and shows more ms/page, not more work per page
        "idle_cpu_ms_per_s": round(1000 * idle_rate, 1),
        "cpu_ms_per_page_minus_idle": round(
            1000 * (cpu1 - cpu0 - idle_rate * wall) / max(done, 1), 2
        ),
        "load_avg_1m": round(os.getloadavg()[0], 2),  # other processes skew the figures
        "sent_per_page": per_topic,
        "in_topics_per_page": {k: round(v / max(done, 1), 3) for k, v in sorted(in_topics.items())},
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=1))
        print(f"worker log: {worker.log}", file=sys.stderr)
    if not args.tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
