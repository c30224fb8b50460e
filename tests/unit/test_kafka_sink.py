"""The sink consumer's write loop: a sink slower than the crawl pauses fetching, never drops."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from streamcrawl.agents.errors import SinkBackpressure
from streamcrawl.agents.sinks.memory import MemorySink
from streamcrawl.agents.stream import sink_agent as kafka_sink
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.sink_agent import sink_lag, write_batch
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import Page, TerminalState, UrlStatus


class SlowSink(MemorySink):
    """Refuses the first ``refusals`` writes as Cassandra does when it cannot keep up."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals
        self.attempts = 0

    async def write(self, pages: Sequence[Page], statuses: Sequence[UrlStatus]) -> None:
        self.attempts += 1
        if self.attempts <= self.refusals:
            raise SinkBackpressure("Cassandra is slower than the crawl", retry_after=0.01)
        await super().write(pages, statuses)


def events(n: int) -> list[tuple[str, int, int, bytes | None]]:
    out: list[tuple[str, int, int, bytes | None]] = []
    for i in range(n):
        url = f"https://example.org/{i}"
        status = UrlStatus(crawl_id="c", url=url, origin="https://example.org",
                           state=TerminalState.FETCHED, depth=0, updated_at=1.0 + i)  # fmt: skip
        out.append(("p.status", 0, i, encode(status)))
    return out


async def test_a_slow_sink_pauses_fetching_and_loses_nothing() -> None:
    sink, metrics, pauses = SlowSink(refusals=3), Metrics(), []
    await write_batch(sink, events(50), metrics, pauses.append)
    assert pauses == [True, False]  # paused once, resumed once written
    assert sink.attempts == 4
    assert (await sink.counts("c"))["c"]["fetched"] == 50  # every record, none dropped
    assert metrics.sink_backpressure._value.get() == 3
    assert metrics.sink_paused._value.get() == 0


async def test_a_sink_that_keeps_up_never_pauses() -> None:
    pauses: list[bool] = []
    await write_batch(SlowSink(refusals=0), events(5), Metrics(), pauses.append)
    assert pauses == []


async def test_bodies_reach_the_sink_only_for_crawls_that_store_them() -> None:
    def page(crawl_id: str) -> tuple[str, int, int, bytes | None]:
        p = Page(
            crawl_id=crawl_id, url=f"https://example.org/{crawl_id}", final_url="x",
            origin="https://example.org", status=200, headers={}, content_type="text/html",
            charset="utf-8", title=None, depth=0, fetched_at=1.0, elapsed_ms=1.0,
            body_sha256="0" * 64, body_bytes=3, outlinks=0, body="<p>",
        )  # fmt: skip
        return ("p.pages", 0, 0, encode(p))

    sink = MemorySink()
    both = [page("keep"), page("drop")]
    await write_batch(sink, both, Metrics(), keep_body=lambda crawl_id: crawl_id == "keep")
    kept = await sink.get_page("keep", "https://example.org/keep")
    dropped = await sink.get_page("drop", "https://example.org/drop")
    assert kept is not None and kept.body == "<p>"
    assert dropped is not None and dropped.body is None and dropped.body_bytes == 3


def test_lag_is_what_the_broker_has_that_the_sink_has_not_written() -> None:
    assert sink_lag(120, 100) == 20
    assert sink_lag(100, 100) == 0
    assert sink_lag(90, 100) == 0  # a stale high watermark is no negative lag


class ScriptedConsumer:
    """``getmany`` answers from a script, then finds nothing for the whole timeout."""

    def __init__(self, *answers: dict[str, list[int]]) -> None:
        self.answers = list(answers)
        self.asked: list[int] = []

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[str, list[int]]:
        self.asked.append(max_records)
        if self.answers:
            return self.answers.pop(0)
        await asyncio.sleep(timeout_ms / 1000)
        return {}


async def test_a_small_poll_waits_the_window_for_more_records_in_offset_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_sink, "SINK_WINDOW", 0.01)
    sinker = kafka_sink.SinkConsumer({}, 1024, ["p.pages"], "g", MemorySink, Metrics())  # type: ignore[arg-type]
    sinker._consumer = ScriptedConsumer({"a": [3, 4], "b": [7]})  # type: ignore[assignment]
    batch = await sinker._fill({"a": [1, 2]})
    assert batch == {"a": [1, 2, 3, 4], "b": [7]}
    asked = sinker._consumer.asked  # type: ignore[attr-defined]
    assert asked == [kafka_sink.SINK_BATCH - 2, kafka_sink.SINK_BATCH - 5]  # then the window ended


async def test_a_batch_that_fills_is_written_before_the_window_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_sink, "SINK_BATCH", 5)
    monkeypatch.setattr(kafka_sink, "SINK_WINDOW", 30.0)
    sinker = kafka_sink.SinkConsumer({}, 1024, ["p.pages"], "g", MemorySink, Metrics())  # type: ignore[arg-type]
    sinker._consumer = ScriptedConsumer({"a": [3]}, {"b": [7, 8]})  # type: ignore[assignment]
    batch = await asyncio.wait_for(sinker._fill({"a": [1, 2]}), 5.0)
    assert batch == {"a": [1, 2, 3], "b": [7, 8]}
    assert sinker._consumer.asked == [3, 2]  # type: ignore[attr-defined]


async def test_a_full_poll_is_written_without_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_sink, "SINK_BATCH", 2)
    sinker = kafka_sink.SinkConsumer({}, 1024, ["p.pages"], "g", MemorySink, Metrics())  # type: ignore[arg-type]
    sinker._consumer = ScriptedConsumer()  # type: ignore[assignment]
    assert await sinker._fill({"a": [1, 2]}) == {"a": [1, 2]}
