"""Crawl plugins in the Kafka wiring against the real broker and Cassandra: worker processes
(``streamcrawl worker``) that have the example package (``examples/plugins``) by entry point,
crawls ``seed``-ed with one plugin of each kind, checked on the wire (what the site was asked),
in Cassandra's rows and in what ``streamcrawl pages`` prints; and a worker that lacks a plugin a
crawl names (docs/plugins.md, "A worker without the plugin").

The package is not installed into the test's environment (a worker without it must stay
possible, and other tests must not see its plugins): ``example_plugins_env`` lays out what an
install would add to ``sys.path``, the package's sources and a ``.dist-info`` with the entry
points of its own ``pyproject.toml``, for the processes given it on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from streamcrawl.agents.sinks.contract import url_hash
from tests.httpserver import RecordingServer, html, text
from tests.integration.site import Cluster, cli
from tests.integration.test_page_links import read_pages
from tests.plugin_fixtures import example_plugins_env

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

MISSING = "missing_plugin: price is not installed in this worker"
CRAWLS = ("needs", "plain")


def routes() -> dict[str, Any]:
    listed = json.dumps({"links": ["/listed"]})
    return {
        "/robots.txt": text("User-agent: *\nAllow: /\n"),
        "/": html(
            "<title>Shop</title><span class=price>1.234,50 €</span><a href=/a?x=1>a</a>"
            "<a href='/facets?a=1&b=2&c=3&d=4'>facets</a>"
            f'<script type="application/json">{listed}</script>'
        ),
        "/a": html("<title>A</title>"),
        "/listed": html("<title>Listed</title><p class=price>$12.00</p>"),
        "/facets": html("<title>Facets</title>"),
    }


SHOP = ("--plugin", 'max_query_params={"max": 3}', "--plugin", "json_links", "--plugin", "price")
BROKEN = ("--plugin", 'price={"selector": "p[["}', "--max-depth", "0")


def url_rows(cluster: Cluster) -> dict[tuple[str, str], tuple[str, str]]:
    """(crawl id, URL) -> (state, last_error) of ``url_status``."""
    rows = cluster.query("SELECT crawl_id, url, state, last_error FROM {ks}.url_status")
    return {(r.crawl_id, r.url): (r.state, r.last_error) for r in rows}


def page_row(cluster: Cluster, crawl_id: str, url: str) -> Any:
    (row,) = cluster.query(
        "SELECT data, plugin_errors FROM {ks}.pages "
        f"WHERE crawl_id = '{crawl_id}' AND url_hash = '{url_hash(url)}'"
    )
    return row


def wait_rows(cluster: Cluster, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(url_rows(cluster)) < count:
        assert all(p.poll() is None for p in cluster.workers), "a worker exited"
        assert time.monotonic() < deadline, cluster.diagnosis()
        time.sleep(1.0)


def test_a_worker_runs_each_kind_of_the_example_plugins(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=2)
    env = example_plugins_env(tmp_path)
    try:
        with RecordingServer(routes()) as srv:  # type: ignore[arg-type]
            cluster.start_worker("w1", **env).wait_ready()
            for crawl_id, flags in (("shop", SHOP), ("broken", BROKEN)):
                seeded = cli({**cluster.env, **env}, "seed", srv.url("/"), "--crawl-id",
                             crawl_id, "--delay", "0", *flags)  # fmt: skip
                assert seeded.returncode == 0, seeded.stderr
            wait_rows(cluster, 5)
            paths = srv.paths()
        check_shop(cluster, srv)
        broken = page_row(cluster, "broken", srv.url("/"))
        assert broken.data is None
        assert broken.plugin_errors == ["price: SelectolaxError: Can't parse CSS selector."]
        assert sorted(p for p in paths if p != "/robots.txt") == ["/", "/", "/a?x=1", "/listed"]
        printed = cli(cluster.env, "pages", "--from-beginning", "--crawl-id", "broken")
        assert printed.returncode == 0, printed.stderr
        (line,) = map(json.loads, printed.stdout.splitlines())
        assert line["plugin_errors"] == broken.plugin_errors
    finally:
        cluster.stop_all()


def check_shop(cluster: Cluster, srv: RecordingServer) -> None:
    """The URL filter's refusal, the link extractor's link and the page extractor's data of
    the ``shop`` crawl: in ``url_status``, the ``pages`` rows and ``pages`` output."""
    facets = srv.url("/facets?a=1&b=2&c=3&d=4")
    assert {u: s for (c, u), s in url_rows(cluster).items() if c == "shop"} == {
        srv.url("/"): ("fetched", ""),
        srv.url("/a?x=1"): ("fetched", ""),
        srv.url("/listed"): ("fetched", ""),  # only the JSON blob lists it
        facets: ("out_of_scope", "max_query_params: 4 query parameters, over 3"),
    }
    expected = {
        srv.url("/"): {"amount": 1234.5, "currency": "EUR", "raw": "1.234,50 €"},
        srv.url("/a?x=1"): {"amount": None, "currency": "EUR", "raw": None},
        srv.url("/listed"): {"amount": 12.0, "currency": "USD", "raw": "$12.00"},
    }
    for url, price in expected.items():
        row = page_row(cluster, "shop", url)
        assert (json.loads(row.data), list(row.plugin_errors or ())) == ({"price": price}, [])
    on_topic = [json.loads(v) for _k, v in read_pages(cluster, 4)]
    assert {p["url"]: p["data"] for p in on_topic if p["crawl_id"] == "shop"} == {
        u: {"price": p} for u, p in expected.items()
    }
    printed = cli(cluster.env, "pages", "--from-beginning", "--crawl-id", "shop")
    assert printed.returncode == 0, printed.stderr
    lines = list(map(json.loads, printed.stdout.splitlines()))
    assert {p["url"]: (p["data"], p["plugin_errors"]) for p in lines} == {
        u: ({"price": p}, []) for u, p in expected.items()
    }


def test_a_worker_without_a_plugin_fails_that_crawl_and_serves_others(tmp_path: Path) -> None:
    """The worker lacks ``price``, the ``seed`` process has it: the crawl that names it ends
    ``failed`` with ``missing_plugin`` and no request, and ``status`` shows the error; the
    worker logs one line, keeps running, and crawls a crawl seeded after it."""
    cluster = Cluster.create(tmp_path, partitions=2)
    env = example_plugins_env(tmp_path)
    try:
        with RecordingServer(routes()) as srv:  # type: ignore[arg-type]
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            seeded = cli({**cluster.env, **env}, "seed", srv.url("/a"), "--crawl-id", "needs",
                         "--delay", "0", "--plugin", "price")  # fmt: skip
            assert seeded.returncode == 0, seeded.stderr
            wait_rows(cluster, 1)
            cluster.seed([srv.url("/")], "plain", "--delay", "0", "--max-depth", "0")
            wait_rows(cluster, 2)
            assert worker.proc.poll() is None
            paths = srv.paths()
            status = {c: cli(cluster.env, "status", "--crawl-id", c, "--json") for c in CRAWLS}
            text = cli(cluster.env, "status")
        assert url_rows(cluster) == {
            ("needs", srv.url("/a")): ("failed", MISSING),
            ("plain", srv.url("/")): ("fetched", ""),
        }
        assert "/a" not in paths and "/" in paths
        logged = [line for line in worker.log.read_text().splitlines() if MISSING in line]
        assert len(logged) == 1 and "crawl needs" in logged[0], logged
        assert all(p.returncode == 0 for p in [*status.values(), text]), text.stderr
        needs, plain = (json.loads(status[c].stdout) for c in CRAWLS)
        assert (needs["states"]["failed"], needs["errors"]) == (1, {MISSING: 1}), needs
        assert plain["states"]["fetched"] == 1 and "errors" not in plain, plain
        assert f"  error: {MISSING} (1 failed)" in text.stdout.splitlines(), text.stdout
    finally:
        cluster.stop_all()
