"""streamcrawl as a library (docs/api.md): ``crawl``, an embedded crawl as an async iterator of
its page records, and ``pages``, the Kafka wiring's page stream as the same typed records.

This folder is the ``streamcrawl`` package itself (pyproject.toml's package-dir), so that
``import streamcrawl`` has these names. Importing it loads the records and the errors only: the
crawl's modules load at the first ``crawl``, the Kafka client (the kafka extra) at the first
``pages``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Generator
from typing import TYPE_CHECKING, Any

from streamcrawl.agents.errors import ConfigError, CrawlError, InvalidURL, StateError
from streamcrawl.schemas.records import Page

if TYPE_CHECKING:
    from streamcrawl.topology.cli.crawl import CrawlSetup
    from streamcrawl.topology.embedded.runner import EmbeddedCrawl
    from streamcrawl.topology.settings import Settings

__all__ = ["ConfigError", "CrawlError", "InvalidURL", "Page", "StateError", "crawl", "pages"]

log = logging.getLogger(__name__)


def crawl(*urls: str, **options: Any) -> AsyncGenerator[Page, None]:
    """Crawl ``urls`` in this process, as ``streamcrawl crawl`` does, and yield each page record
    once its state is committed (the record ``pages.jsonl`` gets, in the same order).

    ``options`` are the flags of ``streamcrawl crawl`` with underscores for dashes
    (docs/cli.md): ``max_pages=10``, ``delay=0``, ``ignore_robots=True``,
    ``include=[r"/docs/"]``, ``header_for=[(origin, "X-A: 1")]``, ``out=...``,
    ``state_dir=...``, ``crawl_id=...``, ``allow_network=[...]``, ``proxy=...``... Checked
    here, before anything starts: ``TypeError`` for an unknown option or a value of the wrong
    shape, ``ConfigError`` or ``InvalidURL`` for a value the command would refuse.

    The same ``crawl_id`` and ``state_dir`` resume the crawl after the iterator was closed,
    cancelled or the process killed; a resumed crawl yields the pages fetched after the resume,
    never a page an earlier run committed. Closing the iterator (``break``, ``aclose()``, or
    cancelling the task that awaits it, as Ctrl-C under ``asyncio.run`` does) stops the crawl:
    the requests in flight get their grace, what they fetch is committed (to the files, not
    yielded) and the store is closed. ``contextlib.aclosing`` closes it at once; after a bare
    ``break`` the event loop closes it, and a new crawl of the same state waits for that.
    """
    from streamcrawl.topology.cli.crawl import crawl_args, crawl_setup

    return _crawl(crawl_setup(crawl_args(urls, options)))


async def _crawl(setup: CrawlSetup) -> AsyncGenerator[Page, None]:
    embedded = await _open(setup)
    try:
        await embedded.start()
        while (committed := await embedded.step()) is not None:
            for page in committed:
                yield page
    finally:
        await embedded.close()


async def _open(setup: CrawlSetup) -> EmbeddedCrawl:
    """``setup``'s crawl, open. A crawl of this process may still hold the store while it
    closes (its requests in flight get ``STOP_GRACE``): wait that long for it, then give up
    with ``StateError``."""
    import asyncio
    import time

    from streamcrawl.topology.embedded.runner import STOP_GRACE

    deadline = time.monotonic() + STOP_GRACE + 1.0
    while True:
        try:
            return setup.open()
        except StateError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def pages(
    crawl_id: str | None = None,
    *,
    from_beginning: bool = False,
    follow: bool = False,
    changes: bool = False,
    **settings: Any,
) -> Generator[Page, None, None]:
    """The page records of the Kafka wiring's ``pages`` topic, as ``streamcrawl pages`` reads
    them, each decoded into the current ``Page`` whatever schema version its producer wrote.

    ``crawl_id``: that crawl's pages only. From the oldest page with ``from_beginning``, else
    from the end; up to the end of each partition as it was at the first ``next()``, or for
    good with ``follow``. ``changes``: without the revisits that found their page unchanged.
    ``settings``: the ``kafka_*`` settings and ``topic_prefix`` (``kafka_bootstrap="host:9092"``),
    else ``STREAMCRAWL_*`` from the environment (docs/cli.md, "Settings"). A synchronous
    generator (confluent-kafka): its consumer never commits and closes with it. A value that
    does not decode is logged and left out.

    Needs the kafka extra: ``ConfigError`` naming it otherwise. ``TypeError`` for a keyword that
    is no such setting, ``ConfigError`` for a bad value; ``CrawlError`` at the first ``next()``
    if Kafka is unreachable or the topic does not exist.
    """
    from streamcrawl.topology.cli.kafka_args import INSTALL_KAFKA_EXTRA, missing_kafka_extra

    missing = missing_kafka_extra()
    if missing is not None:
        raise ConfigError(
            f"streamcrawl.pages needs the kafka extra ({missing} is not installed): "
            + INSTALL_KAFKA_EXTRA
        )
    from streamcrawl.topology.settings import Settings, load_settings

    known = {name for name in Settings.model_fields if name.startswith("kafka_")}
    unknown = sorted(set(settings) - known - {"topic_prefix"})
    if unknown:
        raise TypeError(f"pages() got an unexpected keyword argument {unknown[0]!r}")
    return _pages(load_settings(**settings), crawl_id, from_beginning, follow, changes)


def _pages(
    settings: Settings, crawl_id: str | None, from_beginning: bool, follow: bool, changes: bool
) -> Generator[Page, None, None]:
    from streamcrawl.topology.admin.pages import read_pages

    records = read_pages(
        settings,
        crawl_id,
        from_beginning=from_beginning,
        follow=follow,
        changes=changes,
        skipped=_skipped,
    )
    with contextlib.closing(records):
        for page, _ in records:
            yield page


def _skipped(offset: int | None, exc: Exception) -> None:
    log.warning("skipping the pages message at offset %s: %s", offset, exc)
