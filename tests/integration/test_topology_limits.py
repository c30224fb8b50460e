"""The Kafka wiring against a real broker with a page whose report does not fit one message.

Before: a page with 100,000 links made a 2.7 MB outcome, the broker refused it
(``MessageSizeTooLargeError``) and the worker fetched the page again every second, forever.
Here 20,000 links of ~100 bytes (an outcome of ~3 MB, three times the broker's default
``max.message.bytes``; 100,000 would only add sink writes to the test's time) must reach the
frontier in several messages, the page be requested once, and every link get its state.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tests.httpserver import RecordingServer, html, text
from tests.integration.site import Cluster

pytestmark = [pytest.mark.kafka, pytest.mark.cassandra, pytest.mark.integration, pytest.mark.slow]

LINKS = 20_000


def test_a_report_over_the_message_size_is_split_and_the_page_fetched_once(
    tmp_path: Path,
) -> None:
    filler = "x" * 80
    anchors = "".join(f'<a href="/l/{filler}{i}">{i}</a>' for i in range(LINKS))
    routes = {
        "/robots.txt": text("User-agent: *\nAllow: /\n"),
        "/": html(f"<html><body>{anchors}</body></html>"),
    }
    cluster = Cluster.create(tmp_path, partitions=2)
    try:
        with RecordingServer(routes) as srv:  # type: ignore[arg-type]
            worker = cluster.start_worker("w1")
            worker.wait_ready()
            # The links are admitted and end out_of_scope: every one of them gets a state
            # without 20,000 fetches.
            cluster.seed([srv.url("/")], "big", "--delay", "0.1", "--exclude", "/l/")
            states = cluster.wait_states(LINKS + 1, timeout=240)
            assert collections.Counter(states.values()) == {"fetched": 1, "out_of_scope": LINKS}
            assert srv.paths().count("/") == 1  # published at the first attempt: no refetch
            assert worker.metric("streamcrawl_kafka_reports_split_total") >= 1
            assert worker.metric("streamcrawl_kafka_publish_failures_total") == 0
    finally:
        cluster.stop_all()
