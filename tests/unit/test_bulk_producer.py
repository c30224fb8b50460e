"""The worker's producer for page bodies (``topology.worker.clients.bulk_producer``): built like
Faust's own, batches of BULK_BATCH_BYTES, used for ``pages`` and ``captures`` only, started
before the fetch service and so stopped after it. What it changes in a crawl:
docs/performance.md, "A producer for bodies".
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streamcrawl.topology.worker.clients import BULK_BATCH_BYTES, BULK_TOPICS, bulk_producer
from tests.unit.test_replication_settings import built_producer, settings
from tests.unit.test_settings_effects import build, started  # noqa: F401 - a fixture

KAFKA_ACKS = [("all", True), ("all", False), ("1", False)]


@pytest.mark.parametrize(("acks", "idempotent"), KAFKA_ACKS)
def test_it_is_built_as_fausts_producer_with_larger_batches(
    tmp_path: Path, acks: str, idempotent: bool
) -> None:
    from streamcrawl.topology.worker.app import create_app

    s = settings(tmp_path, kafka_acks=acks, kafka_idempotence=idempotent)
    app = create_app(s)
    faust_made = built_producer(app.producer)
    bulk_made = built_producer(bulk_producer(app))
    assert faust_made["batch"] == 16 * 1024  # Faust's default, for the small messages
    assert bulk_made["batch"] == BULK_BATCH_BYTES == 256 * 1024
    assert {k: v for k, v in bulk_made.items() if k != "batch"} == {
        k: v for k, v in faust_made.items() if k != "batch"
    }


class Recorder:
    """A producer that records what it was given and acks at once."""

    def __init__(self, name: str, sent: list[tuple[str, str]]) -> None:
        self.name = name
        self.sent = sent

    async def send(self, topic: str, *_: Any) -> asyncio.Future[None]:
        self.sent.append((self.name, topic.rsplit(".", 1)[-1]))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


def test_bodies_go_through_it_and_everything_else_through_fausts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    build: Any,  # noqa: F811 - the fixture
) -> None:
    from streamcrawl.topology.worker import app as app_module

    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(app_module, "bulk_producer", lambda app: Recorder("bulk", sent))
    made = build(settings(tmp_path))
    made.app.producer = Recorder("faust", sent)
    publish = made.fetch["publish"]

    async def run() -> None:
        for short in ("pages", "captures", "outcomes", "frontier", "status"):
            await publish(short, [(b"k", b"v")])
        # Faust flushes only its own producer before a commit: on_commit sends stay with it.
        await publish("pages", [(b"k", b"v")], on_commit=True)

    asyncio.run(run())
    assert sent == [
        ("bulk", "pages"),
        ("bulk", "captures"),
        ("faust", "outcomes"),
        ("faust", "frontier"),
        ("faust", "status"),
        ("faust", "pages"),
    ]
    assert {"pages", "captures"} == BULK_TOPICS


def test_it_starts_before_the_fetch_service_and_only_with_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    build: Any,  # noqa: F811 - the fixture
) -> None:
    from streamcrawl.topology.worker import app as app_module

    class Bulk:
        pass

    monkeypatch.setattr(app_module, "bulk_producer", lambda app: Bulk())
    names = started(build(settings(tmp_path)), monkeypatch)
    # mode stops a service's children in the reverse order: the producer after the fetcher,
    # whose in-flight reports it may still have to send.
    assert names.index("Bulk") == names.index("FetchService") - 1
    assert "Bulk" not in started(build(settings(tmp_path, fetch_enabled=False)), monkeypatch)
