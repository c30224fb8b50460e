"""``status --watch``: the frame of two readings, its line, its rich view, the refresh loop
(errors shown and retried, Ctrl-C/SIGTERM end it), and the flags."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from typing import Any

import pytest
from rich.console import Console

from streamcrawl.agents.errors import CrawlError
from streamcrawl.agents.stream.counts import CrawlCounts, PartitionCounts, SlowOrigin
from streamcrawl.topology.admin import generation
from streamcrawl.topology.admin import status as kafka_status
from streamcrawl.topology.admin.status import (
    PartitionView,
    Snapshot,
    queue_depths,
    slowest_origins,
    summarize,
)
from streamcrawl.topology.cli import watch
from streamcrawl.topology.cli.main import main
from streamcrawl.topology.cli.watch_view import view

T0 = 1_750_000_000.0  # a wall-clock reading time
SLOW, B = "http://slow.test", "http://b.test"


def records(fetched: int = 20) -> list[PartitionCounts]:
    """Two partitions: crawl ``a`` on both, ``b`` on 1. In partition 0, ``a`` queued 50 URLs,
    ended ``fetched`` + 5 of them, and refused 15 at admission (out of scope)."""
    return [
        PartitionCounts(
            partition=0,
            crawls={
                "a": CrawlCounts(
                    states={"fetched": fetched, "failed": 5, "out_of_scope": 15},
                    admitted=50,
                    refused=15,
                    first_fetched_at=T0 - 100,
                    last_fetched_at=T0,
                    slowest=[SlowOrigin(SLOW, 2.5, 4), SlowOrigin("http://a.test", 0.1, 9)],
                )
            },
        ),
        PartitionCounts(
            partition=1,
            crawls={
                "a": CrawlCounts(states={"fetched": 3}, admitted=3),
                "b": CrawlCounts(
                    states={"fetched": 7}, admitted=10, slowest=[SlowOrigin(B, 0.7, 2)]
                ),
            },
        ),
    ]  # fmt: skip


def snapshot(at: float = T0, fetched: int = 20) -> Snapshot:
    """A reading of ``records`` with a sink lag of 4: partition 0 owned, 1 not."""
    s = summarize(records(fetched), 4, at)
    s.partitions = [
        PartitionView(0, "faust-1@10.0.0.7", frontier_lag=3, outcomes_lag=0),
        PartitionView(1, None, frontier_lag=0, outcomes_lag=12),
    ]
    return s


def test_queue_depth_is_admitted_minus_the_queued_urls_that_ended() -> None:
    crawls, partitions = queue_depths(records())
    # a: 50 - (40 ended - 15 refused) + 3 - 3 = 25; b: 10 - 7
    assert crawls == {"a": 25, "b": 3}
    assert partitions == {0: 25, 1: 3}
    assert queue_depths(records(), "b") == ({"b": 3}, {0: 0, 1: 3})
    old = [PartitionCounts(partition=0, crawls={"a": CrawlCounts(states={"out_of_scope": 9})})]
    assert queue_depths(old) == ({"a": 0}, {0: 0})  # written before `refused`: clamped


def test_slowest_origins_are_merged_over_partitions_slowest_first() -> None:
    assert [s["origin"] for s in slowest_origins(records())] == [
        "http://slow.test", "http://b.test", "http://a.test",
    ]  # fmt: skip
    assert slowest_origins(records(), "b") == [
        {"origin": "http://b.test", "crawl_id": "b", "latency_s": 0.7, "fetches": 2, "partition": 1}
    ]
    assert len(slowest_origins(records(), limit=2)) == 2


def test_the_frame_keeps_the_status_json_and_adds_rates_queue_partitions_slowest() -> None:
    first = watch.frame(snapshot(T0), None, None)
    f = watch.frame(snapshot(T0 + 2, fetched=30), snapshot(T0), None)
    assert list(f)[:7] == [
        "at", "crawl_id", "states", "pages_per_s", "source", "sink_lag", "crawls",
    ]  # fmt: skip
    assert f["crawl_id"] is None and f["states"]["fetched"] == 40 and f["sink_lag"] == 4
    assert (first["pages_per_s_now"], f["pages_per_s_now"]) == (None, 5.0)  # 10 pages in 2 s
    assert f["crawls"]["a"]["pages_per_s_now"] == 5.0 and f["crawls"]["b"]["pages_per_s_now"] == 0
    assert f["crawls"]["a"]["queue_depth"] == 15 and f["queue_depth"] == 18
    assert f["partitions"][0] == {
        "partition": 0, "owner": "faust-1@10.0.0.7", "frontier_lag": 3, "outcomes_lag": 0,
        "queue_depth": 15,
    }  # fmt: skip
    assert f["slowest"][0]["origin"] == "http://slow.test" and f["workers_error"] is None
    one = watch.frame(snapshot(T0 + 2, fetched=30), snapshot(T0), "a")
    assert one["crawl_id"] == "a" and "crawls" not in one
    assert (one["queue_depth"], one["pages_per_s_now"]) == (15, 5.0)
    assert [s["crawl_id"] for s in one["slowest"]] == ["a", "a"]
    json.dumps(f)  # one JSON object per refresh


def test_a_line_per_refresh_says_when_what_how_fast_and_how_far_behind() -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(T0 + 2))
    f = watch.frame(snapshot(T0 + 2, fetched=30), snapshot(T0), None)
    assert watch.line(f) == (f"{stamp} crawl a,b: fetched 40, 5.00 pages/s, queue 18, sink lag 4")
    first = watch.frame(snapshot(T0 + 2), None, "b")
    assert watch.line(first) == f"{stamp} crawl b: fetched 7, - pages/s, queue 3, sink lag 4"
    empty = watch.frame(summarize([], None, T0 + 2), None, None)
    assert watch.line(empty) == f"{stamp} no crawls recorded yet, sink lag not started"
    failed = watch.error_frame(T0 + 2, CrawlError("cannot reach Kafka"))
    assert watch.line(failed) == f"{stamp} error: cannot reach Kafka"


def screen(f: dict[str, Any] | None, failed: dict[str, Any] | None, interval: float) -> str:
    """The view as a 140-column terminal shows it."""
    console = Console(width=140, record=True, file=io.StringIO(), color_system=None)
    console.print(view(f, failed, interval))
    return console.export_text()


def cells(text: str, first: str) -> list[str]:
    """The cells of the table row of ``text`` whose first cell is ``first``."""
    for row in text.splitlines():
        parts = [c.strip() for c in row.split("│")]
        if len(parts) > 2 and parts[1] == first:
            return parts[1:-1]
    raise AssertionError(f"no row {first!r}:\n{text}")


def test_the_view_shows_states_rates_partition_owners_and_slowest_origins() -> None:
    text = screen(watch.frame(snapshot(T0 + 2, fetched=30), snapshot(T0), None), None, 2.0)
    assert "sink lag 4 messages" in text.splitlines()[0] and "every 2 s" in text
    assert cells(text, "fetched") == ["fetched", "33", "7"]
    assert cells(text, "queue depth") == ["queue depth", "15", "3"]
    assert cells(text, "pages/s now") == ["pages/s now", "5.00", "0.00"]
    assert "robots_denied" not in text  # states no crawl has are left out
    assert cells(text, "0") == ["0", "faust-1@10.0.0.7", "3", "0", "15"]
    assert cells(text, "1") == ["1", "-", "0", "12", "3"]
    assert cells(text, SLOW) == [SLOW, "2.500 s", "4", "0", "a"]
    assert text.index(SLOW) < text.index(B) < text.index("http://a.test")


def test_a_failed_refresh_keeps_the_last_reading_under_a_red_line() -> None:
    f = watch.frame(snapshot(T0), None, None)
    failed = watch.error_frame(T0 + 2, CrawlError("cannot reach Kafka at k:9092"))
    text = screen(f, failed, 2.0)
    clock = time.strftime("%H:%M:%S", time.localtime(T0 + 2))
    assert f"refresh failed at {clock}" in text and "cannot reach Kafka at k:9092" in text
    assert "faust-1@10.0.0.7" in text  # the last reading is still shown
    f["workers_error"] = "GROUP_AUTHORIZATION_FAILED"
    f["partitions"] = []
    assert "workers' group unreadable: GROUP_AUTHORIZATION_FAILED" in screen(f, None, 2.0)


def reader(*results: Snapshot | BaseException) -> watch.Read:
    it = iter(results)

    def read() -> Snapshot:
        r = next(it)
        if isinstance(r, BaseException):
            raise r
        return r

    return read


def test_a_refresh_that_fails_after_the_first_is_shown_and_retried() -> None:
    read = reader(snapshot(T0), CrawlError("broker gone"), snapshot(T0 + 4, fetched=28))
    frames = watch.refreshes(read, None, 0.001)
    first, failed, back = next(frames), next(frames), next(frames)
    assert "error" not in first and failed["error"] == "broker gone"
    assert back["pages_per_s_now"] == 2.0  # against the last good reading: 8 pages in 4 s


def test_a_first_refresh_that_fails_raises() -> None:
    with pytest.raises(CrawlError, match=r"topic x\.counts does not exist"):
        next(watch.refreshes(reader(CrawlError("topic x.counts does not exist")), None, 1.0))


def test_refreshes_come_every_interval() -> None:
    frames = watch.refreshes(reader(*(snapshot(T0) for _ in range(3))), None, 0.2)
    started = time.monotonic()
    for _ in range(3):
        next(frames)
    assert 0.4 <= time.monotonic() - started < 1.0


def test_without_a_terminal_one_flushed_line_or_json_object_per_refresh() -> None:
    class Out(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1

    for as_json in (False, True):
        out = Out()
        read = reader(snapshot(T0), snapshot(T0 + 1), KeyboardInterrupt())
        with watch.until_stopped():
            watch.run(read, None, 0.001, as_json, out)
            pytest.fail("not stopped")
        lines = out.getvalue().splitlines()
        assert len(lines) == 2 and out.flushes == 2
        if as_json:
            assert [json.loads(x)["at"] for x in lines] == [T0, T0 + 1]
        else:
            assert lines[0].endswith("crawl a,b: fetched 30, - pages/s, queue 28, sink lag 4")


def test_sigterm_ends_the_watch_like_ctrl_c_and_the_handler_is_restored() -> None:
    calls = 0

    def read() -> Snapshot:
        nonlocal calls
        calls += 1
        if calls == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # interrupted by the signal
            pytest.fail("SIGTERM did not stop the watch")
        return snapshot(T0)

    before = signal.getsignal(signal.SIGTERM)
    out = io.StringIO()
    started = time.monotonic()
    with watch.until_stopped():
        watch.run(read, None, 0.001, False, out)
    assert time.monotonic() - started < 2 and len(out.getvalue().splitlines()) == 1
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--watch", "--interval", "0"], "argument --interval: must be above 0 seconds, got 0"),
        (["--watch", "--interval", "-1"], "argument --interval: must be above 0 seconds, got -1"),
        (["--watch", "--interval", "nan"], "argument --interval: must be above 0 seconds, got nan"),
        (["--watch", "--interval", "soon"], "expected a number of seconds, got 'soon'"),
        (["--interval", "1"], "--interval applies to --watch only"),
        (["--watch", "--exact"], "--watch reads the counts topic: it cannot be combined with"),
    ],
)  # fmt: skip
def test_bad_watch_flags_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["status", "--kafka-bootstrap", "127.0.0.1:1", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_revisits_count_in_the_rate_now() -> None:
    def revisited(n: int, at: float) -> Snapshot:
        counts = CrawlCounts(states={"fetched": 5}, admitted=5, revisits=n, due={"1": 5})
        return summarize([PartitionCounts(partition=0, crawls={"r": counts})], 0, at)

    f = watch.frame(revisited(30, T0 + 2), revisited(10, T0), "r")
    assert f["pages_per_s_now"] == 10.0 and f["revisits"]["fetched"] == 30
    assert "revisits waiting" in screen(f, None, 2.0)


MISSING = "missing_plugin: price is not installed in this worker"


def with_errors() -> list[PartitionCounts]:
    """``records`` where crawl ``a`` failed 5 URLs for a plugin a worker lacks, over both
    partitions."""
    found = records()
    found[0].crawls["a"].errors = {MISSING: 3}
    found[1].crawls["a"].errors = {MISSING: 2}
    return found


def test_a_crawls_own_errors_are_summed_and_shown_only_for_that_crawl() -> None:
    s = summarize(with_errors(), 4, T0)
    assert s.errors == {"a": {MISSING: 5}}
    every = kafka_status.report(s.stats, None, errors=s.errors, source="counts")
    assert every["crawls"]["a"]["errors"] == {MISSING: 5} and "errors" not in every["crawls"]["b"]
    assert "errors" not in every  # per crawl, never summed
    one = kafka_status.report(s.stats, "a", errors=s.errors, source="counts", sink_lag=4)
    assert list(one) == ["crawl_id", "states", "pages_per_s", "errors", "source", "sink_lag"]
    plain = kafka_status.report(s.stats, "b", errors=s.errors, source="counts", sink_lag=4)
    assert list(plain) == ["crawl_id", "states", "pages_per_s", "source", "sink_lag"]
    f = watch.frame(summarize(with_errors(), 4, T0 + 2), s, None)
    assert f["crawls"]["a"]["errors"] == {MISSING: 5}
    assert f"crawl a: {MISSING} (5 failed)" in screen(f, None, 2.0)
    assert " failed)" not in screen(watch.frame(snapshot(T0), None, None), None, 2.0)


@pytest.mark.parametrize("as_json", [True, False])
def test_status_prints_a_crawls_own_errors(
    as_json: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(generation, "resolve", lambda settings, strict=False: settings)
    monkeypatch.setattr(kafka_status, "read_status", lambda _s: summarize(with_errors(), 0, T0))
    argv = ["status", "--kafka-bootstrap", "127.0.0.1:9", *(["--json"] if as_json else [])]
    assert main(argv) == 0
    out = capsys.readouterr().out
    if as_json:
        assert json.loads(out)["crawls"]["a"]["errors"] == {MISSING: 5}
    else:
        assert f"  error: {MISSING} (5 failed)" in out.splitlines()
        assert out.count(" failed)") == 1
