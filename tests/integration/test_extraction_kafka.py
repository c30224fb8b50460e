"""Extraction without code through the Kafka wiring against the real broker and Cassandra: a
crawl seeded with ``--extract`` and ``--text`` (``streamcrawl seed``, a worker process) carries
each page's ``data``, main text and language on the ``pages`` topic, in Cassandra's ``pages``
row and in what ``streamcrawl pages`` prints."""

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
        "/t/blue": html(
            "<title>Blue</title><article><p>A blue mug holds a large coffee and keeps it warm "
            "for a long time, which is why it is the shop's favourite.</p></article>"
        ),
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
            cluster.seed([srv.url("/")], "shop", "--delay", "0", "--text", *EXTRACT)
            states = cluster.wait_states(3, timeout=120)
        assert sorted(states.values()) == ["fetched"] * 3
        paths = ("/", "/t/kitchen", "/t/blue")
        on_topic, texts = {}, {}
        for key, value in read_pages(cluster, 3):
            page = json.loads(value)
            assert key == page["origin"].encode() and page["v"] == SCHEMA_VERSION
            on_topic[page["url"]] = page["data"]
            texts[page["url"]] = (page["main_text"], page["language"])
        assert on_topic == {srv.url(p): expected(p) for p in paths}
        blue = texts[srv.url("/t/blue")]
        assert blue[1] == "en" and blue[0] is not None and "keeps it warm" in blue[0]
        for p in paths:
            (row,) = cluster.query(
                "SELECT data, main_text, language FROM {ks}.pages "
                f"WHERE crawl_id = 'shop' AND url_hash = '{url_hash(srv.url(p))}'"
            )
            assert json.loads(row.data) == expected(p)
            assert (row.main_text, row.language) == texts[srv.url(p)]
        printed = cli(cluster.env, "pages", "--from-beginning", "--crawl-id", "shop")
        assert printed.returncode == 0, printed.stderr
        lines = {p["url"]: p["data"] for p in map(json.loads, printed.stdout.splitlines())}
        assert lines == on_topic
    finally:
        cluster.stop_all()
