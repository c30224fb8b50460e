"""streamcrawl as a library (docs/api.md): ``crawl``, an embedded crawl as an async iterator of
its page records, and ``pages``, the Kafka wiring's page stream as the same typed records.

This folder is the ``streamcrawl`` package itself (pyproject.toml's package-dir), so that
``import streamcrawl`` has these names. Importing it loads the records and the errors only: the
crawl's modules load at the first ``crawl``, the Kafka client (the kafka extra) at the first
``pages``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from streamcrawl.agents.errors import ConfigError, CrawlError, InvalidURL, StateError
from streamcrawl.schemas.records import Page

if TYPE_CHECKING:
    from streamcrawl.topology.cli.crawl import CrawlSetup
    from streamcrawl.topology.embedded.runner import EmbeddedCrawl

__all__ = ["ConfigError", "CrawlError", "InvalidURL", "Page", "StateError", "crawl"]


def crawl(*urls: str, **options: Any) -> AsyncIterator[Page]:
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


async def _crawl(setup: CrawlSetup) -> AsyncIterator[Page]:
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
