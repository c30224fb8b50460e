"""What consuming one event costs the worker, through Faust or on aiokafka directly.

The frontier agent reads ``frontier`` and ``outcomes`` through a Faust stream
(``topology.worker.batching.run_batches``: a reader task iterates ``stream.noack().events()``
into a queue, the agent takes batches, then acks each event). This measures that plumbing alone,
with a frontier that does nothing, against the alternative: an aiokafka consumer reading
``getmany`` batches and committing once per batch. Both read the same ``--messages`` values
(``--size`` bytes, keyed over ``--partitions`` partitions) from a fresh topic of the running
broker, produced at ``--rate`` messages per second once the consumer has joined (a live
stream, so that fetching is inside the measured interval, not prefetched before it); each
mode runs in its own process on a topic of its own and reports its process CPU (all threads:
Faust's consumer thread included) from its first event to its last, per event.

    source .services/env                 # written by scripts/services.sh start
    .venv/bin/python -m bench.probes.faust_floor --messages 10000 --rate 1000 --runs 3

Informs: whether the frontier agent should leave Faust's stream for a plain aiokafka consumer
(docs/performance.md, "The frontier agent's per-event cost": the saving per page was not worth
the rewrite).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

BOOTSTRAP = "STREAMCRAWL_KAFKA_BOOTSTRAP"


async def _create(topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=os.environ[BOOTSTRAP])
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def _produce(topic: str, messages: int, size: int, rate: float) -> None:
    """``messages`` values at ``rate`` per second (in 10 ms steps)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=os.environ[BOOTSTRAP], linger_ms=5)
    await producer.start()
    try:
        value, step, sent, t0 = b"x" * size, 0.01, 0, time.monotonic()
        futures = []
        while sent < messages:
            due = min(messages, int((time.monotonic() - t0) * rate) + 1)
            for i in range(sent, due):
                key = f"http://o{i % 256}.test".encode()
                futures.append(await producer.send(topic, value, key=key))
            sent = due
            await asyncio.sleep(step)
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _delete(topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=os.environ[BOOTSTRAP])
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()


class _Counter:
    """Marks the first and the last of ``expected`` events with process CPU and wall time."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen = 0
        self.batches = 0
        self.t0 = self.cpu0 = 0.0

    def add(self, n: int) -> bool:
        if self.seen == 0:
            self.t0, self.cpu0 = time.monotonic(), time.process_time()
        self.seen += n
        self.batches += 1
        return self.seen >= self.expected

    def result(self, mode: str) -> dict[str, Any]:
        cpu, wall = time.process_time() - self.cpu0, time.monotonic() - self.t0
        return {
            "mode": mode,
            "events": self.seen,
            "batches": self.batches,
            "cpu_s": cpu,
            "wall_s": wall,
            "cpu_us_per_event": 1e6 * cpu / self.seen,
        }


class CountingFrontier:
    """A frontier for ``run_batches`` that only counts: it refuses no event (``handle_batch``
    returns an empty set of refused indices) and calls ``done(counter)`` once the counter has
    seen the events it expects."""

    def __init__(self, counter: _Counter, done: Callable[[_Counter], None]) -> None:
        self.counter = counter
        self.done = done

    async def handle_batch(self, events: Sequence[Any], enter: Any) -> set[int]:
        if self.counter.add(len(events)):
            self.done(self.counter)
        return set()


def _faust(topic: str, messages: int) -> None:
    """The frontier agent's plumbing (``run_batches``) with a frontier that only counts."""
    import faust

    from streamcrawl.agents.stream.metrics import Metrics
    from streamcrawl.topology.worker.acks import untrack as untrack_event
    from streamcrawl.topology.worker.batching import run_batches

    app = faust.App(
        f"floor-{uuid.uuid4().hex[:8]}",
        broker=f"kafka://{os.environ[BOOTSTRAP]}",
        store="memory://",
        topic_disable_leader=True,
        autodiscover=False,
        web_enabled=False,
        broker_commit_interval=1.0,
        key_serializer="raw",
        value_serializer="raw",
        datadir=f"/tmp/floor-{uuid.uuid4().hex[:8]}",
    )

    def done(counter: _Counter) -> None:
        print(json.dumps(counter.result("faust")), flush=True)
        os._exit(0)

    frontier = CountingFrontier(_Counter(messages), done)
    source = app.topic(topic, key_type=bytes, value_type=bytes)

    @app.agent(source, name="floor", concurrency=1)
    async def read(stream: Any) -> None:
        untrack = lambda e: untrack_event(app.consumer, e)  # noqa: E731
        await run_batches(stream, frontier, Metrics(), untrack=untrack)  # type: ignore[arg-type]

    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()


async def _aiokafka(topic: str, messages: int) -> None:
    """A consumer of the group's partitions: ``getmany`` batches, one commit per batch."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=os.environ[BOOTSTRAP],
        group_id=f"floor-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    counter = _Counter(messages)
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=50, max_records=500)
            n = sum(len(records) for records in batches.values())
            if not n:
                continue
            await consumer.commit()
            if counter.add(n):
                print(json.dumps(counter.result("aiokafka")), flush=True)
                return
    finally:
        await consumer.stop()


def _child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One mode on a fresh topic: start the consumer, let it join, then produce."""
    topic = f"perf-floor-{uuid.uuid4().hex[:10]}"
    asyncio.run(_create(topic, args.partitions))
    argv = [sys.executable, "-m", "bench.probes.faust_floor", "--child", mode, "--topic", topic]
    proc = subprocess.Popen(
        [*argv, "--messages", str(args.messages)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(args.settle)  # group join and assignment
        asyncio.run(_produce(topic, args.messages, args.size, args.rate))
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        asyncio.run(_delete(topic))
    r = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    # Faust's worker sends stdout to its log (stderr): the result line may be in either.
    mark = '{"mode"'
    output = (r.stdout + "\n" + r.stderr).splitlines()
    lines = [ln[ln.index(mark) :] for ln in output if mark in ln]
    if not lines:
        raise RuntimeError(f"{mode} exited {r.returncode}: {r.stderr[-800:]}")
    result: dict[str, Any] = json.loads(lines[-1].strip())
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second produced")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds to join before producing")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--size", type=int, default=300, help="bytes per value (an outcome's order)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", choices=("faust", "aiokafka"), help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "faust":
        _faust(args.topic, args.messages)
        return
    if args.child == "aiokafka":
        asyncio.run(_aiokafka(args.topic, args.messages))
        return
    runs: dict[str, list[dict[str, Any]]] = {"faust": [], "aiokafka": []}
    for _ in range(args.runs):  # interleaved, so that drift hits both alike
        for mode in runs:
            r = _child(mode, args)
            r["loadavg_1m"] = os.getloadavg()[0]
            runs[mode].append(r)
            print(json.dumps(r), flush=True)
    summary = {
        mode: statistics.median(r["cpu_us_per_event"] for r in rs) for mode, rs in runs.items()
    }
    print(json.dumps({"median_cpu_us_per_event": summary}))


if __name__ == "__main__":
    main()
