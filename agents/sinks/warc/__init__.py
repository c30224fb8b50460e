"""WARC/1.1 archives of what a crawl fetched (docs/warc.md).

``records`` turns captures into records (pure), ``files`` writes them into rotating files and
recovers after a crash, ``index`` builds a CDXJ index of the files.
"""

from __future__ import annotations

from streamcrawl.agents.sinks.warc.files import WarcFiles, recover
from streamcrawl.agents.sinks.warc.index import cdxj_lines, surt
from streamcrawl.agents.sinks.warc.records import (
    DEFAULT_LEVEL,
    WarcRecord,
    capture_records,
    record_id,
    warc_date,
    warcinfo_record,
)

__all__ = [
    "DEFAULT_LEVEL",
    "WarcFiles",
    "WarcRecord",
    "capture_records",
    "cdxj_lines",
    "record_id",
    "recover",
    "surt",
    "warc_date",
    "warcinfo_record",
]
