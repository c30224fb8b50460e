"""Rebalances under load: workers joining and leaving over and over while a crawl runs, and a
worker killed -9 in the middle of a rebalance (docs/architecture.md, "Invariants and the tests
that would fail without them": scale by partitions, no loss, politeness).

Each test checks the promises of ``tests/integration/faults.py``: the crawl completes, 0 URLs
lost, 0 duplicate rows, refetches <= the requests in flight at the fault, and every per-origin
gap >= the delay as the server's kernel saw the requests arrive.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest

from tests.integration.faults import (
    check_crawl,
    check_table_copies,
    crawling,
    generations,
    in_flight_at_revokes,
    requested,
    wait_requests,
    wait_until,
)
from tests.integration.site import Cluster, RemoteServer, Worker

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration, pytest.mark.slow]


def leave(worker: Worker) -> None:
    """SIGTERM, as Kubernetes stops a pod; the worker must drain and exit 0."""
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(60) == 0, f"{worker.name} did not stop cleanly: see {worker.log}"


def test_three_workers_joining_and_leaving_over_and_over(tmp_path: Path) -> None:
    """Joins and graceful leaves, one after the other, while the crawl runs, until the group
    went through 5 rebalances (its generations, as the workers joined them), which must fit in
    2 minutes. A rebalance refetches at most what the workers had in flight when partitions
    left them: each leaving owner finishes its requests, and the new one indexes an origin only
    once the outcomes in flight were applied."""
    origins, pages, delay = 3, 480, 0.25  # >= 120 s of crawling: longer than the storm
    with crawling(tmp_path, "storm", origins, pages, delay) as (cluster, servers, (first,)):
        wait_requests(servers, 20)
        before = max(generations(cluster))
        storm = Storm(cluster, {"w1": first})
        while len(storm.rebalances(before)) < 5 and storm.steps < 10:
            storm.step()
        times = storm.rebalances(before)
        assert len(times) >= 5, times
        # the shortest span of 5 consecutive rebalances
        window = min(b - a for a, b in zip(times, times[4:], strict=False))
        assert window <= 120, (len(times), window)
        assert len(cluster.states()) < origins * pages, "the crawl ended before the storm"
        figures = {"rebalances": len(times), "five_rebalances_s": round(window)}
        in_flight = partial(in_flight_at_revokes, cluster)
        check_crawl(cluster, servers, pages, delay, in_flight=in_flight, timeout=300, **figures)
        assert check_table_copies(cluster) > 0  # every copy of `seen` whole


class Storm:
    """Workers joining and leaving, one change at a time: up to three run together."""

    def __init__(self, cluster: Cluster, running: dict[str, Worker]) -> None:
        self.cluster = cluster
        self.running = running
        self.names = (f"w{i}" for i in itertools.count(len(running) + 1))
        self.steps = 0

    def step(self) -> None:
        """A worker joins; with three running already, the oldest leaves meanwhile (the new
        one's start-up, tens of seconds on a loaded machine, overlaps the leave)."""
        self.steps += 1
        joining = self.cluster.start_worker(next(self.names))
        if len(self.running) >= 3:
            leave(self.running.pop(next(iter(self.running))))
        joining.wait_ready()
        self.running[joining.name] = joining

    def rebalances(self, after: int) -> list[float]:
        """When each generation after ``after`` was joined, in order."""
        return sorted(t for g, t in generations(self.cluster).items() if g > after)


def test_kill_9_during_a_rebalance(tmp_path: Path) -> None:
    """A third worker joins; the moment the first has revoked its partitions for the new
    assignment (the rebalance under way), it is killed -9. The group finishes the rebalance
    without it, and the two others finish the crawl."""
    origins, pages, delay = 4, 100, 0.2
    with crawling(tmp_path, "midway", origins, pages, delay, workers=2) as (
        cluster,
        servers,
        (first, _),
    ):
        wait_requests(servers, 40)
        group = re.escape(f"{cluster.env['STREAMCRAWL_TOPIC_PREFIX']}-worker")
        # aiokafka logs a non-empty set as a table on the lines after the message
        revoking = re.compile(
            rf"Revoking previously assigned partitions \n[^\[]*? for group {group}"
        )
        seen = len(first.log.read_bytes())
        third = cluster.start_worker("w3")  # joins: every member revokes and rejoins
        wait_until(
            lambda: revoking.search(first.log.read_bytes()[seen:].decode(errors="replace")),
            90,
            "w1 never revoked its partitions for the third worker",
            interval=0.02,
        )
        at_fault = requested(servers)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        # per-origin concurrency 1: at most one request per origin in flight at the kill
        check_crawl(cluster, servers, pages, delay, in_flight=origins, timeout=240)
        assert requested(servers) > at_fault  # the others went on
        assert third.metric("streamcrawl_fetch_pages_total") > 0  # and w3 got partitions
        assert check_table_copies(cluster) > 0  # every copy of `seen` whole


STUCK = Path(__file__).parent / "stuck_recovery"  # its sitecustomize injects the fault
STUCK_PAGES, STUCK_DELAY = 60, 0.2  # two origins


@contextmanager
def a_stuck_recovery(
    tmp_path: Path, **fault: str
) -> Iterator[tuple[Cluster, list[RemoteServer], Worker]]:
    """A crawl whose first worker fetches 20 pages and leaves; the second, started with the
    fault loaded and no table copy, recovers every partition from the changelogs but reads
    nothing of one partition of ``seen`` (moved to its end after Faust's seek, as in the
    stall once seen in the kill -9 loops). Yields the cluster, the servers and that worker."""
    with crawling(tmp_path, "stuck", 2, STUCK_PAGES, STUCK_DELAY) as (cluster, servers, (first,)):
        wait_requests(servers, 20)
        leave(first)
        path = os.pathsep.join(filter(None, [str(STUCK), os.environ.get("PYTHONPATH")]))
        second = cluster.start_worker(
            "w2", PYTHONPATH=path, STREAMCRAWL_FAULT_STUCK_TABLE="seen", **fault
        )
        yield cluster, servers, second


def check_stuck_crawl(cluster: Cluster, servers: list[RemoteServer]) -> None:
    check_crawl(
        cluster, servers, STUCK_PAGES, STUCK_DELAY,
        in_flight=partial(in_flight_at_revokes, cluster), timeout=240,
    )  # fmt: skip


def test_a_recovery_that_stops_reading_is_sought_again(tmp_path: Path) -> None:
    """Faust alone waits for the stuck partition forever; the worker's recovery watch seeks
    it again after ``STALL_S`` and the crawl completes."""
    with a_stuck_recovery(tmp_path) as (cluster, servers, second):
        check_stuck_crawl(cluster, servers)
        log = second.log.read_text(errors="replace")
        assert "fault: recovery of" in log, "the fault was not injected"
        assert "seeking it again" in log
        assert second.metric("streamcrawl_tables_recovery_reseeks_total") >= 1


def test_a_recovery_that_never_reads_stops_the_worker_and_another_takes_over(
    tmp_path: Path,
) -> None:
    """Every seek of the stuck partition lands at its end too: after two seeks the worker
    exits with an error naming the partition (its supervisor would restart it), and a worker
    started next recovers the partitions and finishes the crawl."""
    with a_stuck_recovery(tmp_path, STREAMCRAWL_FAULT_STUCK_ALWAYS="1") as (
        cluster,
        servers,
        second,
    ):
        assert second.proc.wait(180) != 0  # 2 x STALL_S after its recovery began, and a check
        cluster.workers.remove(second.proc)  # its exit is the promise, not a fault
        log = second.log.read_text(errors="replace")
        assert log.count("seeking it again") == 2
        assert "table recovery read nothing from" in log
        cluster.start_worker("w3")
        check_stuck_crawl(cluster, servers)
