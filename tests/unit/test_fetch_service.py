"""The Kafka fetch service's backpressure: it stops dispatching while too many fetched URLs
wait for the frontier agent, and resumes as their outcomes are applied; a report that cannot
be published never makes the URL loop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.records import load_origin
from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.agents.net.stages import Report
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.fetch_service import FetchService
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.codec import decode
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Outcome, UrlRef
from tests.captures import capture
from tests.outcomes import page_fetched
from tests.unit.test_kafka_messages import page

ORIGIN = "http://a.test"


class View:
    def __init__(self, rules: CrawlRules) -> None:
        self._rules = rules
        self.policies = {rules.policy.crawl_id: rules.policy}
        self.listeners: list[object] = []

    def rules(self, crawl_id: str) -> CrawlRules | None:
        return self._rules


class Stages:
    def __init__(self) -> None:
        self.runs: list[int] = []

    async def run(self, d: Dispatch) -> Report:
        self.runs.append(d.seq)
        return Report(page_fetched(d))


def _twenty_urls() -> tuple[TableStore, CrawlRules]:
    """One origin with 20 queued URLs, no delay, 8 requests at a time."""
    policy = CrawlPolicy(
        crawl_id="c", seeds=(ORIGIN + "/",), obey_robots=False, delay=0.0, per_origin_concurrency=8
    )
    rules = CrawlRules.from_policy(policy)
    store = TableStore({}, {}, {})
    ch = Changes(store)
    urls = tuple(UrlRef(f"{ORIGIN}/{i}", 1) for i in range(20))
    Frontier().admit(ch, FrontierBatch(crawl_id="c", origin=ORIGIN, urls=urls), rules, budget=None)
    ch.commit()
    return store, rules


async def test_dispatch_pauses_at_max_unapplied_and_resumes_when_applied() -> None:
    store, rules = _twenty_urls()
    sent: list[str] = []

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        sent.extend(short for _ in items)

    async def mark(partition: int, value: bytes) -> None:
        return None

    svc = FetchService(
        store=store,
        view=View(rules),  # type: ignore[arg-type]
        publish=publish,
        mark=mark,
        unstick=lambda p: None,
        metrics=Metrics(),
        partitions=4,
        concurrency=8,
        max_unapplied=3,
    )
    stages = Stages()
    svc._stages = stages  # type: ignore[assignment]
    svc.own.owned = {partition_for(ORIGIN, 4)}
    svc.scheduler.track(load_origin(store, ORIGIN))
    loop = asyncio.create_task(svc._dispatch_loop())
    try:
        await asyncio.sleep(0.3)
        assert len(stages.runs) == 3  # then paused: three outcomes await the frontier
        assert sent.count("outcomes") == 3 and svc.scheduler.settling == 3
        svc.applied(ORIGIN, stages.runs[0], load_origin(store, ORIGIN))
        await asyncio.sleep(0.3)
        assert len(stages.runs) == 4  # one applied, one more dispatched
    finally:
        svc.stopping = True
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_reports_still_publishing_count_against_max_unapplied() -> None:
    """A slow broker: fetched reports whose publish has not been acked yet are unapplied
    outcomes too. Counting only the acked ones let a worker on a loaded machine hold 408
    unapplied outcomes with a bound of 256 (politeness-bound bench row)."""
    store, rules = _twenty_urls()
    release = asyncio.Event()

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        await release.wait()  # the broker has not acked yet

    svc = _service(store, rules, publish)
    svc.max_unapplied = 3
    stages = Stages()
    svc._stages = stages  # type: ignore[assignment]
    loop = asyncio.create_task(svc._dispatch_loop())
    svc.scheduler.track(load_origin(store, ORIGIN))
    svc.dispatcher.wake()
    try:
        await asyncio.sleep(1.5)  # past the dispatch loop's 1 s timer
        assert len(stages.runs) == 3  # three reports publishing: no room for a fourth
        assert svc.scheduler.settling == 0
        release.set()
        await asyncio.sleep(0.3)
        assert len(stages.runs) == 3 and svc.scheduler.settling == 3  # acked, not applied
    finally:
        svc.stopping = True
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


def _service(
    store: TableStore, rules: CrawlRules, publish: object, concurrency: int = 8
) -> FetchService:
    async def mark(partition: int, value: bytes) -> None:
        return None

    svc = FetchService(
        store=store,
        view=View(rules),  # type: ignore[arg-type]
        publish=publish,  # type: ignore[arg-type]
        mark=mark,
        unstick=lambda p: None,
        metrics=Metrics(),
        partitions=4,
        concurrency=concurrency,
    )
    svc.own.owned = {partition_for(ORIGIN, 4)}
    return svc


def _one_url(policy: CrawlPolicy) -> tuple[TableStore, CrawlRules]:
    rules = CrawlRules.from_policy(policy)
    store = TableStore({}, {}, {})
    ch = Changes(store)
    batch = FrontierBatch(crawl_id="c", origin=ORIGIN, urls=(UrlRef(ORIGIN + "/x", 0),))
    Frontier().admit(ch, batch, rules, budget=None)
    ch.commit()
    return store, rules


class PageStages(Stages):
    """Every fetch returns a page (which the broker will refuse in these tests)."""

    async def run(self, d: Dispatch) -> Report:
        report = await super().run(d)
        return Report(report.outcome, page())


async def _run_for(svc: FetchService, seconds: float) -> None:
    svc.scheduler.track(load_origin(svc.store, ORIGIN))
    loop = asyncio.create_task(svc._dispatch_loop())
    try:
        await asyncio.sleep(seconds)
    finally:
        svc.stopping = True
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_a_report_that_cannot_be_published_is_counted_as_a_failed_attempt() -> None:
    policy = CrawlPolicy(crawl_id="c", seeds=(ORIGIN + "/",), obey_robots=False, delay=0.0)
    store, rules = _one_url(policy)
    outcomes: list[Outcome] = []

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        if short == "pages":
            raise RuntimeError("MessageSizeTooLargeError")
        outcomes.extend(decode("outcomes", v) for _, v in items)

    svc = _service(store, rules, publish)
    stages = PageStages()
    svc._stages = stages  # type: ignore[assignment]
    await _run_for(svc, 0.3)
    # One fetch, then a bare retry outcome the frontier counts (retries, then failed): the
    # URL waits for it instead of being dispatched again.
    assert len(stages.runs) == 1
    assert [(o.state, o.links) for o in outcomes] == [("retry", ())]
    assert outcomes[0].error is not None
    assert outcomes[0].error.startswith("internal: cannot publish the report: RuntimeError")


async def test_an_origin_whose_reports_cannot_be_sent_at_all_is_held_back() -> None:
    policy = CrawlPolicy(crawl_id="c", seeds=(ORIGIN + "/",), obey_robots=False, delay=0.0)
    store, rules = _one_url(policy)

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        raise ConnectionError("broker down")

    svc = _service(store, rules, publish)
    stages = Stages()
    svc._stages = stages  # type: ignore[assignment]
    await _run_for(svc, 3.5)
    # Held 2 s, then 4 s: two fetches in 3.5 s, not one per loop turn.
    assert len(stages.runs) == 2


def test_the_default_unapplied_bound_is_not_below_its_floor() -> None:
    # 4 x concurrency alone (256 at the default 64) capped a politeness-bound crawl of many
    # origins at bound / apply latency (docs/performance.md, "The politeness-bound row").
    from streamcrawl.agents.stream import fetch_service as kafka_scheduler

    assert kafka_scheduler.MIN_MAX_UNAPPLIED == 4096
    assert _default_bound(64) == 4096
    assert _default_bound(2048) == 8192


def _default_bound(concurrency: int) -> int:
    store, rules = _twenty_urls()
    return _service(store, rules, None, concurrency).max_unapplied


class LinkingStages(Stages):
    """Each page links one URL of another origin: its report has a batch for ``LinkBatches``."""

    async def run(self, d: Dispatch) -> Report:
        report = await super().run(d)
        link = UrlRef(f"http://b.test/{d.seq}", 1, ORIGIN + "/")
        report.batches.append(FrontierBatch(crawl_id="c", origin="http://b.test", urls=(link,)))
        return report


async def test_links_wait_no_window_once_nothing_is_being_fetched() -> None:
    """One origin without a delay, one request at a time: each report's links go to Kafka as
    soon as its request ended (no other request could add to the flush), so the origin's
    next request does not wait the link window. With a window of 30 s, five pages in a row
    would take minutes otherwise."""
    store, _ = _twenty_urls()
    policy = CrawlPolicy(
        crawl_id="c", seeds=(ORIGIN + "/",), obey_robots=False, delay=0.0, per_origin_concurrency=1
    )
    sent: list[str] = []

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        sent.extend(short for _ in items)

    svc = _service(store, CrawlRules.from_policy(policy), publish, concurrency=8)
    svc.links.window = 30.0
    stages = LinkingStages()
    svc._stages = stages  # type: ignore[assignment]
    svc.scheduler.track(load_origin(store, ORIGIN))
    loop = asyncio.create_task(svc._dispatch_loop())
    try:
        async with asyncio.timeout(5.0):
            while sent.count("outcomes") < 5:
                await asyncio.sleep(0.01)
        assert sent.count("frontier") >= 5  # each page's links went before its outcome
    finally:
        svc.stopping = True
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


class CapturingStages(Stages):
    """A crawl with ``CrawlPolicy.warc``: every report has a page and the fetch's capture."""

    async def run(self, d: Dispatch) -> Report:
        report = await super().run(d)
        assert d.entry is not None
        return Report(report.outcome, page(), capture=capture(d.entry.url.removeprefix(ORIGIN)))


async def test_a_capture_goes_to_captures_with_the_page_before_the_outcome() -> None:
    """Once the outcome is applied the URL leaves its queue: its capture must be in Kafka
    already, keyed by origin like the page."""
    policy = CrawlPolicy(crawl_id="c", seeds=(ORIGIN + "/",), obey_robots=False, delay=0.0)
    store, rules = _one_url(policy)
    sent: list[tuple[str, bytes, bytes]] = []

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        sent.extend((short, k, v) for k, v in items)

    svc = _service(store, rules, publish)
    svc._stages = CapturingStages()  # type: ignore[assignment]
    await _run_for(svc, 0.3)
    shorts = [short for short, _, _ in sent]
    assert sorted(shorts[:-1]) == ["captures", "pages"] and shorts[-1] == "outcomes"
    ((_, key, value),) = [m for m in sent if m[0] == "captures"]
    assert key == ORIGIN.encode() and decode("captures", value) == capture("/x")
    total = svc.metrics.registry.get_sample_value("streamcrawl_kafka_capture_bytes_total")
    assert total == len(value)


async def test_without_a_capture_nothing_goes_to_captures() -> None:
    policy = CrawlPolicy(crawl_id="c", seeds=(ORIGIN + "/",), obey_robots=False, delay=0.0)
    store, rules = _one_url(policy)
    sent: list[str] = []

    async def publish(short: str, items: Sequence[tuple[bytes, bytes]]) -> None:
        sent.extend(short for _ in items)

    svc = _service(store, rules, publish)
    svc._stages = PageStages()  # type: ignore[assignment]
    await _run_for(svc, 0.3)
    assert sent == ["pages", "outcomes"]
