"""``admin reshard`` on the real broker: a crawl stopped mid-way at 3 partitions, resharded to 6
and finished by two workers, keeps every promise of ``tests/integration/faults.py`` (0 URLs
lost, no page fetched twice, per-origin gaps at the server never under the delay), also when
the reshard is killed -9 mid-way and run again; a rerun of a finished one does nothing; the
lock, rollback and delete-old.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from streamcrawl.topology.admin import generation, topics
from streamcrawl.topology.admin.reshard.broker import Broker
from streamcrawl.topology.admin.reshard.lock import Lock
from tests.integration.faults import check_crawl, wait_requests
from tests.integration.site import STREAMCRAWL, Cluster, Worker, cli, serve_site

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

ORIGINS, PAGES, DELAY = 6, 30, 0.2  # one origin per partition of 6, each on a partition of 3


def stop(cluster: Cluster, worker: Worker) -> None:
    """SIGTERM, as `helm upgrade --set worker.replicas=0` does: in-flight fetches finish."""
    worker.proc.send_signal(signal.SIGTERM)
    worker.proc.wait(60)
    cluster.workers.remove(worker.proc)


def crawl_stopped_midway(cluster: Cluster, servers: list, crawl_id: str) -> None:
    first = cluster.start_worker("w1")
    first.wait_ready()
    cluster.seed([s.url("/") for s in servers], crawl_id, "--delay", str(DELAY))
    wait_requests(servers, ORIGINS * PAGES // 3)
    stop(cluster, first)


def finish_on_six(cluster: Cluster, servers: list) -> None:
    # w1 keeps the stopped worker's state dir (a pod keeps its volume): its tables of the old
    # generation must not be taken for the new one's
    workers = [cluster.start_worker(n, STREAMCRAWL_PARTITIONS="6") for n in ("w1", "w2")]
    for worker in workers:
        worker.wait_ready()
    # 0 refetches: the stopped worker finished its requests and the reshard carried their
    # outcomes over; gaps: the migrated origin state and the one-delay wait on assignment
    check_crawl(cluster, servers, PAGES, DELAY, in_flight=0)
    assert all(w.metric("streamcrawl_fetch_pages_total") > 0 for w in workers)


def copied_once(cluster: Cluster) -> int:
    """The events the reshard copied to the new inputs, each found there exactly once."""
    new = generation.at(cluster.settings(), generation.Generation(number=2, partitions=6))
    broker = Broker(new)
    try:
        names = [
            r.origin
            for short in ("frontier", "outcomes")
            for records in broker.read_all(
                topics.topic_name(new, short), dict.fromkeys(range(6))
            ).values()
            for r in records
            if r.origin is not None
        ]
    finally:
        broker.close()
    assert len(names) == len(set(names)), "an event copied twice"
    return len(names)


def reshard(cluster: Cluster, *flags: str) -> subprocess.CompletedProcess[str]:
    return cli(cluster.env, "admin", "reshard", *flags, timeout=120)


def rerun_does_nothing(cluster: Cluster, partitions: int, number: int) -> None:
    """``reshard --partitions`` at the count served: one line, exit 0, nothing changed."""
    served = generation.Generation(number=number, partitions=partitions)
    before = generation.read_pointer(cluster.settings())
    if before is None:  # never resharded: generation 1, no pointer yet
        assert number == 1
    else:
        assert (before.current, before.next) == (served, None)
    again = reshard(cluster, "--partitions", str(partitions))
    assert (again.returncode, again.stderr) == (0, ""), again.stderr
    assert again.stdout.splitlines() == [
        f"reshard: the topics already have {partitions} partitions (generation {number}): "
        "nothing to do"
    ]
    assert generation.read_pointer(cluster.settings()) == before
    settings = generation.at(cluster.settings(), served)
    broker = Broker(settings)
    try:
        counts = broker.partitions()
    finally:
        broker.close()
    for short in ("frontier", "outcomes", "counts"):  # (the budget topic has one)
        name = topics.topic_name(settings, short)
        assert counts.get(name) == partitions, (name, counts.get(name))


def test_a_crawl_stopped_at_3_partitions_finishes_on_6(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=3)
    try:
        with serve_site(ORIGINS, PAGES, spread=ORIGINS) as servers:
            crawl_stopped_midway(cluster, servers, "grow")
            done = reshard(cluster, "--partitions", "6")
            assert done.returncode == 0, done.stderr
            assert "generation 2 serves 6 partitions" in done.stdout
            hook = cli({**cluster.env, "STREAMCRAWL_PARTITIONS": "6"}, "admin", "create-topics")
            assert hook.returncode == 0, hook.stderr  # the chart's hook at the `helm upgrade`
            # a worker at the old count is refused once the topics moved on
            old = cluster.start_worker("old")  # STREAMCRAWL_PARTITIONS=3
            assert old.proc.wait(60) != 0
            cluster.workers.remove(old.proc)
            assert "kafka.partitions=6" in old.log.read_text()
            finish_on_six(cluster, servers)
            status = cli(cluster.env, "status", "--crawl-id", "grow", "--json")
            assert '"fetched": 180' in status.stdout, status.stdout
            rerun_does_nothing(cluster, 6, 2)  # as a deploy pipeline, the workers running
    finally:
        cluster.stop_all()


def test_a_reshard_killed_mid_way_runs_again_to_the_same_end(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=3)
    try:
        with serve_site(ORIGINS, PAGES, spread=ORIGINS) as servers:
            crawl_stopped_midway(cluster, servers, "kill")
            # killed while copying the uncommitted events, after writing the tables (before
            # the step is recorded: the rerun writes them again), before verifying
            for line_start in ("step topics done", "moved ", "step tables done"):
                run = subprocess.Popen(
                    [STREAMCRAWL, "admin", "reshard", "--partitions", "6"],
                    env={**os.environ, **cluster.env},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                assert run.stdout is not None
                for line in run.stdout:
                    if line.startswith(line_start):
                        run.send_signal(signal.SIGKILL)
                        break
                run.wait(30)
                pointer = generation.read_pointer(cluster.settings())
                assert pointer is not None and pointer.next is not None  # not switched
                if line_start == "moved ":  # no worker starts on a generation half made
                    refused = cluster.start_worker("early", STREAMCRAWL_PARTITIONS="6")
                    assert refused.proc.wait(60) != 0
                    cluster.workers.remove(refused.proc)
                    assert "a reshard to 6 partitions is under way" in refused.log.read_text()
            done = reshard(cluster, "--partitions", "6")
            assert done.returncode == 0, done.stderr
            assert "resuming generation 2 after step" in done.stdout
            assert copied_once(cluster)
            finish_on_six(cluster, servers)
    finally:
        cluster.stop_all()


def test_lock_rollback_delete_old_and_bad_input(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=3)
    try:
        for flags, message in [
            (["--partitions", "0"], "--partitions"),
            (["--partitions", "4", "--rollback"], "exactly one of"),
        ]:
            bad = reshard(cluster, *flags)
            assert bad.returncode == 2 and message in bad.stderr, bad.stderr
            assert len(bad.stderr.strip().splitlines()) == 1
        missing = cli({**cluster.env, "STREAMCRAWL_TOPIC_PREFIX": "none-such"}, "admin",
                      "reshard", "--partitions", "4")  # fmt: skip
        assert missing.returncode == 1 and "no topics" in missing.stderr
        worker = cluster.start_worker("w1")
        worker.wait_ready()
        rerun_does_nothing(cluster, 3, 1)  # the count it has: nothing to stop for
        running = reshard(cluster, "--partitions", "4")
        assert running.returncode == 1 and "still run" in running.stderr, running.stderr
        stop(cluster, worker)
        held = Lock(cluster.settings())
        held.acquire()
        try:
            busy = reshard(cluster, "--partitions", "4")
            assert busy.returncode == 1 and "another" in busy.stderr, busy.stderr
            assert len(busy.stderr.strip().splitlines()) == 1
        finally:
            held.release()
        assert reshard(cluster, "--partitions", "4").returncode == 0
        rerun_does_nothing(cluster, 4, 2)
        back = reshard(cluster, "--rollback")
        assert back.returncode == 0, back.stderr
        pointer = generation.read_pointer(cluster.settings())
        assert pointer is not None and pointer.current.number == 1
        assert pointer.current.partitions == 3
        again = reshard(cluster, "--partitions", "2")  # a new number: 3, never 2 again
        assert again.returncode == 0 and "generation 3 serves 2" in again.stdout, again.stderr
        gone = reshard(cluster, "--delete-old")
        assert gone.returncode == 0, gone.stderr
        time.sleep(1)
        broker = Broker(cluster.settings())
        names = broker.partitions()
        broker.close()
        prefix = cluster.settings().topic_prefix
        assert f"{prefix}.g3.frontier" in names and f"{prefix}.pages" in names
        assert f"{prefix}.frontier" not in names and f"{prefix}.g2.frontier" not in names
        assert topics.changelog_name(cluster.settings(), "seen") not in names
    finally:
        cluster.stop_all()
