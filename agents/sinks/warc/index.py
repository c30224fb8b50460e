"""A CDXJ index of WARC files, the format pywb and cdxj-indexer read (docs/warc.md, "Index").

One line per response or revisit record: ``<SURT key> <14-digit timestamp> {json}``, the JSON
holding url, mime, status, digest, length, offset and filename; lines sorted. A record whose
WARC-Record-ID was indexed already (a capture written again by a replay after a crash) is
dropped, so every capture is indexed once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from warcio.archiveiterator import ArchiveIterator

INDEXED = ("response", "revisit")
_WWW = re.compile(r"www\d*\.")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def surt(url: str) -> str:
    """The SURT key of an http(s) URL as pywb's default ``surt.surt`` writes it, for the URLs
    a crawl writes (canonical already): host lowercased, ``www``/``wwwN.`` dropped, labels
    reversed and joined by commas (IPv4 too), then the port unless it is the scheme's default,
    ``)``, the path lowercased without its trailing slash (``/`` for none), and the query
    lowercased with its parameters sorted; no fragment, no userinfo. Session ids are not
    stripped. Any other URL is returned unchanged."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return url
    host = parts.hostname.rstrip(".")
    if ":" in host:  # IPv6: kept whole
        key = f"[{host}]"
    else:
        host = host[m.end() :] if (m := _WWW.match(host)) else host
        key = ",".join(reversed(host.split(".")))
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        key += f":{port}"
    path = parts.path.lower().rstrip("/") or "/"
    query = "&".join(sorted(p for p in parts.query.lower().split("&") if p))
    return f"{key}){path}" + (f"?{query}" if query else "")


def cdxj_lines(paths: Iterable[Path]) -> list[str]:
    """The sorted CDXJ lines (without newlines) of the response and revisit records of
    ``paths``, read in the given order: of records with the same WARC-Record-ID, only the
    first is indexed. ``filename`` is each file's name, ``offset``/``length`` its record's gzip
    member; a revisit's mime is ``warc/revisit``; ``digest`` is the payload digest without its
    ``sha1:`` label; ``mime``/``status``/``digest`` are left out when the record has none."""
    seen: set[str] = set()
    lines = []
    for path in paths:
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            for record in it:
                rid = record.rec_headers.get_header("WARC-Record-ID")
                if record.rec_type not in INDEXED or rid in seen:
                    continue
                seen.add(rid)
                entry = _entry(record)
                it.read_to_end(record)
                entry["length"] = str(it.get_record_length())
                entry["offset"] = str(it.get_record_offset())
                entry["filename"] = path.name
                lines.append(_line(record.rec_headers.get_header("WARC-Date"), entry))
    return sorted(lines)


def _entry(record: Any) -> dict[str, str]:
    """url, mime, status and digest of a warcio ``ArcWarcRecord`` (untyped)."""
    rec_headers, http = record.rec_headers, record.http_headers
    entry = {"url": rec_headers.get_header("WARC-Target-URI")}
    if record.rec_type == "revisit":
        entry["mime"] = "warc/revisit"
    elif http is not None and (mime := http.get_header("Content-Type")):
        entry["mime"] = re.split(r"[;\s]", mime.strip(), maxsplit=1)[0].lower()
    if http is not None and http.get_statuscode():
        entry["status"] = http.get_statuscode()
    digest = rec_headers.get_header("WARC-Payload-Digest")
    if digest:
        entry["digest"] = digest.split(":", 1)[-1]
    return entry


def _line(warc_date: str, entry: dict[str, str]) -> str:
    timestamp = re.sub(r"\D", "", warc_date)[:14]
    return f"{surt(entry['url'])} {timestamp} {json.dumps(entry)}"
