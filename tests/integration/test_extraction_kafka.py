"""Extraction without code through the Kafka wiring against the real broker and Cassandra: a
crawl seeded with ``--extract`` (``streamcrawl seed``, a worker process) carries each page's
``data`` on the ``pages`` topic, in Cassandra's ``pages.data`` column and in what
``streamcrawl pages`` prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamcrawl.agents.sinks.contract import url_hash
from streamcrawl.schemas.records import SCHEMA_VERSION
from tests.httpserver import RecordingServer, html, text
from tests.integration.site import Cluster, cli
from tests.integration.test_page_links import read_pages

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.cassandra]


def routes() -> dict[str, Any]:
    return {
        "/robots.txt": text("User-agent: *\nAllow: /\n"),
        "/": html(
            "<title>Shop</title><h1 class=name>Blue  mug</h1><span class=price>9.99</span>"
            "<a class=tag href=/t/kitchen>kitchen</a><a class=tag href=/t/blue>blue</a>"
        ),
        "/t/kitchen": html("<title>Kitchen</title><h1 class=name>Kitchen</h1>"),
        "/t/blue": html("<title>Blue</title>"),
    }


EXTRACT = ("--extract", "name=h1.name", "--extract", "price=.price::text",
           "--extract", "tags=all:a.tag::attr(href)")  # fmt: skip


def expected(path: str) -> dict[str, Any]:
    return {
        "/": {"name": "Blue mug", "price": "9.99", "tags": ["/t/kitchen", "/t/blue"]},
        "/t/kitchen": {"name": "Kitchen", "price": None, "tags": []},
        "/t/blue": {"name": None, "price": None, "tags": []},
    }[path]


def test_the_kafka_wiring_carries_data_to_the_topic_cassandra_and_the_pages_command(
    tmp_path: Path,
) -> None:
    cluster = Cluster.create(tmp_path, partitions=2)
    try:
        with RecordingServer(routes()) as srv:  # type: ignore[arg-type]
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([srv.url("/")], "shop", "--delay", "0", *EXTRACT)
            states = cluster.wait_states(3, timeout=120)
        assert sorted(states.values()) == ["fetched"] * 3
        paths = ("/", "/t/kitchen", "/t/blue")
        on_topic = {}
        for key, value in read_pages(cluster, 3):
            page = json.loads(value)
            assert key == page["origin"].encode() and page["v"] == SCHEMA_VERSION
            on_topic[page["url"]] = page["data"]
        assert on_topic == {srv.url(p): expected(p) for p in paths}
        for p in paths:
            (row,) = cluster.query(
                "SELECT data FROM {ks}.pages "
                f"WHERE crawl_id = 'shop' AND url_hash = '{url_hash(srv.url(p))}'"
            )
            assert json.loads(row.data) == expected(p)
        printed = cli(cluster.env, "pages", "--from-beginning", "--crawl-id", "shop")
        assert printed.returncode == 0, printed.stderr
        lines = {p["url"]: p["data"] for p in map(json.loads, printed.stdout.splitlines())}
        assert lines == on_topic
    finally:
        cluster.stop_all()
