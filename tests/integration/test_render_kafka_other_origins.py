"""A rendered page's subrequest to another origin in the Kafka wiring, against the real broker
and Cassandra (docs/rendering.md, "Other origins in the Kafka wiring"): the render worker owns
no slot, so it borrows B's from B's owner (a claim on ``outcomes``, a grant on ``grants``, a
return), and B's politeness holds across the two processes. Checked on the wire: B's server
records when each request arrived."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamcrawl.agents.render.browser import default_chromium
from tests.httpserver import RecordingServer, html, text
from tests.integration.site import Cluster
from tests.integration.test_render_other_origins import app as embedded_app
from tests.integration.test_render_other_origins import data

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.cassandra,
    pytest.mark.integration,
    pytest.mark.skipif(not os.access(default_chromium(), os.X_OK), reason="no Chromium"),
]

ROBOTS = "User-agent: *\nCrawl-delay: 1\nDisallow: /private\n"
B_PAGES = [f"/b{n}" for n in range(1, 5)]


def app(other: str) -> str:
    """A page whose script builds its links from ``other``'s JSON (a CORS fetch), and asks
    for a file of ``other`` its robots.txt disallows."""
    return embedded_app(other, also=("/private/secret.json",))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster.create(tmp_path, partitions=2)
    try:
        yield c
    finally:
        c.stop_all()


def pages(cluster: Cluster) -> dict[str, tuple[str | None, int | None]]:
    rows = cluster.query("SELECT url, title, render_refused FROM {ks}.pages")
    return {r.url: (r.title, r.render_refused) for r in rows}


def test_a_subrequest_to_another_origin_borrows_its_slot_from_its_owner(
    cluster: Cluster,
) -> None:
    with RecordingServer() as a, RecordingServer() as b:
        a.routes.update({"/": html(app(b.origin)), "/from-b": html("<p>from b</p>")})
        b.routes.update(
            {
                "/robots.txt": text(ROBOTS),
                "/": html(" ".join(f"<a href={p}>{p}</a>" for p in B_PAGES)),
                **{p: html(f"<p>{p}</p>") for p in B_PAGES},
                "/data.json": data([a.url("/from-b")]),
                "/private/secret.json": data([]),
            }
        )
        # Both processes hold A's credential: the render worker must still not send it to B.
        secret = {"STREAMCRAWL_CREDENTIAL_SITE_A": "basic:alice:secret-of-a"}
        worker = cluster.start_worker("w1", **secret)
        renderer = cluster.start_render_worker("r1", **secret)
        worker.wait_ready()
        only_a = f"^{re.escape(a.url('/'))}$"  # B's pages: fetched, not rendered
        cluster.seed(
            [a.url("/"), b.url("/")],
            "xo",
            *("--render", "always", "--render-include", only_a, "--delay", "0"),
            *("--header-for", b.origin, "X-Only-B: 1", "--auth-for", a.origin, "SITE_A"),
        )
        # A's /, its /from-b (a link only B's JSON names), B's / and its pages.
        states = cluster.wait_states(3 + len(B_PAGES), timeout=180)
        assert states.get(a.url("/from-b")) == "fetched", f"{states}\n{cluster.diagnosis()}"
        deadline = time.monotonic() + 60
        while a.url("/") not in pages(cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        title, refused = pages(cluster)[a.url("/")]
        refusals = {
            reason: renderer.metric("streamcrawl_render_subrequests_refused_total", reason=reason)
            for reason in ("robots", "slot_timeout", "cross_origin")
        }
    # B's data reached the DOM (the subrequest was made, not refused); B's robots.txt refused
    # the other file.
    assert title == "built" and refused == 1, refusals
    assert refusals == {"robots": 1, "slot_timeout": 0, "cross_origin": 0}
    # B's robots.txt at most once per process (the grant hands over the owner's copy).
    asked = b.paths()
    assert 1 <= asked.count("/robots.txt") <= 2, asked
    assert sorted(p for p in asked if p != "/robots.txt") == sorted(["/", "/data.json", *B_PAGES])
    # Every request to B, the fetch worker's and the render worker's, at least B's
    # Crawl-delay apart as B saw them: a subrequest outside B's slot would arrive within it.
    assert min(b.gaps()) >= 1.0 - 0.02, b.log
    # What a fetch of B carries: B's header, not A's credential.
    headers = b.requests("/data.json")[0].headers
    assert headers.get("X-Only-B") == "1" and "Authorization" not in headers
    assert "Authorization" in a.requests("/")[0].headers
