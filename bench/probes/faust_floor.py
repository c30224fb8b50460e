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

What the default pair compares is a consumer *at 1,000 events a second*, not a per-message
cost: at that rate a fetch brings a handful of records, and the aiokafka loop commits after
each ``getmany`` (an OffsetCommit round trip), so its figure is mostly a fetch and a commit
per few events. ``--modes`` adds variants that take one thing away at a time:

* ``aiokafka-auto``: the same ``getmany`` loop without the commit per batch (aiokafka's
  auto-commit every second, as Faust commits every ``broker_commit_interval``);
* ``aiokafka-windows``: that, with the worker's fetch windows
  (``topology.worker.internals.fetch_in_windows``: 64 KiB or 100 ms after a fetch that
  brought records);
* ``faust-windows``: Faust's consumer with the same fetch windows, as the worker runs it
  (``topology.worker.internals.fetch_worker_in_windows``);
* ``faust-cython``, ``faust-windows-cython``: Faust with ``cython_optimizations=True``
  (faust-streaming 0.15's repaired Cython stream iterator and conductor; the extensions are
  built in its wheel and used either way, the flag only turns on the fast paths);

and ``--backlog`` produces every message before the consumer starts, so that it reads full
fetches as fast as it can: the client's own cost per message, the floor. ``--jmx HOST:PORT``
(a broker with a JMX port: ``bench.probes.broker_requests jmx``) reads the broker's request
counts around each run and adds its fetches and commits per event.

    .venv/bin/python -m bench.probes.faust_floor --runs 3 --modes \\
        faust,faust-windows,faust-windows-cython,aiokafka,aiokafka-auto,aiokafka-windows
    .venv/bin/python -m bench.probes.faust_floor --backlog --messages 50000 \\
        --modes faust-windows,faust-windows-cython,aiokafka-auto

Informs: whether the frontier agent should leave Faust's stream for a plain aiokafka consumer
(docs/performance.md, "The frontier agent's per-event cost": the saving per page was not worth
the rewrite), and what the broker's bill of the worker's consumers is per event
(docs/performance.md, "The broker's bill").
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
MODES = (
    "faust",
    "faust-cython",
    "faust-windows",
    "faust-windows-cython",
    "aiokafka",
    "aiokafka-auto",
    "aiokafka-windows",
)


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


def _faust(topic: str, messages: int, mode: str = "faust") -> None:
    """The frontier agent's plumbing (``run_batches``) with a frontier that only counts; a
    ``mode`` with ``-windows`` fetches in the worker's windows, one with ``-cython`` turns on
    Faust's opt-in Cython fast paths."""
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
        cython_optimizations=mode.endswith("-cython"),
    )
    if "-windows" in mode:
        from streamcrawl.topology.worker.internals import fetch_worker_in_windows

        fetch_worker_in_windows(app)

    def done(counter: _Counter) -> None:
        print(json.dumps(counter.result(mode)), flush=True)
        os._exit(0)

    frontier = CountingFrontier(_Counter(messages), done)
    source = app.topic(topic, key_type=bytes, value_type=bytes)

    @app.agent(source, name="floor", concurrency=1)
    async def read(stream: Any) -> None:
        untrack = lambda e: untrack_event(app.consumer, e)  # noqa: E731
        await run_batches(stream, frontier, Metrics(), untrack=untrack)  # type: ignore[arg-type]

    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()


async def _aiokafka(topic: str, messages: int, mode: str = "aiokafka") -> None:
    """A consumer of the group's partitions reading ``getmany`` batches: ``aiokafka`` commits
    after each batch, ``aiokafka-auto`` leaves it to the auto-commit every second,
    ``aiokafka-windows`` also fetches in the worker's windows."""
    from aiokafka import AIOKafkaConsumer

    per_batch = mode == "aiokafka"
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=os.environ[BOOTSTRAP],
        group_id=f"floor-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=not per_batch,
        auto_commit_interval_ms=1000,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    if mode == "aiokafka-windows":
        from streamcrawl.topology.worker.internals import fetch_in_windows

        fetch_in_windows(consumer)
    counter = _Counter(messages)
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=50, max_records=500)
            n = sum(len(records) for records in batches.values())
            if not n:
                continue
            if per_batch:
                await consumer.commit()
            if counter.add(n):
                print(json.dumps(counter.result(mode)), flush=True)
                return
    finally:
        await consumer.stop()


def _child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One mode on a fresh topic: start the consumer, let it join, then produce (with
    ``--backlog``: produce, then start the consumer). With ``--jmx``, the broker's requests
    from the consumer's start to its exit, per event."""
    topic = f"perf-floor-{uuid.uuid4().hex[:10]}"
    asyncio.run(_create(topic, args.partitions))
    argv = [sys.executable, "-m", "bench.probes.faust_floor", "--child", mode, "--topic", topic]
    if args.backlog:
        asyncio.run(_produce(topic, args.messages, args.size, 1e9))
    requests0 = _requests(args)
    proc = subprocess.Popen(
        [*argv, "--messages", str(args.messages)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if not args.backlog:
            time.sleep(args.settle)  # group join and assignment
            asyncio.run(_produce(topic, args.messages, args.size, args.rate))
        out, err = proc.communicate(timeout=600)
        requests1 = _requests(args)
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
    if requests0 is not None and requests1 is not None:
        result["broker_requests_per_event"] = {
            api: round((n - requests0.get(api, 0)) / args.messages, 4)
            for api, n in requests1.items()
            if api in ("Fetch", "OffsetCommit", "Heartbeat", "Produce")
        }
    return result


def _requests(args: argparse.Namespace) -> dict[str, float] | None:
    """The broker's request counts by API (``--jmx``), None without it."""
    if not args.jmx:
        return None
    from bench.probes.broker_requests import jmx_counts

    return jmx_counts(args.jmx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second produced")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds to join before producing")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--size", type=int, default=300, help="bytes per value (an outcome's order)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="faust,aiokafka", help=f"comma list of {', '.join(MODES)}")
    ap.add_argument("--backlog", action="store_true", help="produce all before consuming")
    ap.add_argument("--jmx", metavar="HOST:PORT", help="the broker's JMX: requests per event")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child and args.child.startswith("faust"):
        _faust(args.topic, args.messages, args.child)
        return
    if args.child:
        asyncio.run(_aiokafka(args.topic, args.messages, args.child))
        return
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        ap.error(f"unknown modes: {sorted(unknown)}")
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
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
