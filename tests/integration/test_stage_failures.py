"""A stage that raises never loops, in both wirings: the URL is retried up to ``retries`` times,
then ends ``failed`` with an ``internal: ...`` error; the traceback is logged once; the Kafka
wiring counts it. (Before: it stayed at its queue head and was dispatched again forever.)"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest

from streamcrawl.agents.content.parse import parse_html
from streamcrawl.agents.net import stages as pipeline
from streamcrawl.schemas.records import CrawlPolicy
from tests.httpserver import RecordingServer, html
from tests.kafka_agents import AgentsCrawl
from tests.wirings import WIRINGS, crawl

pytestmark = pytest.mark.integration

RETRIES = 2


def raising_parser(bad: str) -> object:
    def parse(text: str, url: str, **kw: object) -> object:
        if url.endswith(bad):
            raise RuntimeError("parser bug")
        return parse_html(text, url, **kw)  # type: ignore[arg-type]

    return parse


def site() -> dict[str, object]:
    return {
        "/": html('<a href="/boom">b</a><a href="/ok">o</a>'),
        "/boom": html("<p>x</p>"),
        "/ok": html("<p>y</p>"),
    }


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_a_raising_stage_is_retried_then_the_url_fails(
    wiring: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pipeline, "parse_html", raising_parser("/boom"))
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        policy = CrawlPolicy(
            crawl_id="t", seeds=(srv.url("/"),), delay=0.0, retries=RETRIES, obey_robots=False
        )
        with caplog.at_level(logging.INFO, logger="streamcrawl.agents.net.stages"):
            states = await crawl(wiring, policy, tmp_path, timeout=30)
    boom = states[srv.url("/boom")]
    assert boom.state == "failed" and boom.attempts == RETRIES + 1
    assert boom.last_error == "internal: RuntimeError: parser bug"
    assert states[srv.url("/ok")].state == "fetched" and states[srv.url("/")].state == "fetched"
    assert Counter(srv.paths())["/boom"] == RETRIES + 1  # retried, not looped
    tracebacks = [r for r in caplog.records if r.exc_info and "/boom" in r.getMessage()]
    assert len(tracebacks) == 1


async def test_the_kafka_wiring_counts_stage_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "parse_html", raising_parser("/boom"))
    async with RecordingServer(site()) as srv:  # type: ignore[arg-type]
        policy = CrawlPolicy(
            crawl_id="t", seeds=(srv.url("/"),), delay=0.0, retries=RETRIES, obey_robots=False
        )
        agents = await AgentsCrawl(policy).run(30)
    line = f'streamcrawl_pipeline_stage_failures_total{{kind="page"}} {RETRIES + 1:.1f}'
    assert line.encode() in agents.metrics.render().splitlines()
