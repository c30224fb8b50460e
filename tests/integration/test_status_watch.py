"""``status --watch`` against the real broker, as a person would run it: a worker crawls a fast
and a slow local origin; the watch runs in a tmux pane (a real terminal: the rich view) and
with stdout piped (one line per refresh); Ctrl-C and SIGTERM end it with exit 0."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamcrawl.agents.errors import CrawlError
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import Settings, load_settings
from tests.httpserver import RecordingServer, html, slow, text
from tests.integration.site import STREAMCRAWL, Cluster, cli, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration]

CRAWL, PAGES, SLOW_S = "watched", 6, 0.4
TMUX = "/usr/bin/tmux"


def site(delay: float) -> RecordingServer:
    """``/`` links to ``/p1`` .. ``/p5``; every page answers after ``delay`` seconds."""
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(1, PAGES))
    page = html(f"<html><body>{links}</body></html>")
    routes: dict[str, Any] = {"/robots.txt": text("User-agent: *\nAllow: /\n")}
    for path in ("/", *(f"/p{i}" for i in range(1, PAGES))):
        routes[path] = slow(delay, page) if delay else page
    return RecordingServer(routes)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One worker (left running: it owns the partitions) has crawled both origins."""
    cluster = Cluster.create(tmp_path_factory.mktemp("watch"), partitions=3)
    try:
        with site(0.0) as fast, site(SLOW_S) as slow_site:
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            cluster.seed([fast.url("/"), slow_site.url("/")], CRAWL, "--delay", "0")
            _wait_fetched(cluster.env, 2 * PAGES, timeout=120)
            yield {"cluster": cluster, "fast": fast.origin, "slow": slow_site.origin}
    finally:
        cluster.stop_all()


def _wait_fetched(env: dict[str, str], expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    fetched = -1
    while time.monotonic() < deadline:
        done = cli(env, "status", "--json", "--crawl-id", CRAWL, timeout=60)
        if done.returncode == 0:
            fetched = json.loads(done.stdout)["states"]["fetched"]
            if fetched >= expected:
                return
        time.sleep(1.0)
    raise AssertionError(f"only {fetched}/{expected} pages fetched")


class Pane:
    """One tmux server of its own (a private socket), one window of a fixed size."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.socket = f"sc-watch-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, **env, "TERM": "xterm-256color", "LANG": "C.UTF-8"}
        self.tmp = tmp

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            [TMUX, "-u", "-L", self.socket, "-f", "/dev/null", *args],
            env=self.env, capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        return done.stdout

    def start(self, argv: list[str]) -> None:
        """Run ``argv`` in the window; its exit code goes to ``rc``, its stderr to ``err``."""
        command = f"{shlex.join(argv)} 2>{self.tmp / 'err'}; echo $? >{self.tmp / 'rc'}; sleep 60"
        self.tmux("new-session", "-d", "-x", "150", "-y", "60", "-s", "w", command)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "w")

    def wait_screen(self, *wanted: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if all(w in shown for w in wanted):
                return shown
            time.sleep(0.3)
        raise AssertionError(f"never shown: {wanted}; the screen:\n{shown}")

    def exit_code(self, timeout: float = 15.0) -> int:
        rc = self.tmp / "rc"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if rc.exists() and rc.read_text().strip():
                return int(rc.read_text())
            time.sleep(0.2)
        raise AssertionError(f"the command did not exit; the screen:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, check=False)


def cells(screen: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for row in screen.splitlines():
        parts = [c.strip() for c in row.split("│")]
        if len(parts) > 2 and parts[1] == first:
            return parts[1:-1]
    raise AssertionError(f"no row {first!r} on the screen:\n{screen}")


def test_the_terminal_view_shows_states_owners_and_slowest_origins(
    crawled: dict[str, Any], tmp_path: Path
) -> None:
    cluster: Cluster = crawled["cluster"]
    pane = Pane(tmp_path, cluster.env)
    try:
        pane.start([STREAMCRAWL, "status", "--watch", "--interval", "0.5", "--crawl-id", CRAWL])
        shown = pane.wait_screen("frontier partitions", "slowest origins", crawled["slow"])
        assert "Traceback" not in shown
        assert "streamcrawl status --watch" in shown and "sink lag" in shown
        assert any(CRAWL in row and "┃" in row for row in shown.splitlines())  # its column
        assert cells(shown, "fetched") == ["fetched", str(2 * PAGES)]
        assert cells(shown, "queue depth") == ["queue depth", "0"]
        assert cells(shown, "total") == ["total", str(2 * PAGES)]
        owners = [cells(shown, str(p))[1] for p in range(3)]
        assert all(re.fullmatch(r"\S+@127\.0\.0\.1", o) for o in owners), owners
        assert len(set(owners)) == 1  # one worker owns every partition
        slowest = cells(shown, crawled["slow"])
        latency = float(slowest[1].removesuffix(" s"))
        assert SLOW_S <= latency < SLOW_S + 1.0 and slowest[4] == CRAWL
        assert shown.index(crawled["slow"]) < shown.index(crawled["fast"])  # slowest first
        pane.tmux("send-keys", "-t", "w", "C-c")
        assert pane.exit_code() == 0
        after = pane.screen()
        assert "Traceback" not in after and "KeyboardInterrupt" not in after
        assert (tmp_path / "err").read_text() == ""
    finally:
        pane.kill()


def test_piped_one_flushed_line_per_refresh_until_ctrl_c(crawled: dict[str, Any]) -> None:
    env = {**os.environ, **crawled["cluster"].env}
    proc = subprocess.Popen(
        [STREAMCRAWL, "status", "--watch", "--interval", "0.5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(4)]  # each arrives as it is written
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "", err
    pattern = (
        rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d crawl {CRAWL}: fetched {2 * PAGES}, "
        r"(-|\d+\.\d\d) pages/s, queue 0, sink lag \d+\n"
    )
    for got in [*lines, *out.splitlines(keepends=True)]:
        assert re.fullmatch(pattern, got), got
    assert lines[0].split(", ")[1] == "- pages/s"  # no rate before a second reading
    assert lines[1].split(", ")[1] == "0.00 pages/s"  # the crawl is done


def test_json_per_refresh_and_sigterm_exits_0(crawled: dict[str, Any]) -> None:
    env = {**os.environ, **crawled["cluster"].env}
    proc = subprocess.Popen(
        [STREAMCRAWL, "status", "--watch", "--json", "--interval", "0.5", "--crawl-id", CRAWL],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    frames = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == "", err
    f = frames[1]
    assert f["crawl_id"] == CRAWL and f["states"]["fetched"] == 2 * PAGES
    assert f["queue_depth"] == 0 and f["pages_per_s_now"] == 0.0
    assert [p["partition"] for p in f["partitions"]] == [0, 1, 2]
    assert all(p["owner"] and p["frontier_lag"] == 0 for p in f["partitions"])
    assert f["slowest"][0]["origin"] == crawled["slow"]
    assert f["slowest"][0]["fetches"] == PAGES


def test_status_without_watch_keeps_its_output(crawled: dict[str, Any]) -> None:
    done = cli(crawled["cluster"].env, "status", "--json", "--crawl-id", CRAWL)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert list(report) == ["crawl_id", "states", "pages_per_s", "source", "sink_lag"]


def test_a_refresh_that_fails_mid_watch_is_shown_and_retried(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    """The topics vanish under a running watch (as they do for a broker gone: every request
    fails) and come back: error lines, then normal lines again, never a crash."""
    settings = load_settings(
        kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, partitions=2
    )
    env = {**os.environ, "STREAMCRAWL_KAFKA_BOOTSTRAP": kafka_bootstrap,
           "STREAMCRAWL_TOPIC_PREFIX": settings.topic_prefix}  # fmt: skip
    admin.create_topics(settings)
    proc = subprocess.Popen(
        [STREAMCRAWL, "status", "--watch", "--interval", "0.3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        assert "no crawls recorded yet" in proc.stdout.readline()
        _delete_topics(settings)
        seen = _read_until(proc, "error: ")
        assert f"topic {settings.topic_prefix}.counts does not exist" in seen[-1], seen
        _create_topics(settings)
        seen = _read_until(proc, "no crawls recorded yet")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and err == "", err
    finally:
        if proc.poll() is None:
            proc.kill()
        _delete_topics(settings)


def _read_until(proc: subprocess.Popen[str], wanted: str, timeout: float = 60) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines.append(proc.stdout.readline())
        assert lines[-1], f"the watch ended: {lines}"
        if wanted in lines[-1]:
            return lines
    raise AssertionError(f"no line with {wanted!r}: {lines}")


def _delete_topics(settings: Settings) -> None:
    client = AdminClient(admin_config.librdkafka_config(settings))
    names = [admin.topic_name(settings, short) for short in admin.TOPICS]
    for future in client.delete_topics(names, operation_timeout=10).values():
        with contextlib.suppress(KafkaException):  # already gone
            future.result(timeout=15)


def _create_topics(settings: Settings, timeout: float = 60) -> None:
    """Create them again, once the broker has finished deleting them."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.create_topics(settings)
            return
        except CrawlError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def test_a_dead_broker_at_start_is_one_line_and_exit_1() -> None:
    dead = f"127.0.0.1:{free_port()}"
    done = subprocess.run(
        [STREAMCRAWL, "status", "--watch", "--kafka-bootstrap", dead],
        env={**os.environ, "STREAMCRAWL_TOPIC_PREFIX": "nothing"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"streamcrawl: cannot reach Kafka at {dead}")
    assert done.stderr.count("\n") == 1, done.stderr


class _Counting:
    """Passes every call to the client it wraps and counts them by method name."""

    def __init__(self, client: Any, counts: dict[str, int]) -> None:
        self._client, self._counts = client, counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counts[name] = self._counts.get(name, 0) + 1
            return attr(*args, **kwargs)

        return counted


def test_a_reading_asks_for_every_partitions_offsets_at_once(crawled: dict[str, Any]) -> None:
    """One reading: two ``ListOffsets`` (log starts, ends) for the five topics' 15 partitions,
    not two per partition; a second reading by the same reader looks no topic up again."""
    from streamcrawl.topology.admin.status import StatusReader

    counts: dict[str, int] = {}
    with StatusReader(crawled["cluster"].settings()) as reader:
        reader.consumer = _Counting(reader.consumer, counts)  # type: ignore[assignment]
        reader._admin = _Counting(reader._client(), counts)  # type: ignore[assignment]
        first = reader.read(with_workers=True)
        assert counts.get("list_offsets") == 2 and "get_watermark_offsets" not in counts, counts
        assert counts["list_topics"] == 5, counts  # counts, pages, status, frontier, outcomes
        second = reader.read(with_workers=True)
    assert counts["list_topics"] == 5 and counts["list_offsets"] == 4, counts
    assert (
        first.stats[CRAWL].states["fetched"] == 2 * PAGES == second.stats[CRAWL].states["fetched"]
    )
    assert [p.frontier_lag for p in second.partitions] == [0, 0, 0]
