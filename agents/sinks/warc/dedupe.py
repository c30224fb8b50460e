"""Digest dedupe of page assets: an asset whose payload one writer archived already, under any
URL, is written as an ``identical-payload-digest`` revisit of that response (docs/warc.md,
"Revisits").

Pages share their assets (the same logo under two names, a CDN's copy of a library, a
stylesheet with a new query string): each repeat of a payload costs a revisit record of the
response head instead of the payload again. Only assets (captures of kind ``asset`` and
``stylesheet``) are matched, and only whole 200 responses: a page, an error or a truncated
body is always written in full.

The digests are those of one writer (``WarcFiles``) since it started, at most ``limit`` of
them (the oldest forgotten first). A writer that starts again (a resumed crawl, a Kafka writer
after a restart) knows none: its first copy of a payload is a response again, never a revisit
of a record it did not see written.
"""

from __future__ import annotations

import msgspec

from streamcrawl.agents.sinks.warc.records import sha1_digest
from streamcrawl.schemas.records import Capture, CaptureRevisit

DEDUPED_KINDS = ("asset", "stylesheet")
DEFAULT_LIMIT = 100_000


class PayloadDigests:
    """The payload digests of the asset responses written so far -> where the first one went
    (target URI and date: what a revisit refers to), per crawl id."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"payload digests: limit {limit} must be > 0")
        self.limit = limit
        self._first: dict[tuple[str, str], tuple[str, float]] = {}

    def __len__(self) -> int:
        return len(self._first)

    def dedupe(self, capture: Capture) -> Capture:
        """``capture`` as it is to be written: a revisit of the first response of the same
        payload when this writer wrote one already, else unchanged (and, when it is an asset's
        whole 200 response, remembered). A capture written a second time (a replay) is its own
        first copy: written again as the response it was."""
        if capture.kind not in DEDUPED_KINDS or capture.revisit is not None:
            return capture
        last = capture.exchanges[-1]
        if not last.payload or last.truncated is not None or not _ok(last.response):
            return capture
        key = (capture.crawl_id, sha1_digest(last.payload))
        first = self._first.get(key)
        if first is None:
            if len(self._first) >= self.limit:
                del self._first[next(iter(self._first))]
            self._first[key] = (last.target_uri, last.date)
            return capture
        if first == (last.target_uri, last.date):
            return capture
        revisit = CaptureRevisit(
            profile="identical-payload-digest", refers_to_uri=first[0], refers_to_date=first[1]
        )
        return msgspec.structs.replace(capture, revisit=revisit)


def _ok(head: bytes) -> bool:
    """Whether the status line of the response ``head`` says 200."""
    parts = head[: head.find(b"\r\n")].split(b" ", 2)
    return len(parts) > 1 and parts[1] == b"200"
