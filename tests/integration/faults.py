"""What every fault test checks, and the one polling helper they share.

The promises (the invariants of docs/architecture.md, "Invariants and the tests that would
fail without them"): the crawl completes, 0 URLs lost, 0 duplicate rows, refetches <= the
requests in flight at the fault, and every per-origin gap >= the delay as the server saw the
requests arrive. Arrivals are the kernel's receive times (``tests/arrivals.py``), so the gap
check has no slack: on loopback a stamp is the crawler's send to within microseconds.

``check_crawl`` returns the figures and, when ``STREAMCRAWL_FAULT_FIGURES`` names a file,
appends them there as one JSON line (``scripts/loop_tests.py`` collects them per run).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from tests.integration.site import (
    Cluster,
    RemoteServer,
    Worker,
    page_path,
    page_requests,
    serve_site,
)
from tests.integration.test_topology import fetch_starts

T = TypeVar("T")


@contextmanager
def crawling(
    tmp_path: Path,
    crawl_id: str,
    origins: int,
    pages: int,
    delay: float,
    workers: int = 1,
    seed_flags: tuple[str, ...] = (),
    **worker_env: str,
) -> Iterator[tuple[Cluster, list[RemoteServer], list[Worker]]]:
    """A crawl under way: one partition per origin (each origin on its own partition),
    ``workers`` workers started and ready, the seeds sent (with ``seed_flags``); yields the
    cluster, the servers and the workers, and stops every worker after."""
    cluster = Cluster.create(tmp_path, partitions=origins)
    try:
        with serve_site(origins, pages, spread=origins) as servers:
            started = [cluster.start_worker(f"w{i + 1}", **worker_env) for i in range(workers)]
            for worker in started:
                worker.wait_ready()
            cluster.seed(
                [s.url("/") for s in servers], crawl_id, "--delay", str(delay), *seed_flags
            )
            yield cluster, servers, started
    finally:
        cluster.stop_all()


def wait_until(
    condition: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1
) -> T:
    """Call ``condition`` every ``interval`` s until it returns something truthy, and return
    that; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (after {timeout:.0f} s)")
        time.sleep(interval)


def generations(cluster: Cluster) -> dict[int, float]:
    """Generation -> when the first worker joined it (epoch seconds), for the workers'
    consumer group, from the workers' logs: the group's first join is generation 1, each
    rebalance adds one."""
    group = re.escape(f"{cluster.env['STREAMCRAWL_TOPIC_PREFIX']}-worker")
    joined = re.compile(rf"^\[([-0-9 :,]+)\] .*Joined group '{group}' \(generation (\d+)\)", re.M)
    found: dict[int, float] = {}
    for log in cluster.tmp.glob("*.log"):
        for stamp, generation in joined.findall(log.read_text(errors="replace")):
            at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
            found[int(generation)] = min(at, found.get(int(generation), at))
    return found


# FetchService.revoke and .on_stop: what a worker had in flight when partitions left it
LEFT = re.compile(rb"(?:revoked|stopping with) partitions \[[0-9, ]*\]: (\d+) requests in flight")


def in_flight_at_revokes(cluster: Cluster) -> int:
    """Requests the workers had in flight when partitions left them (a revoke, or a worker
    stopping), summed over every worker's log: the most a graceful rebalance may refetch.
    Each waits for them, so only one abandoned after its grace can be fetched again."""
    return sum(int(n) for log in cluster.tmp.glob("*.log") for n in LEFT.findall(log.read_bytes()))


def requested(servers: Iterable[RemoteServer]) -> int:
    """Page requests the servers received so far (robots.txt not counted)."""
    return sum(len(page_requests(s)) for s in servers)


def wait_requests(servers: list[RemoteServer], count: int, timeout: float = 90) -> int:
    """Wait until the servers received ``count`` page requests; how many they had."""
    return wait_until(
        lambda: (n := requested(servers)) >= count and n,
        timeout,
        f"fewer than {count} page requests: the workers do not crawl",
        interval=0.05,
    )


@dataclass(frozen=True)
class Figures:
    """One fault run's figures, for the per-run report of ``scripts/loop_tests.py``."""

    test: str
    urls: int
    lost: int  # URLs with no terminal state, or another state than fetched
    duplicates: int  # page rows beyond one per URL
    refetched: int  # requests of a path beyond its first
    min_gap: float  # smallest per-origin gap between request arrivals at the server
    min_gap_crawler: float  # the same from the crawler's own start times (Page.fetched_at)
    # how late the server's handler ran after the kernel received the request, at most: the
    # error of the arrival times the servers logged before (handler time.time())
    handler_lag: float
    # up to 20 refetched requests as [origin, path, kernel arrival times, the URL's attempts and
    # last error in url_status], to find their cause in the workers' logs (kept with a failed
    # run's basetemp): attempts 1 means the frontier never learnt of the first fetch (an
    # outcome not applied before the new owner dispatched), 2+ a retry
    refetch_samples: tuple[tuple[str, str, tuple[float, ...], int | None, str | None], ...] = ()


def crawl_figures(cluster: Cluster, servers: list[RemoteServer], urls: int) -> Figures:
    states = cluster.states()
    fetched = collections.Counter(states.values())["fetched"]
    tries = {
        r.url: (r.attempts, r.last_error)
        for r in cluster.query("SELECT url, attempts, last_error FROM {ks}.url_status")
    }
    refetched, lag = 0, 0.0
    gaps, samples = [], []
    for srv in servers:
        log = srv.log
        paths = [r.path for r in log if r.path != "/robots.txt"]
        refetched += len(paths) - len(set(paths))
        for path, n in collections.Counter(paths).items():
            if n > 1 and len(samples) < 20:
                times = tuple(round(r.t, 3) for r in log if r.path == path)
                attempts, error = tries.get(srv.url(path), (None, None))
                samples.append((srv.origin, path, times, attempts, error))
        arrivals = sorted(r.t for r in log)
        gaps.append(min(b - a for a, b in itertools.pairwise(arrivals)))
        lag = max(lag, *(r.handled - r.t for r in log))
    own = min(
        min(b - a for a, b in itertools.pairwise(times)) for times in fetch_starts(cluster).values()
    )
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
    return Figures(
        test=test,
        urls=urls,
        lost=urls - fetched,
        duplicates=len(cluster.rows("pages")) - fetched,
        refetched=refetched,
        min_gap=round(min(gaps), 4),
        min_gap_crawler=round(own, 4),
        handler_lag=round(lag, 4),
        refetch_samples=tuple(samples),
    )


def check_crawl(
    cluster: Cluster,
    servers: list[RemoteServer],
    pages: int,
    delay: float,
    in_flight: int | Callable[[], int] | None,
    timeout: float = 180,
    **extra: float,
) -> Figures:
    """Wait for a terminal state of each of the ``pages`` pages of every server and check
    every promise; the figures (recorded with ``extra``, e.g. how long a drain took).

    ``in_flight``: the requests that can have been in flight at the fault (per-origin
    concurrency 1: one per origin the fault touched), the bound on refetches; ``None``: the
    refetches are recorded, not bounded; a callable: the bound read once the crawl ended (e.g.
    ``in_flight_at_revokes``, from the workers' logs)."""
    urls = pages * len(servers)
    states = cluster.wait_states(urls, timeout=timeout)
    figures = crawl_figures(cluster, servers, urls)
    if callable(in_flight):
        in_flight = in_flight()
    record(figures, {**extra, "in_flight": in_flight if in_flight is not None else -1})
    assert collections.Counter(states.values()) == {"fetched": urls}, figures  # 0 lost
    assert figures.lost == 0 and figures.duplicates == 0, figures
    assert len(cluster.rows("url_status")) == urls, figures
    assert figures.min_gap_crawler >= delay, figures
    assert figures.min_gap >= delay, figures  # kernel arrival times: no slack
    every_page = {page_path(i) for i in range(pages)}
    assert all(set(page_requests(srv)) == every_page for srv in servers), figures
    assert in_flight is None or figures.refetched <= in_flight, (in_flight, figures)
    return figures


def record(figures: Figures, extra: dict[str, float]) -> None:
    line = json.dumps({**asdict(figures), **extra})
    print(f"fault figures: {line}")
    path = os.environ.get("STREAMCRAWL_FAULT_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


# Faust's RocksDB store keeps the changelog offset a table copy holds under this key.
FAUST_OFFSET_KEY = b"__faust\0offset__"


def changelog_records(
    cluster: Cluster, topic: str, partition: int
) -> list[tuple[int, bytes, bytes | None]]:
    """Every (offset, key, value) of one changelog partition, in order."""
    from confluent_kafka import Consumer, TopicPartition

    from streamcrawl.topology.admin import config as admin_config

    conf = admin_config.librdkafka_config(cluster.settings())
    consumer = Consumer(conf | {"group.id": f"check-{topic}", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        records: list[tuple[int, bytes, bytes | None]] = []
        if high <= low:
            return records  # nothing written, or nothing left
        consumer.assign([TopicPartition(topic, partition, low)])
        deadline = time.monotonic() + 60
        while (not records or records[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=1.0):
                if m.error() is None:
                    records.append((m.offset(), m.key(), m.value()))
        assert records and records[-1][0] >= high - 1, f"{topic}/{partition}: read to {high}"
        return records
    finally:
        consumer.close()


def check_table_copies(cluster: Cluster, table: str = "seen") -> int:
    """Stop the workers, then check every worker's copy of every partition of ``table``: it
    holds each key its changelog had written, and not deleted, up to the offset the copy says
    it holds (Faust recovers a new owner from that offset on, so a key missing below it is
    never restored: for ``seen``, a URL admitted and fetched again). Returns how many copies
    were checked (a copy that claims no offset holds nothing to check).

    A standby copy of faust-streaming 0.15.3 was seen to fail this (docs/architecture.md,
    "Standby replicas"): it claimed offset 124 and held 20 of the ~125 keys written up to it."""
    from rocksdict import AccessType, Options, Rdict

    from streamcrawl.topology.admin.topics import changelog_name

    cluster.stop_workers()
    topic = changelog_name(cluster.settings(), table)
    records: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
    bad = []
    checked = 0
    for path in sorted(cluster.tmp.glob(f"*/v*/tables/{table}-*.db")):
        partition = int(path.name.removesuffix(".db").rsplit("-", 1)[1])
        with tempfile.TemporaryDirectory() as tmp:  # the copy as it is, its lock file aside
            copy = Path(tmp) / path.name
            shutil.copytree(path, copy, ignore=shutil.ignore_patterns("LOCK"))
            db = Rdict(
                str(copy), options=Options(raw_mode=True), access_type=AccessType.read_only()
            )
            try:
                held = db.get(FAUST_OFFSET_KEY)
                keys = set(db.keys()) - {FAUST_OFFSET_KEY}
            finally:
                db.close()
        if held is None:
            continue
        checked += 1
        if partition not in records:
            records[partition] = changelog_records(cluster, topic, partition)
        live: dict[bytes, bool] = {}
        for offset, key, value in records[partition]:
            if offset > int(held):
                break
            live[key] = value is not None
        missing = [k for k, alive in live.items() if alive and k not in keys]
        if missing:
            worker = path.relative_to(cluster.tmp).parts[0]
            bad.append(
                f"{worker} {path.name}: {len(missing)} of {len(live)} keys missing "
                f"at offset {int(held)}"
            )
    assert not bad, bad
    return checked
