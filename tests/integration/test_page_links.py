"""A page record carries its outlinks (schema v3) in every place a consumer reads pages: the
embedded crawl's ``pages.jsonl``, the ``pages`` topic, Cassandra's ``pages`` row and the
``streamcrawl pages`` command; and a page of 100,000 links stays bounded in all of them."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from confluent_kafka import Consumer

from streamcrawl.agents.sinks.contract import url_hash
from streamcrawl.schemas.records import DEFAULT_PAGE_LINKS, SCHEMA_VERSION
from tests.httpserver import RecordingServer, html, text
from tests.integration.site import Cluster, cli, service_env

pytestmark = [pytest.mark.integration]

HOME = """<html><head><title>Home</title><link rel=next href=/b></head><body>
<a href="/a" rel="nofollow ugc">  Alpha
   <b>page</b> </a>
<a href="/b">Beta</a> <a href="/b#part" rel="sponsored">Beta again</a>
<a href="http://other.invalid/x">Elsewhere</a>
<a href="mailto:someone@example.org">mail</a>
<iframe src="/f"></iframe>
</body></html>"""


def routes() -> dict[str, Any]:
    return {
        "/robots.txt": text("User-agent: *\nAllow: /\n"),
        "/": html(HOME, headers={"Link": "</h>; rel=next"}),
        "/a": html("<title>A</title>"),
        "/b": html("<title>B</title><a href=/>home</a>"),
        "/f": html("<title>F</title>"),
        "/h": html("<title>H</title>"),
    }


def expected_links(origin: str) -> list[dict[str, Any]]:
    """Home's links as its record lists them: canonical, deduplicated, in document order."""
    return [
        # <link rel=next> came first; the <a>s give it their text, and share no rel with it
        {"url": f"{origin}/b", "text": "Beta", "tag": "link"},
        {"url": f"{origin}/a", "text": "Alpha page", "rel": ["nofollow", "ugc"]},
        {"url": "http://other.invalid/x", "text": "Elsewhere", "in_scope": False,
         "scope_rule": "host"},
        {"url": f"{origin}/f", "tag": "iframe"},
        {"url": f"{origin}/h", "tag": "header"},
    ]  # fmt: skip


def huge_page(n: int) -> str:
    return "".join(f'<a href="/l/{i:06d}" rel=ugc>link number {i}</a>' for i in range(n))


def out(tmp: Path) -> tuple[str, ...]:
    return ("--out", str(tmp / "out"), "--state-dir", str(tmp / "state"))


def pages_jsonl(directory: Path) -> dict[str, dict[str, Any]]:
    lines = (directory / "pages.jsonl").read_text("utf-8").splitlines()
    return {page["url"]: page for page in map(json.loads, lines)}


# --- the embedded crawl: pages.jsonl -----------------------------------------------------------


def test_pages_jsonl_carries_each_pages_links(tmp_path: Path) -> None:
    with RecordingServer(routes()) as srv:  # type: ignore[arg-type]
        result = cli({}, "crawl", srv.url("/"), *out(tmp_path), "--delay", "0")
        assert result.returncode == 0, result.stderr
    pages = pages_jsonl(tmp_path / "out")
    home = pages[srv.url("/")]
    assert home["v"] == SCHEMA_VERSION
    assert home["links"] == expected_links(srv.origin)
    assert home["links_total"] == 5 and home["links_truncated"] is False
    # outlinks keeps its meaning: the URLs handed to the frontier (nofollow /a is not)
    assert home["outlinks"] == 4
    assert pages[srv.url("/b")]["links"] == [{"url": srv.url("/"), "text": "home"}]
    assert "/a" not in srv.paths()  # nofollow: listed, not followed


def test_max_page_links_bounds_the_list_not_the_count(tmp_path: Path) -> None:
    with RecordingServer(routes()) as srv:  # type: ignore[arg-type]
        result = cli(
            {}, "crawl", srv.url("/"), *out(tmp_path), "--delay", "0",
            "--max-depth", "0", "--max-page-links", "2",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    (home,) = pages_jsonl(tmp_path / "out").values()
    assert [link["url"] for link in home["links"]] == [srv.url("/b"), srv.url("/a")]
    assert home["links"][0]["scope_rule"] == "depth"  # one level below max_depth
    assert home["links_total"] == 5 and home["links_truncated"] is True
    assert home["outlinks"] == 0  # past max_depth nothing is sent


def test_a_page_of_100k_links_stays_bounded_in_pages_jsonl(tmp_path: Path) -> None:
    with RecordingServer({"/": html(huge_page(100_000))}) as srv:  # type: ignore[arg-type]
        result = cli(
            {}, "crawl", srv.url("/"), *out(tmp_path), "--delay", "0",
            "--max-depth", "0", "--ignore-robots", timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    line = (tmp_path / "out" / "pages.jsonl").read_bytes()
    home = json.loads(line)
    assert len(home["links"]) == DEFAULT_PAGE_LINKS
    assert home["links_total"] == 100_000 and home["links_truncated"] is True
    assert home["links"][-1] == {
        "url": srv.url("/l/000999"),
        "text": "link number 999",
        "rel": ["ugc"],
        "in_scope": False,
        "scope_rule": "depth",
    }
    assert len(line) < 200 * 1024  # 1,000 links of ~110 bytes, not 100,000


# --- the Kafka wiring: the pages topic, Cassandra, `streamcrawl pages` ----------------------------


def read_pages(cluster: Cluster, count: int, timeout: float = 60) -> list[tuple[bytes, bytes]]:
    """(key, value) of the first ``count`` messages of the cluster's pages topic."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.env["STREAMCRAWL_KAFKA_BOOTSTRAP"],
            "group.id": f"g{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "fetch.message.max.bytes": 16 * 1024 * 1024,
        }
    )
    consumer.subscribe([f"{cluster.env['STREAMCRAWL_TOPIC_PREFIX']}.pages"])
    found: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(found) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            key, value = msg.key(), msg.value()
            assert key is not None and value is not None
            found.append((key, value))
    finally:
        consumer.close()
    assert len(found) == count, f"{len(found)}/{count} pages on the topic"
    return found


def cassandra_links(cluster: Cluster, crawl_id: str, url: str) -> tuple[Any, ...]:
    (row,) = cluster.query(
        "SELECT links, links_total, links_truncated FROM {ks}.pages "
        f"WHERE crawl_id = '{crawl_id}' AND url_hash = '{url_hash(url)}'"
    )
    return json.loads(row.links), row.links_total, row.links_truncated


@pytest.mark.kafka
@pytest.mark.cassandra
def test_the_kafka_wiring_carries_links_to_the_topic_cassandra_and_the_pages_command(
    tmp_path: Path,
) -> None:
    cluster = Cluster.create(tmp_path, partitions=2)
    try:
        with RecordingServer(routes()) as srv:  # type: ignore[arg-type]
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([srv.url("/")], "links", "--delay", "0")
            states = cluster.wait_states(5, timeout=120)  # /, /b, /f, /h and the off-site link
        assert sorted(states.values()) == ["fetched"] * 4 + ["out_of_scope"]  # /a: nofollow
        want = expected_links(srv.origin)
        by_url = {}
        for key, value in read_pages(cluster, 4):
            page = json.loads(value)
            assert key == page["origin"].encode() and page["v"] == SCHEMA_VERSION
            by_url[page["url"]] = page
        home = by_url[srv.url("/")]
        assert home["links"] == want and home["links_total"] == 5 and home["outlinks"] == 4
        assert cassandra_links(cluster, "links", srv.url("/")) == (want, 5, False)
        printed = cli(cluster.env, "pages", "--from-beginning", "--crawl-id", "links")
        assert printed.returncode == 0, printed.stderr
        lines = {p["url"]: p for p in map(json.loads, printed.stdout.splitlines())}
        assert lines[srv.url("/")]["links"] == want
        assert lines[srv.url("/b")]["links"] == [{"url": srv.url("/"), "text": "home"}]
    finally:
        cluster.stop_all()


@pytest.mark.kafka
@pytest.mark.cassandra
@pytest.mark.slow
def test_a_page_of_100k_links_fits_the_pages_topic_and_is_fetched_once(tmp_path: Path) -> None:
    """With every link listed (``--max-page-links 100000``) the record would be ~11 MB; the
    topic takes 1 MiB here: the record is cut to the links that fit, published at the first
    attempt, stored, and says it was cut."""
    limit = 1024 * 1024
    services = {**service_env(), "STREAMCRAWL_MAX_MESSAGE_BYTES": str(limit)}
    cluster = Cluster.create(tmp_path, partitions=2, services=services)
    try:
        routes = {"/robots.txt": text("User-agent: *\nAllow: /\n"), "/": html(huge_page(100_000))}
        with RecordingServer(routes) as srv:  # type: ignore[arg-type]
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed(
                [srv.url("/")], "huge", "--delay", "0", "--max-depth", "0",
                "--max-page-links", "100000",
            )  # fmt: skip
            assert cluster.wait_states(1, timeout=180) == {srv.url("/"): "fetched"}
            assert srv.paths().count("/") == 1
            assert worker.metric("streamcrawl_kafka_publish_failures_total") == 0
        ((_key, value),) = read_pages(cluster, 1)
        assert len(value) <= limit
        home = msgspec.json.decode(value)
        assert home["links_total"] == 100_000 and home["links_truncated"] is True
        n = len(home["links"])
        assert 5_000 < n < 100_000  # as many as fit in 1 MiB, in document order
        assert [link["url"] for link in home["links"]] == [srv.url(f"/l/{i:06d}") for i in range(n)]
        links, total, truncated = cassandra_links(cluster, "huge", srv.url("/"))
        assert len(links) == n and total == 100_000 and truncated is True
    finally:
        cluster.stop_all()
