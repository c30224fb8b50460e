"""Service outages mid-crawl, with real processes: a private Kafka + Cassandra (never the
suite's shared ones) is stopped and resumed with its data by ``scripts/services.sh``.

For each outage: ``/readyz`` turns false once the service has been unreachable for longer
than ``STREAMCRAWL_UNREADY_AFTER_S`` and true again after; and the promises of
``tests/integration/faults.py`` hold: the crawl completes with every URL in exactly one
terminal state, no duplicate rows, refetches bounded by the requests in flight at the fault,
and every per-origin gap at least the delay as the server's kernel saw the requests arrive.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.faults import check_crawl, crawling, wait_requests, wait_until
from tests.integration.site import ROOT, Worker

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration, pytest.mark.slow]

SERVICES = str(ROOT / "scripts" / "services.sh")
UNREADY_AFTER = 10.0
ORIGINS, PAGES, DELAY = 2, 80, 0.3


def services(state: Path, *args: str) -> None:
    subprocess.run(
        [SERVICES, *args],
        env={**os.environ, "STREAMCRAWL_SERVICES_DIR": str(state)},
        check=True,
        capture_output=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A Kafka and a Cassandra of this module's own; stopped at the end. For a rerun during
    development, ``STREAMCRAWL_FAULTS_SERVICES_DIR`` names a private instance already started
    (never the shared one: these tests stop its services)."""
    given = os.environ.get("STREAMCRAWL_FAULTS_SERVICES_DIR")
    if given:
        yield Path(given)
        return
    state = tmp_path_factory.mktemp("services")
    services(state, "start")
    try:
        yield state
    finally:
        services(state, "stop")


def private_env(state: Path) -> dict[str, str]:
    env = {}
    for line in (state / "env").read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key.strip()] = value.strip().strip("'\"")
    return env


def wait_readyz(worker: Worker, status: int, timeout: float) -> str:
    """Poll ``/readyz`` until it answers ``status``; its text."""
    _, text = wait_until(
        lambda: (reply := worker.get("/readyz"))[0] == status and reply,
        timeout,
        f"/readyz not {status}",
        interval=0.5,
    )
    return text


@pytest.mark.parametrize(("service", "outage"), [("kafka", 30.0), ("cassandra", 60.0)])
def test_an_outage_mid_crawl(
    service: str, outage: float, private: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in private_env(private).items():
        monkeypatch.setenv(key, value)
    worker_env = {"STREAMCRAWL_UNREADY_AFTER_S": str(UNREADY_AFTER)}
    try:
        with crawling(tmp_path, "outage", ORIGINS, PAGES, DELAY, **worker_env) as (
            cluster,
            servers,
            (worker,),
        ):
            wait_requests(servers, 30)
            stopped = time.monotonic()
            services(private, "stop", service)
            why = wait_readyz(worker, 503, UNREADY_AFTER + 30)
            assert time.monotonic() - stopped >= UNREADY_AFTER  # not before the grace
            assert f"{service} unreachable" in why
            time.sleep(max(0.0, outage - (time.monotonic() - stopped)))
            services(private, "resume", service)
            wait_readyz(worker, 200, 90)
            # per_origin_concurrency 1 and 4 x concurrency unapplied at most: a refetch is a
            # request whose outcome was not applied when the service went away.
            figures = check_crawl(cluster, servers, PAGES, DELAY, in_flight=ORIGINS, timeout=240)
            print(f"{service} stopped {outage:.0f} s: {figures}")
            assert worker.metric("streamcrawl_health_reconnects_total", dependency=service) >= 1
            if service == "cassandra":
                assert worker.metric("streamcrawl_sink_retries_total") >= 1
    finally:
        services(private, "resume", service)  # a no-op if it runs
