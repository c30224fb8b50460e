"""The Kafka fetch service's backpressure: it stops dispatching while too many fetched URLs
wait for the frontier agent, and resumes as their outcomes are applied."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from streamcrawl.agents.frontier import Frontier, load_origin
from streamcrawl.agents.kafka_scheduler import FetchService
from streamcrawl.agents.kafka_state import TableStore, partition_for
from streamcrawl.agents.metrics import Metrics
from streamcrawl.agents.pipeline import Report
from streamcrawl.agents.rules import CrawlRules
from streamcrawl.agents.scheduler import Dispatch
from streamcrawl.agents.state import Changes
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Outcome, UrlRef

ORIGIN = "http://a.test"


class View:
    def __init__(self, rules: CrawlRules) -> None:
        self._rules = rules

    def rules(self, crawl_id: str) -> CrawlRules | None:
        return self._rules


class Stages:
    def __init__(self) -> None:
        self.runs: list[int] = []

    async def run(self, d: Dispatch) -> Report:
        self.runs.append(d.seq)
        assert d.entry is not None
        return Report(
            Outcome(
                crawl_id="c",
                origin=d.origin,
                kind="page",
                seq=d.seq,
                url=d.entry.url,
                state="fetched",
                started_at=0.0,
                finished_at=0.0,
            )
        )


async def test_dispatch_pauses_at_max_unapplied_and_resumes_when_applied() -> None:
    policy = CrawlPolicy(
        crawl_id="c", seeds=(ORIGIN + "/",), obey_robots=False, delay=0.0, per_origin_concurrency=8
    )
    rules = CrawlRules.from_policy(policy)
    store = TableStore({}, {}, {})
    ch = Changes(store)
    urls = tuple(UrlRef(f"{ORIGIN}/{i}", 1) for i in range(20))
    Frontier().admit(ch, FrontierBatch(crawl_id="c", origin=ORIGIN, urls=urls), rules, budget=None)
    ch.commit()
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
    svc.owned = {partition_for(ORIGIN, 4)}
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
