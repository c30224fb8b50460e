"""Page assets through the Kafka wiring against the real broker and Cassandra (docs/assets.md):
a crawl seeded with ``--assets all`` (``streamcrawl seed``, a worker process) on a styled site
and its CDN (a second local server, another host) fetches each asset once, from the server
that has it; every asset's state reaches Cassandra's ``url_status`` and the page rows list
their assets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.asset_site import site
from tests.httpserver import RecordingServer, text
from tests.integration.site import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.cassandra]


def test_assets_are_fetched_once_and_reach_cassandra(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, partitions=2)
    try:
        with RecordingServer() as srv, RecordingServer() as cdn:
            cdn_base = cdn.url("").rstrip("/").replace("127.0.0.1", "localhost")
            own, cdn_files = site(cdn_base)
            srv.routes.update({p: text(body, ctype) for p, (ctype, body) in own.items()})
            cdn.routes.update({p: text(body, ctype) for p, (ctype, body) in cdn_files.items()})
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([srv.url("/")], "styled", "--delay", "0", "--max-pages", "2",
                         "--assets", "all")  # fmt: skip
            # Two pages fetched, three cancelled (max-pages); ten assets of the site's, five
            # of the CDN's.
            states = cluster.wait_states(20, timeout=180)
        home, first = srv.url("/"), srv.url("/page/1.html")
        own_assets = {srv.url(p) for p in own if p.startswith(("/css", "/js", "/img", "/f"))}
        own_assets -= {srv.url(f"/img/p{n}.png") for n in range(2, 5)}  # pages not fetched
        cdn_assets = {cdn_base + p for p in cdn_files}
        assert len(own_assets) == 10 and len(cdn_assets) == 5
        assert {u for u, s in states.items() if s == "fetched"} == {
            home,
            first,
            *own_assets,
            *cdn_assets,
        }
        assert Counter(states.values()) == {"fetched": 17, "cancelled": 3}
        # Each asset once, from the server that has it, whatever number of pages need it.
        for server, assets in ((srv, own_assets), (cdn, cdn_assets)):
            asked = Counter(p for p in server.paths() if p != "/robots.txt")
            wanted = {u.split("/", 3)[3] for u in assets}
            assert {p.lstrip("/") for p in asked} >= wanted
            assert all(n == 1 for n in asked.values()), asked
        rows = {
            row.url: tuple(row.assets or ())
            for row in cluster.query("SELECT url, assets FROM {ks}.pages")
        }
        assert set(rows) == {home, first}
        shared = own_assets | cdn_assets
        shared -= {srv.url(f"/img/p{n}.png") for n in range(2)}  # each page's own
        shared -= {srv.url(p) for p in ("/css/base.css", "/img/bg.png", "/fonts/site.woff2")}
        for url, n in ((home, 0), (first, 1)):
            assert len(rows[url]) == len(set(rows[url])) == 11
            assert set(rows[url]) == shared | {srv.url(f"/img/p{n}.png")}
        depths = {r.url: r.depth for r in cluster.query("SELECT url, depth FROM {ks}.url_status")}
        assert depths[srv.url("/img/bg.png")] == 2  # a stylesheet's image: two steps away
        assert depths[srv.url("/img/logo.png")] == 1
    finally:
        cluster.stop_all()
