"""The embedded crawl's output: ``pages.jsonl`` and ``urls.jsonl``, transactional with its state.

Lines are appended and flushed before the frontier state is committed; the committed byte
offsets are stored in the same atomic state write. On open, each file is cut back to its
committed offset, so lines written by an attempt whose outcome never committed (``kill -9``)
disappear, and the URL's re-fetch writes them once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import msgspec

from streamcrawl.schemas.records import Page, UrlStatus

PAGES = "pages.jsonl"
URLS = "urls.jsonl"

_encode = msgspec.json.Encoder().encode


class JsonlOutput:
    """The embedded crawl's output files; not a ``Sink`` (``agents.sinks.contract``).

    It answers no queries and is synchronous: the embedded runner calls ``write`` inside its
    state commit and stores ``offsets()`` in the same atomic write, which is what makes
    ``pages.jsonl``/``urls.jsonl`` exactly-once (a ``Sink`` is idempotent by timestamps instead).
    """

    def __init__(self, out_dir: Path, committed: tuple[int, int] = (0, 0)) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.out_dir = out_dir
        self._pages = self._open(out_dir / PAGES, committed[0])
        self._urls = self._open(out_dir / URLS, committed[1])

    @staticmethod
    def _open(path: Path, committed: int) -> BinaryIO:
        fh = open(path, "ab")  # noqa: SIM115 - closed in close()
        size = fh.tell()
        if size > committed:
            fh.truncate(committed)  # drop lines whose state never committed
            fh.seek(committed)
        return fh

    def write(self, output: Iterable[tuple[Page | None, list[UrlStatus]]]) -> None:
        """Append each (page, statuses) in order, then flush each file to the OS once
        (survives a process kill, not a power cut)."""
        pages = urls = False
        for page, statuses in output:
            if page is not None:
                self._pages.write(_encode(page) + b"\n")
                pages = True
            if statuses:
                self._urls.write(b"".join(_encode(s) + b"\n" for s in statuses))
                urls = True
        if pages:
            self._pages.flush()
        if urls:
            self._urls.flush()

    def offsets(self) -> tuple[int, int]:
        return self._pages.tell(), self._urls.tell()

    def close(self) -> None:
        for fh in (self._pages, self._urls):
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
