"""A continuous crawl through real Kafka workers keeps its revisit schedule across faults.

The site's pages never change (no validators: every revisit is a 200 with the same digest,
``unchanged``). What the servers saw is the truth: after a worker is killed -9 (or a second
one joins and takes half of the partitions) every page is still revisited, none is asked
for twice within an interval beyond the requests in flight at the fault, and per-origin gaps
between arrivals stay at or above the delay.
"""

from __future__ import annotations

import collections
import itertools
import signal
import time
from pathlib import Path

import pytest

from tests.integration.faults import crawling, in_flight_at_revokes, wait_until
from tests.integration.site import RemoteServer, page_path

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

ORIGINS, PAGES, DELAY = 2, 12, 0.1
INTERVAL = 3.0  # every page revisited every 3 s (fixed, no jitter): ~1.2 s of pages per cycle
FLAGS = (
    "--recrawl-after", f"{INTERVAL}", "--recrawl-min", f"{INTERVAL}",
    "--recrawl-mode", "fixed", "--recrawl-jitter", "0",
)  # fmt: skip


def arrivals(servers: list[RemoteServer]) -> dict[tuple[str, str], list[float]]:
    """(origin, path) -> the kernel arrival times of its requests (robots.txt left out)."""
    out: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for srv in servers:
        for r in srv.log:
            if r.path != "/robots.txt":
                out[srv.origin, r.path].append(r.t)
    return out


def cycles_after(servers: list[RemoteServer], since: float) -> int:
    """The fewest requests any page got since ``since`` (every page must be there)."""
    seen = arrivals(servers)
    pages = [(s.origin, page_path(i)) for s in servers for i in range(PAGES)]
    return min(sum(t >= since for t in seen.get(key, [])) for key in pages)


def check_schedule(servers: list[RemoteServer], fault: float, in_flight: int) -> None:
    seen = arrivals(servers)
    # Twice within half an interval: a revisit done twice (a refetch at the fault).
    doubled = sum(
        sum(b - a < INTERVAL / 2 for a, b in itertools.pairwise(sorted(times)))
        for times in seen.values()
    )
    assert doubled <= in_flight, (doubled, in_flight)
    for srv in servers:  # politeness: the server's arrival times, no slack
        times = sorted(r.t for r in srv.log)
        assert min(b - a for a, b in itertools.pairwise(times)) >= DELAY
    late = [
        (key, b - a)
        for key, times in seen.items()
        for a, b in itertools.pairwise(sorted(t for t in times if t > fault))
        if b - a > INTERVAL * 3
    ]
    assert not late, late[:5]  # after the fault, nobody's revisit was lost or left behind


def test_kill_9_keeps_every_revisit_and_repeats_none(tmp_path: Path) -> None:
    with crawling(tmp_path, "fresh-crash", ORIGINS, PAGES, DELAY, seed_flags=FLAGS) as (
        cluster,
        servers,
        (first,),
    ):
        wait_until(lambda: cycles_after(servers, 0.0) >= 2, 90, "no second cycle")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        fault = time.time()
        cluster.start_worker("w2").wait_ready()
        wait_until(lambda: cycles_after(servers, fault) >= 3, 120, "revisits stopped")
        check_schedule(servers, fault, in_flight=ORIGINS)
        # The sink kept one row per URL (the latest version) and one terminal state each.
        urls = ORIGINS * PAGES
        assert len(cluster.rows("pages")) == urls
        assert collections.Counter(cluster.states().values()) == {"fetched": urls}


def test_a_rebalance_hands_the_schedule_over(tmp_path: Path) -> None:
    with crawling(tmp_path, "fresh-two", ORIGINS, PAGES, DELAY, seed_flags=FLAGS) as (
        cluster,
        servers,
        (first,),
    ):
        wait_until(lambda: cycles_after(servers, 0.0) >= 2, 90, "no second cycle")
        second = cluster.start_worker("w2")
        second.wait_ready()
        joined = time.time()
        wait_until(lambda: cycles_after(servers, joined) >= 3, 120, "revisits stopped")
        check_schedule(servers, joined, in_flight=in_flight_at_revokes(cluster))
        assert first.metric("streamcrawl_fetch_pages_total") > 0
        assert second.metric("streamcrawl_fetch_pages_total") > 0


def test_sigterm_hands_the_schedule_over_without_a_repeat(tmp_path: Path) -> None:
    with crawling(tmp_path, "fresh-term", ORIGINS, PAGES, DELAY, workers=2, seed_flags=FLAGS) as (
        cluster,
        servers,
        (first, second),
    ):
        wait_until(lambda: cycles_after(servers, 0.0) >= 2, 90, "no second cycle")
        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(60) == 0
        stopped = time.time()
        wait_until(lambda: cycles_after(servers, stopped) >= 3, 120, "revisits stopped")
        # A graceful hand-over: the requests in flight finish and are applied before the
        # partitions move, so no revisit is done twice.
        check_schedule(servers, stopped, in_flight=in_flight_at_revokes(cluster))
        assert second.metric("streamcrawl_fetch_pages_total") > 0


def test_operating_a_continuous_crawl(tmp_path: Path) -> None:
    """status shows the revisits, `recrawl` makes one URL or the whole crawl due at once,
    `pages --changes` leaves the unchanged revisits out, and the sink keeps the versions
    `seed --keep-versions` asks for."""
    import json

    from tests.integration.site import cli

    later = ("--recrawl-after", "2h", "--recrawl-min", "2h", "--keep-versions", "2")
    with crawling(tmp_path, "ops", ORIGINS, PAGES, DELAY, seed_flags=later) as (
        cluster,
        servers,
        _,
    ):
        urls = ORIGINS * PAGES
        cluster.wait_states(urls, timeout=90)

        def status() -> dict:
            done = cli(cluster.env, "status", "--crawl-id", "ops", "--json")
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        first = wait_until(
            lambda: (s := status()).get("revisits", {}).get("waiting") == urls and s,
            30,
            "the counts do not show every URL waiting for its revisit",
        )
        assert first["states"]["fetched"] == urls
        assert (first["revisits"]["due_now"], first["revisits"]["due_next_hour"]) == (0, 0)
        one = servers[0].url(page_path(3))
        done = cli(cluster.env, "recrawl", "--crawl-id", "ops", one)
        assert done.returncode == 0, done.stderr
        wait_until(lambda: len(arrivals(servers)[servers[0].origin, page_path(3)]) == 2, 30,
                   "the URL given to recrawl was not fetched again")  # fmt: skip
        assert sum(len(t) for t in arrivals(servers).values()) == urls + 1
        done = cli(cluster.env, "recrawl", "--crawl-id", "ops")
        assert done.returncode == 0, done.stderr
        wait_until(lambda: cycles_after(servers, 0.0) >= 2, 60, "recrawl did not refetch all")
        revisited = wait_until(
            lambda: (s := status())["revisits"]["fetched"] >= urls + 1 and s, 30, "no counts"
        )
        assert revisited["revisits"]["changed_share"] == 0.0  # the site never changes
        assert revisited["states"]["fetched"] == urls  # revisits add no URL
        done = cli(cluster.env, "pages", "--crawl-id", "ops", "--from-beginning", "--changes")
        changes = [json.loads(line)["change"] for line in done.stdout.splitlines()]
        assert changes == ["new"] * urls, changes
        versions = cluster.query("SELECT url_hash FROM {ks}.page_versions")
        assert len(versions) == urls  # the one version of each unchanged page
        refused = cli(cluster.env, "recrawl", "--crawl-id", "nope")
        assert refused.returncode == 1 and "unknown crawl 'nope'" in refused.stderr


def test_changes_and_gone_through_the_real_broker(tmp_path: Path) -> None:
    """A living site through real workers: validators echoed, one `changed` record per change,
    a 410 confirmed once then `gone` in the page stream, in Cassandra and in the counts."""
    import json

    from tests.httpserver import RecordingServer
    from tests.integration.site import Cluster, cli
    from tests.living_site import LivingSite

    site = LivingSite(["/", "/a", "/b"], sitemap=False)
    cluster = Cluster.create(tmp_path, partitions=2)
    try:
        with RecordingServer(site.routes()) as srv:
            cluster.start_worker("w1").wait_ready()
            cluster.seed([srv.url("/")], "live", "--delay", "0.1", *FLAGS)
            wait_until(lambda: len(site.served("/a")) >= 2, 60, "no revisit of /a")
            site.change("/a")
            wait_until(lambda: site.version("/a") == 2 and len(site.served("/a")) >= 4, 60, "/a")
            site.remove("/b", status=410)
            wait_until(lambda: site.statuses("/b").count(410) >= 2, 60, "no confirmation")
            time.sleep(INTERVAL + 1)  # /b must not be asked for again
            assert site.statuses("/b").count(410) == 2
            served = [s for p in ("/", "/a", "/b") for s in site.served(p)]
            gaps = [b - a for a, b in itertools.pairwise(sorted(r.t for r in srv.log))]
        for path in ("/", "/a"):
            pairs = list(itertools.pairwise(site.served(path)))
            assert all(
                (b.if_none_match, b.if_modified_since) == (a.etag, a.last_modified)
                for a, b in pairs
            )
        assert all(s.body_bytes == 0 for s in served if s.status == 304)
        assert min(gaps) >= 0.1
        done = cli(cluster.env, "pages", "--crawl-id", "live", "--from-beginning")
        records = [json.loads(line) for line in done.stdout.splitlines()]
        a = [r["change"] for r in records if r["url"] == srv.url("/a")]
        assert a.count("new") == 1 and a.count("changed") == 1, a
        b = [r["change"] for r in records if r["url"] == srv.url("/b")]
        assert b[-1] == "gone" and b.count("gone") == 1, b
        states = cluster.wait_states(3, timeout=30)
        assert states[srv.url("/b")] == "gone" and states[srv.url("/a")] == "fetched"
        status = json.loads(cli(cluster.env, "status", "--crawl-id", "live", "--json").stdout)
        assert (status["states"]["fetched"], status["states"]["gone"]) == (2, 1)
    finally:
        cluster.stop_all()
