"""The ``pages`` topic read back as records: what ``streamcrawl pages`` prints and
``streamcrawl.pages`` yields."""

from __future__ import annotations

from collections.abc import Callable, Generator

import msgspec

from streamcrawl.schemas.codec import BadMessage, decode
from streamcrawl.schemas.records import Page
from streamcrawl.topology.admin import topics
from streamcrawl.topology.settings import Settings


class _Head(msgspec.Struct):
    """What a value is filtered by, read before the whole record is decoded."""

    crawl_id: str
    change: str | None = None


_head = msgspec.json.Decoder(_Head)

# Told of a value that is no page record of a known version: its offset, and why.
Skipped = Callable[[int | None, Exception], None]


def read_pages(
    settings: Settings,
    crawl_id: str | None = None,
    *,
    from_beginning: bool,
    follow: bool,
    skipped: Skipped,
    changes: bool = False,
) -> Generator[tuple[Page, bytes], None, None]:
    """Each page record of the ``pages`` topic, decoded into the current ``Page`` whatever
    schema version its producer wrote, with its value as published.

    From the oldest page with ``from_beginning``, else from the end; up to the end offsets seen
    at start, or for good with ``follow`` (``topics.read_messages``: a throwaway consumer that
    never commits, closed when the iterator is). ``crawl_id``: that crawl's pages only;
    ``changes``: without the revisits that found their page unchanged. A value that does not
    decode is passed to ``skipped`` and left out. Raises CrawlError if Kafka is unreachable or
    the topic does not exist.
    """
    messages = topics.read_messages(
        settings, "pages", group="pages", from_beginning=from_beginning, follow=follow
    )
    try:
        for msg in messages:
            value = msg.value()
            if value is None:
                continue
            try:
                head = _head.decode(value)
                if crawl_id is not None and head.crawl_id != crawl_id:
                    continue
                if changes and head.change == "unchanged":
                    continue
                page: Page = decode("pages", value)
            except (BadMessage, msgspec.DecodeError) as exc:
                skipped(msg.offset(), exc)
                continue
            yield page, value
    finally:
        messages.close()
