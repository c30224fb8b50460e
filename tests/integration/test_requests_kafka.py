"""Requests users shape, in the Kafka wiring against the real services: a ``worker`` process
that holds a credential and goes through Debian's tinyproxy, a crawl ``seed``-ed with headers,
cookies and a credential name, and the credential searched for in everything the processes
wrote (worker log at DEBUG, every topic's messages, ``status``/``pages`` output, Cassandra's
rows), as ``test_secrets.py`` does for the services' passwords. Also: a worker whose proxy
refuses connections exits 1 with one line before it starts.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.request_site import USER, Site, request_site
from tests.integration.site import STREAMCRAWL, Cluster, cli, free_port
from tests.integration.test_secrets import topic_bytes
from tests.proxy import tinyproxy

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

CANARY = "canary-" + uuid.uuid4().hex


@contextmanager
def site_in_thread() -> Iterator[Site]:
    """``request_site`` served from a thread of its own (the test itself is synchronous)."""
    loop = asyncio.new_event_loop()
    ready: list[Site] = []
    stop = asyncio.Event()

    async def serve() -> None:
        async with request_site(CANARY) as site:
            ready.append(site)
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    try:
        while not ready:
            thread.join(0.05)
            assert thread.is_alive()
        yield ready[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def test_a_worker_crawls_a_login_protected_site_through_the_proxy(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=2)
    credential = {"STREAMCRAWL_CREDENTIAL_SITE_B": f"basic:{USER}:{CANARY}"}
    try:
        with tinyproxy(tmp_path / "proxy") as proxy, site_in_thread() as site:
            worker = cluster.start_worker(
                "w1", STREAMCRAWL_LOG_LEVEL="DEBUG", STREAMCRAWL_PROXY=proxy.url, **credential
            )
            worker.wait_ready()
            seeded = cli(
                cluster.env,
                "seed",
                site.a.url("/"),
                "--crawl-id",
                "login",
                "--delay",
                "0",
                "--header",
                "X-Team: blue",
                "--cookies",
                "--auth-for",
                site.b.origin,
                "SITE_B",
            )
            assert seeded.returncode == 0, seeded.stderr
            states = cluster.wait_states(len(site.expected_fetched()), timeout=120)
            assert {u for u, s in states.items() if s == "fetched"} == site.expected_fetched()
            assert all(r.headers.get("Authorization") == site.basic for r in site.b.log)
            assert not any("Authorization" in r.headers for r in site.a.log)
            assert site.a.requests("/members/2")[0].headers.get("Cookie", "").startswith("sid=")
            served = len(site.a.log) + len(site.b.log)
            assert len(proxy.requests()) == served  # every request went through the proxy
            outputs = [
                cli(cluster.env, "status", "--crawl-id", "login", "--json"),
                cli(cluster.env, "pages", "--crawl-id", "login", "--from-beginning"),
            ]
            assert all(p.returncode == 0 for p in outputs), [p.stderr for p in outputs]
            rows = [str(r) for r in cluster.query("SELECT * FROM {ks}.pages")]
            messages = topic_bytes(
                cluster.env["STREAMCRAWL_KAFKA_BOOTSTRAP"], cluster.env["STREAMCRAWL_TOPIC_PREFIX"]
            )
            worker.proc.send_signal(signal.SIGTERM)
            worker.proc.wait(60)
    finally:
        cluster.stop_all()
    secrets = (CANARY.encode(), site.basic.split()[1].encode())
    log = worker.log.read_bytes()
    assert b"DEBUG" in log and not any(s in log for s in secrets)
    for proc in [seeded, *outputs]:
        assert not any(s.decode() in proc.stdout + proc.stderr for s in secrets), proc.args
    assert rows and not any(s.decode() in row for row in rows for s in secrets)
    assert messages and not any(s in m for m in messages for s in secrets)
    assert any(b"SITE_B" in m for m in messages)  # the spec names the credential, no more


def test_a_worker_whose_proxy_refuses_connections_exits_1_with_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    env = {
        "STREAMCRAWL_PROXY": f"http://127.0.0.1:{port}",
        "STREAMCRAWL_STATE_DIR": str(tmp_path / "state"),
    }
    done = cli(env, "worker", timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"streamcrawl: the proxy http://127.0.0.1:{port} (--proxy / STREAMCRAWL_PROXY) does not "
        "accept connections: ConnectionRefusedError"
    ]
    assert STREAMCRAWL  # the installed command ran
