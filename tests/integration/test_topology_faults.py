"""The Kafka wiring under faults: a worker killed -9 mid-crawl, a second worker joining, a
worker stopped with SIGTERM.

Workers are ``streamcrawl worker`` subprocesses, so ``kill -9`` is real; each has its own state
dir (a replacement pod has no local state: it recovers the tables from their changelogs).
Every test checks the promises of ``tests/integration/faults.py``: the crawl completes, 0 URLs
lost, 0 duplicate rows, refetches <= the requests in flight at the fault, per-origin gaps >= the
delay at the server (kernel arrival times, no slack).
"""

from __future__ import annotations

import signal
import time
from functools import partial
from pathlib import Path

import pytest
import yaml

from tests.integration.faults import (
    check_crawl,
    check_table_copies,
    crawling,
    in_flight_at_revokes,
    wait_requests,
)
from tests.integration.site import ROOT

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

# Seconds Kubernetes gives a worker pod between SIGTERM and SIGKILL (the chart's default).
GRACE = yaml.safe_load((ROOT / "helm/streamcrawl/values.yaml").read_text())["worker"][
    "terminationGracePeriodSeconds"
]


def test_kill_9_mid_crawl_then_a_new_worker_finishes_it(tmp_path: Path) -> None:
    origins, pages, delay = 3, 100, 0.1
    with crawling(tmp_path, "crash", origins, pages, delay) as (cluster, servers, (first,)):
        wait_requests(servers, 100)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        second = cluster.start_worker("w2")
        # per_origin_concurrency 1: at most one request per origin was in flight (dispatched,
        # outcome not applied) when the worker died.
        check_crawl(cluster, servers, pages, delay, in_flight=origins)
        assert second.metric("streamcrawl_fetch_pages_total") > 0
        assert check_table_copies(cluster) > 0  # every copy of `seen` whole


def test_two_workers_split_origins_and_stay_polite_across_the_rebalance(
    tmp_path: Path,
) -> None:
    origins, pages, delay = 6, 120, 0.25  # ~30 s: the second worker joins mid-crawl
    with crawling(tmp_path, "two", origins, pages, delay) as (cluster, servers, (first,)):
        second = cluster.start_worker("w2")  # joins mid-crawl: a rebalance
        second.wait_ready()
        # The old owner finishes its requests in flight at the revoke and the new one indexes
        # an origin once their outcomes are applied: at most those can be fetched again.
        in_flight = partial(in_flight_at_revokes, cluster)
        check_crawl(cluster, servers, pages, delay, in_flight=in_flight)
        assert first.metric("streamcrawl_fetch_pages_total") > 0
        assert second.metric("streamcrawl_fetch_pages_total") > 0
        assert check_table_copies(cluster) > 0  # every copy of `seen` whole


def test_sigterm_hands_the_crawl_over_to_the_other_worker(tmp_path: Path) -> None:
    """A worker stopped with SIGTERM mid-crawl drains within the chart's grace period (exit 0)
    and hands its partitions over without a refetch: its requests in flight finish and their
    outcomes are in Kafka before it leaves; the other worker finishes the crawl."""
    origins, pages, delay = 4, 100, 0.2  # ~20 s of crawling per origin
    # two workers, both in the group: the partitions are split between them
    with crawling(tmp_path, "handoff", origins, pages, delay, workers=2) as (
        cluster,
        servers,
        (first, _),
    ):
        wait_requests(servers, 60)
        fetched_by_first = first.metric("streamcrawl_fetch_pages_total")
        stopped = time.monotonic()
        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(GRACE) == 0
        drained = round(time.monotonic() - stopped, 1)
        assert fetched_by_first > 0
        check_crawl(cluster, servers, pages, delay, in_flight=0, drained_s=drained)
        assert check_table_copies(cluster) > 0  # every copy of `seen` whole
