"""The Kafka wiring under test, in four steps that the bench rows and the probe share:

* ``start_topology`` (``bench.kafka_topology``): the workers on topics, a keyspace and a crawl
  id of this run's own, stopped and deleted when it exits.
* ``seed``: the worker and service meters start, then ``streamcrawl seed``.
* ``drain``: waits until the terminal-state counts say the crawl is over (see its docstring).
* ``measure``: the runner's result dict (``bench/runners.py``'s format) from the three above.

``run_kafka_topology(ctx, workers)`` is the bench row: the four in a row.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.context import RunContext
from bench.kafka_topology import (
    Topology,
    idle_rates,
    kafka_partitions,
    log_tail,
    start_topology,
    worker_pages,
)
from bench.measure import ServiceMeter

USER_AGENT = "bench-streamcrawl"


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


@dataclass
class Snapshot:
    """The workers' CPU-seconds and peak RSS, and each service's CPU-seconds, since the seed."""

    cpu_s: float
    peak_rss_mb: float
    service_cpu_s: dict[str, float | None]
    worker_cpu_s: list[float] = field(default_factory=list)  # each worker's share of cpu_s


@dataclass
class Seeded:
    t0: float  # monotonic, just before ``streamcrawl seed``
    t0_unix: float
    workers: ServiceMeter
    services: dict[str, ServiceMeter | None]
    each: list[ServiceMeter] = field(default_factory=list)  # one per worker

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.workers.cpu_now(),
            self.workers.peak_rss_mb,
            {k: (m.cpu_now() if m else None) for k, m in self.services.items()},
            [m.cpu_now() for m in self.each],
        )


def seed(
    topo: Topology,
    seeds: list[str],
    *,
    delay: float,
    max_pages: int,
    per_origin_concurrency: int | None = None,
    flags: Sequence[str] = (),
) -> Seeded:
    """Start the meters, then ``streamcrawl seed SEEDS --delay D --per-origin-concurrency N
    (default 1 with a delay, else 8) --allow-host 127.0.0.1 --user-agent bench-streamcrawl
    --max-pages M FLAGS`` (``flags``: more of the seed command's options, e.g. revisits)."""
    workers = ServiceMeter([p.pid for p in topo.procs]).start()
    each = [ServiceMeter([p.pid]).start() for p in topo.procs]
    services = {
        "kafka": ServiceMeter([topo.kafka_pid]).start() if topo.kafka_pid else None,
        "cassandra": ServiceMeter([topo.cassandra_pid]).start() if topo.cassandra_pid else None,
    }
    topo.meters += [workers, *each, *(m for m in services.values() if m)]
    if per_origin_concurrency is None:
        per_origin_concurrency = 1 if delay else 8
    argv = [
        topo.exe,
        "seed",
        *seeds,
        "--crawl-id",
        topo.crawl_id,
        "--delay",
        str(delay),
        "--per-origin-concurrency",
        str(per_origin_concurrency),
        "--allow-host",
        "127.0.0.1",
        "--user-agent",
        USER_AGENT,
        "--max-pages",
        str(max_pages),
        *flags,
    ]
    seeded = Seeded(time.monotonic(), time.time(), workers, services, each)
    r = subprocess.run(argv, env=topo.env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"streamcrawl seed exited {r.returncode}: {r.stderr[-500:]}")
    return seeded


@dataclass
class Drained:
    states: dict[str, int]  # terminal-state counts at the end
    last_t: float  # unix time of the last change of the counts
    snap: Snapshot  # taken at the last change of the counts
    timed_out: bool = False
    stalled: bool = False
    worker_pages: list[int | None] = field(default_factory=list)  # per worker, at the end
    worker_counts: dict[str, float] = field(default_factory=dict)  # summed over the workers


def drain(
    topo: Topology,
    seeded: Seeded,
    *,
    expected_pages: int,
    max_pages: int | None,
    timeout: float,
    access_log: Path | None = None,
) -> Drained:
    """Wait until the terminal-state counts (``bench.kafka_status``, what ``streamcrawl status
    --json`` reports) hold ``expected_pages`` as ``fetched`` (or ``max_pages`` states),
    unchanged for 3 s, with the Cassandra sink caught up (its lag 0, so that the CPU of every
    write falls inside the measurement). A crawl whose counts stop moving for 60 s short of
    that, with no request to the site for 30 s (``access_log``; without one, the 60 s alone),
    ends as ``stalled``; one past ``timeout`` s as ``timed_out``."""
    assert topo.poller is not None
    log_size, log_seen = -1, time.monotonic()
    last_total, last_t, last_seen = -1, seeded.t0_unix, time.monotonic()
    snap = seeded.snapshot()
    states: dict[str, int] = {}
    while True:
        topo.check_workers(" during the crawl")
        now = time.monotonic()
        latest = topo.poller.latest or {}
        states = latest.get("states") or {}
        total = sum(states.values())
        if total != last_total:
            last_total, last_t, last_seen = total, latest.get("t", time.time()), now
            snap = seeded.snapshot()
        quiet = now - last_seen
        size = _size(access_log)
        if size != log_size:
            log_size, log_seen = size, now
        complete = states.get("fetched", 0) >= expected_pages or (
            max_pages is not None and total >= max_pages
        )
        if total and complete and quiet >= 3.0 and latest.get("sink_lag") == 0:
            return Drained(states, last_t, snap)
        # Stalled: no new terminal state for 60 s and no request to the site for 30 s
        # (the Cassandra sink can lag the fetches by tens of seconds under load).
        if total and quiet >= 60.0 and now - log_seen >= 30.0:
            return Drained(states, last_t, snap, stalled=True)
        if now - seeded.t0 > timeout:
            return Drained(states, time.time(), seeded.snapshot(), timed_out=True)
        topo.check_poller()
        time.sleep(0.25)


def measure(topo: Topology, seeded: Seeded, drained: Drained, *, rss_samples: bool) -> dict:
    """The runner's result dict, once ``topo`` is stopped: "wall_s" from the seed to the last
    change of the counts; "cpu_s"/"peak_rss_mb" of the workers over the same interval;
    "service_cpu_s" of the broker and Cassandra (shared services: other work may use them);
    start-up (before the seed) in self_report."""
    wall = max(0.0, drained.last_t - seeded.t0_unix)
    codes = topo.exit_codes
    result = {
        "returncode": next((c for c in codes if c not in (0, -signal.SIGTERM, None)), 0),
        "wall_s": wall,
        "cpu_s": drained.snap.cpu_s,
        "user_s": None,
        "sys_s": None,
        "peak_rss_mb": seeded.workers.peak_rss_mb,
        "timed_out": drained.timed_out,
        "stderr_tail": log_tail(topo.logs / "worker-1.log"),
        "service_cpu_s": drained.snap.service_cpu_s,
        "self_report": {
            "crawl_id": topo.crawl_id,
            "topic_prefix": topo.env["STREAMCRAWL_TOPIC_PREFIX"],
            "keyspace": topo.env["STREAMCRAWL_CASSANDRA_KEYSPACE"],
            "partitions": topo.partitions,
            "workers": len(topo.procs),
            "worker_pages": drained.worker_pages,
            "worker_counts": drained.worker_counts,
            "worker_cpu_s": drained.snap.worker_cpu_s,
            "states": drained.states,
            "stalled": drained.stalled,
            "startup_s": topo.startup_s,
            "startup_cpu_s": topo.startup_cpu_s,
            "worker_exit_codes": codes,
            "kafka_pid": topo.kafka_pid,
            "cassandra_pid": topo.cassandra_pid,
            "code": topo.code,
        },
    }
    if rss_samples:
        result["rss_samples"] = [(t, mb) for t, mb in seeded.workers.rss_samples if t <= wall + 1]
    return result


def run_kafka_topology(ctx: RunContext, workers: int, flags: Sequence[str] = ()) -> dict:
    """The Kafka wiring with ``workers`` workers on the running Kafka and Cassandra: partitions
    ``kafka_partitions(spec)``, concurrency 64, seeded with every root and a budget of
    ``ctx.max_pages`` (else twice the site) and ``flags`` (more of the seed command's options),
    drained on the expected pages, measured as ``measure`` says. ctx.profile: every worker runs
    under ``py-spy record``; ctx.idle_window_s: ``idle_rates`` before the seed, as
    "idle_rates" in the result."""
    expected = ctx.spec.expected_pages
    rates = None
    with start_topology(
        ctx.workdir,
        workers,
        kafka_partitions(ctx.spec),
        profile=ctx.profile,
        ready_timeout=min(300.0, ctx.timeout),
    ) as topo:
        if ctx.idle_window_s:
            rates = idle_rates(topo, ctx.idle_window_s)
        seeded = seed(
            topo,
            ctx.seeds,
            delay=ctx.delay,
            max_pages=ctx.max_pages or 2 * expected,
            per_origin_concurrency=ctx.per_origin_concurrency,
            flags=flags,
        )
        drained = drain(
            topo,
            seeded,
            expected_pages=expected,
            max_pages=ctx.max_pages,
            timeout=ctx.timeout,
            access_log=ctx.extra.get("access_log"),
        )
        drained.worker_pages, drained.worker_counts = worker_pages(topo)
    result = measure(topo, seeded, drained, rss_samples=bool(ctx.max_pages))
    if rates is not None:
        result["idle_rates"] = rates
    return result
