"""The SSRF guard in both wirings: links to non-public addresses end ``blocked``, the crawl's own
seed addresses are allowed, and nothing is ever dialled outside loopback.

Every "internal" server here listens on another loopback address (127.0.0.2, ::1) so that the
test can prove it got no request; link-local and private answers come from a test resolver.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamcrawl.agents.net.guard import parse_networks
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.fakedns import StaticResolver, spy_dials
from tests.httpserver import RecordingServer, html
from tests.integration.site import Cluster

STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")


def links_page(*hrefs: str) -> object:
    return html("<title>seed</title>" + "".join(f'<a href="{h}">x</a>' for h in hrefs))


async def test_embedded_crawl_blocks_links_to_internal_addresses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dialled = spy_dials(monkeypatch)
    resolver = StaticResolver({"intranet.test": [["10.20.30.40"]]})
    async with (
        RecordingServer({"/in": html("<title>in</title>")}, host="127.0.0.2") as inner,
        RecordingServer() as srv,
    ):
        srv.routes["/"] = links_page(
            "/ok",
            f"{inner.origin}/in",  # another loopback address: not a seed address
            "http://169.254.169.254/latest/meta-data/",
            "http://intranet.test/wiki",
        )
        srv.routes["/ok"] = html("<title>ok</title>")
        policy = CrawlPolicy(
            crawl_id="ssrf",
            seeds=(srv.url("/"),),
            allow_hosts=("127.0.0.2", "169.254.169.254", "intranet.test"),
            delay=0.0,
        )
        summary = await EmbeddedCrawl(
            policy, out_dir=tmp_path / "out", state_dir=tmp_path / "st", resolver=resolver
        ).run()
    urls = {
        u["url"]: u for u in map(json.loads, (tmp_path / "out/urls.jsonl").read_text().splitlines())
    }
    assert summary.states == {"fetched": 2, "blocked": 3}
    blocked = {url: u["last_error"] for url, u in urls.items() if u["state"] == "blocked"}
    assert blocked.keys() == {
        f"{inner.origin}/in",
        "http://169.254.169.254/latest/meta-data/",
        "http://intranet.test/wiki",
    }
    assert "(127.0.0.2)" in blocked[f"{inner.origin}/in"]
    assert "(169.254.169.254)" in blocked["http://169.254.169.254/latest/meta-data/"]
    assert "(10.20.30.40)" in blocked["http://intranet.test/wiki"]
    assert inner.log == []  # not even its robots.txt
    assert set(dialled) == {"127.0.0.1"}


async def test_embedded_allow_network_opens_exactly_that_network(tmp_path: Path) -> None:
    async with (
        RecordingServer({"/in": html("<title>in</title>")}, host="127.0.0.2") as inner,
        RecordingServer() as srv,
    ):
        srv.routes["/"] = links_page(f"{inner.origin}/in")
        policy = CrawlPolicy(
            crawl_id="allowed", seeds=(srv.url("/"),), allow_hosts=("127.0.0.2",), delay=0.0
        )
        summary = await EmbeddedCrawl(
            policy,
            out_dir=tmp_path / "out",
            state_dir=tmp_path / "st",
            allow_networks=parse_networks(["127.0.0.2/32"]),
        ).run()
    assert summary.states == {"fetched": 2}
    assert inner.paths() == ["/robots.txt", "/in"]


def test_cli_allow_network_flag_and_env(tmp_path: Path) -> None:
    with (
        RecordingServer({"/in": html("<title>in</title>")}, host="127.0.0.2") as inner,
        RecordingServer() as srv,
    ):
        srv.routes["/"] = links_page(f"{inner.origin}/in")
        argv = [STREAMCRAWL, "crawl", srv.url("/"), "--allow-host", "127.0.0.2", "--delay", "0"]
        common = {"capture_output": True, "text": True, "timeout": 60}
        denied = subprocess.run(
            [*argv, "--json", "--out", str(tmp_path / "a"), "--state-dir", str(tmp_path / "sa")],
            **common,  # type: ignore[call-overload]
        )
        env_allowed = subprocess.run(
            [*argv, "--json", "--out", str(tmp_path / "b"), "--state-dir", str(tmp_path / "sb")],
            env={"PATH": "/usr/bin:/bin", "STREAMCRAWL_ALLOW_NETWORKS": "127.0.0.0/8"},
            **common,  # type: ignore[call-overload]
        )
        bad = subprocess.run([*argv, "--allow-network", "10.0.0.0/40"], **common)  # type: ignore[call-overload]
    assert json.loads(denied.stdout)["states"] == {"blocked": 1, "fetched": 1}
    assert json.loads(env_allowed.stdout)["states"] == {"fetched": 2}
    assert inner.paths() == ["/robots.txt", "/in"]
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "streamcrawl: error: allow-network entry '10.0.0.0/40' is not a CIDR such as "
        "10.0.0.0/8: '10.0.0.0/40' does not appear to be an IPv4 or IPv6 network"
    ]


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.integration
def test_kafka_worker_blocks_what_its_allow_list_does_not_cover(tmp_path: Path) -> None:
    """The worker allows only 127.0.0.1 here: the link to 127.0.0.2 ends ``blocked`` with the
    address in last_error, the metric counts it (robots.txt and page), and 127.0.0.2 got nothing."""
    cluster = Cluster.create(tmp_path, partitions=2)
    try:
        with (
            RecordingServer({"/in": html("<title>in</title>")}, host="127.0.0.2") as inner,
            RecordingServer() as srv,
        ):
            srv.routes["/"] = links_page(f"{inner.origin}/in")
            worker = cluster.start_worker("w1", STREAMCRAWL_ALLOW_NETWORKS="127.0.0.1/32")
            worker.wait_ready()
            cluster.seed([srv.url("/")], "ssrf", "--allow-host", "127.0.0.2", "--delay", "0")
            cluster.wait_states(2, timeout=90)
            rows = cluster.query("SELECT url, state, last_error FROM {ks}.url_status")
            blocked = worker.metric("streamcrawl_fetch_blocked_total")
        states = {r.url: (r.state, r.last_error) for r in rows}
        assert states[srv.url("/")][0] == "fetched"
        state, error = states[f"{inner.origin}/in"]
        assert state == "blocked" and "(127.0.0.2)" in error
        assert blocked == 2
        assert inner.log == []
    finally:
        cluster.stop_all()
