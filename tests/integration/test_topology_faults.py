"""The Kafka wiring under faults: a worker killed -9 mid-crawl, and a second worker joining.

Workers are ``streamcrawl worker`` subprocesses, so ``kill -9`` is real; each has its own state
dir (a replacement pod has no local state: it recovers the tables from their changelogs).
"""

from __future__ import annotations

import collections
import itertools
import signal
import time
from pathlib import Path

import pytest

from tests.integration.site import Cluster, page_requests, serve_site
from tests.integration.test_topology import JITTER, fetch_starts

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]


def test_kill_9_mid_crawl_then_a_new_worker_finishes_it(tmp_path: Path) -> None:
    origins, pages, delay = 3, 100, 0.1
    cluster = Cluster.create(tmp_path, partitions=3)
    try:
        with serve_site(origins, pages) as servers:
            first = cluster.start_worker("w1")
            first.wait_ready()
            cluster.seed([s.url("/") for s in servers], "crash", "--delay", str(delay))
            deadline = time.monotonic() + 90
            while sum(len(page_requests(s)) for s in servers) < 100:
                assert time.monotonic() < deadline, "the first worker does not crawl"
                time.sleep(0.05)
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(10)
            second = cluster.start_worker("w2")
            states = cluster.wait_states(origins * pages, timeout=180)
            assert collections.Counter(states.values()) == {"fetched": origins * pages}
            assert len(cluster.rows("pages")) == origins * pages  # no duplicate rows
            assert len(cluster.rows("url_status")) == origins * pages
            refetched = sum(len(page_requests(s)) - len(set(page_requests(s))) for s in servers)
            # per_origin_concurrency 1: at most one request per origin was in flight
            # (dispatched, outcome not applied) when the worker died.
            assert refetched <= origins, refetched
            assert all(
                set(page_requests(s)) == {("/" if i == 0 else f"/p{i}") for i in range(pages)}
                for s in servers
            )
            assert second.metric("streamcrawl_fetch_pages_total") > 0
    finally:
        cluster.stop_all()


def test_two_workers_split_origins_and_stay_polite_across_the_rebalance(
    tmp_path: Path,
) -> None:
    partitions, pages, delay = 6, 120, 0.25  # ~30 s: the second worker joins mid-crawl
    cluster = Cluster.create(tmp_path, partitions=partitions)
    try:
        with serve_site(partitions, pages, spread=partitions) as servers:
            first = cluster.start_worker("w1")
            first.wait_ready()
            cluster.seed([s.url("/") for s in servers], "two", "--delay", str(delay))
            second = cluster.start_worker("w2")  # joins mid-crawl: a rebalance
            second.wait_ready()
            states = cluster.wait_states(partitions * pages, timeout=180)
            assert collections.Counter(states.values()) == {"fetched": partitions * pages}
            assert first.metric("streamcrawl_fetch_pages_total") > 0
            assert second.metric("streamcrawl_fetch_pages_total") > 0
            assert len(cluster.rows("pages")) == partitions * pages
            for origin, times in fetch_starts(cluster).items():
                assert min(b - a for a, b in itertools.pairwise(times)) >= delay, origin
            for srv in servers:
                arrivals = sorted(r.t for r in srv.log)
                gap = min(b - a for a, b in itertools.pairwise(arrivals))
                assert gap >= delay - JITTER, (srv.origin, gap)
    finally:
        cluster.stop_all()


def test_sigterm_hands_the_crawl_over_to_the_other_worker(tmp_path: Path) -> None:
    """A worker stopped with SIGTERM mid-crawl exits 0 and leaves nothing behind: the worker
    that takes its partitions over finishes the crawl, every URL with exactly one state."""
    origins, pages, delay = 4, 100, 0.2  # ~20 s of crawling per origin
    cluster = Cluster.create(tmp_path, partitions=4)
    try:
        with serve_site(origins, pages, spread=origins) as servers:
            first, second = cluster.start_worker("w1"), cluster.start_worker("w2")
            first.wait_ready()
            second.wait_ready()  # both in the group: the partitions are split between them
            cluster.seed([s.url("/") for s in servers], "handoff", "--delay", str(delay))
            deadline = time.monotonic() + 90
            while sum(len(page_requests(s)) for s in servers) < 60:
                assert time.monotonic() < deadline, "the workers do not crawl"
                time.sleep(0.05)
            fetched_by_first = first.metric("streamcrawl_fetch_pages_total")
            first.proc.send_signal(signal.SIGTERM)
            assert first.proc.wait(60) == 0
            assert fetched_by_first > 0
            states = cluster.wait_states(origins * pages, timeout=180)
            assert collections.Counter(states.values()) == {"fetched": origins * pages}
            assert len(cluster.rows("pages")) == origins * pages
            refetched = sum(len(page_requests(s)) - len(set(page_requests(s))) for s in servers)
            assert refetched <= origins, refetched  # at most the requests cut at the stop
    finally:
        cluster.stop_all()
