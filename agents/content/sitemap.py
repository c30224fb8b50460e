"""Sitemaps (sitemaps.org protocol 0.9): the URLs a site lists, read safely and within limits.

``parse_sitemap(body, url)`` reads a ``<urlset>`` (page URLs, each with its ``lastmod``) or a
``<sitemapindex>`` (more sitemaps), gzip-compressed or not; pure and total: a broken or hostile
file yields what could be read before the problem, never an exception.

Limits (the protocol's): at most ``MAX_URLS`` (50,000) entries and ``MAX_BYTES`` (50 MiB)
uncompressed per file; what lies beyond is ignored (logged). Index nesting is bounded by the
caller (``MAX_NESTING``). XML goes through ``defusedxml``: a document type with entity
declarations (billion laughs, external entities: XXE) is refused, so no entity is ever expanded
and nothing external is ever fetched. The same reader serves feeds (``agents/content/feeds.py``).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from typing import Final, NamedTuple
from xml.etree.ElementTree import Element

log = logging.getLogger(__name__)

MAX_URLS: Final = 50_000
MAX_BYTES: Final = 50 * 1024 * 1024
MAX_NESTING: Final = 2  # an index at depth 0 or 1 is expanded; deeper indexes are not
MAX_LOC_CHARS: Final = 2048
SITEMAP_TYPES: Final = (
    "application/xml",
    "text/xml",
    "application/gzip",
    "application/x-gzip",
    "application/octet-stream",
    "text/plain",  # some servers send .xml files as text
)
_GZIP_MAGIC: Final = b"\x1f\x8b"
_CHUNK: Final = 1 << 20


class Listed(NamedTuple):
    """One ``<loc>`` of a sitemap, with its ``<lastmod>`` and ``<changefreq>`` (as written,
    None if absent)."""

    loc: str
    lastmod: str | None
    changefreq: str | None = None


class Sitemap(NamedTuple):
    """A parsed sitemap: page URLs (``urlset``) and/or child sitemaps (``sitemapindex``)."""

    urls: list[Listed]
    sitemaps: list[Listed]


def gunzip_capped(body: bytes, cap: int = MAX_BYTES) -> bytes:
    """``body`` decompressed if it is gzip (by its magic bytes), at most ``cap`` bytes of it;
    a corrupt stream yields what decompressed before the damage."""
    if not body.startswith(_GZIP_MAGIC):
        return body[:cap]
    inflater = zlib.decompressobj(wbits=31)
    out = bytearray()
    try:
        data = body
        while data and len(out) < cap:
            out += inflater.decompress(data, min(_CHUNK, cap - len(out)))
            data = inflater.unconsumed_tail
    except zlib.error:
        log.info("corrupt gzip data after %d bytes", len(out))
    if len(out) >= cap:
        log.info("document over %d bytes uncompressed: the rest is ignored", cap)
    return bytes(out)


def xml_elements(document: bytes) -> Iterator[Element]:
    """Each element of ``document`` when it ends (namespace stripped from ``tag``), safely:
    entity declarations and external references are refused; parsing stops at the first error
    after yielding what came before it."""
    # Imported on first use: a crawl that reads no sitemap or feed never loads the XML parser.
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import XMLParser, iterparse  # type: ignore[attr-defined]

    # Memory stays bounded by the document (already capped), and children are freed as read.
    parser = XMLParser(target=None, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    try:
        for _, element in iterparse(_Reader(document), events=("end",), parser=parser):
            element.tag = element.tag.rpartition("}")[2]
            yield element
    except (DefusedXmlException, SyntaxError, ValueError) as exc:
        log.info("XML document refused or cut short: %s", exc)


def text_of(element: Element, name: str) -> str | None:
    """The stripped text of ``element``'s first child named ``name`` (namespace ignored)."""
    for child in element:
        if child.tag == name:
            return (child.text or "").strip() or None
    return None


def parse_sitemap(body: bytes) -> Sitemap:
    """The entries of a sitemap or sitemap index (see the module docstring); never raises."""
    result = Sitemap([], [])
    count = 0
    for element in xml_elements(gunzip_capped(body)):
        if element.tag not in ("url", "sitemap"):
            continue
        loc = text_of(element, "loc")
        lastmod = text_of(element, "lastmod")
        changefreq = text_of(element, "changefreq")
        element.clear()
        if not loc or len(loc) > MAX_LOC_CHARS:
            continue
        count += 1
        if count > MAX_URLS:
            log.info("sitemap lists more than %d URLs: the rest is ignored", MAX_URLS)
            break
        entry = Listed(
            loc, lastmod[:64] if lastmod else None, changefreq[:16] if changefreq else None
        )
        (result.urls if element.tag == "url" else result.sitemaps).append(entry)
    return result


class _Reader:
    """A file-like view of bytes for ``iterparse``, read in chunks."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0

    def read(self, size: int = -1) -> bytes:
        size = len(self._data) - self._pos if size < 0 else size
        chunk = self._data[self._pos : self._pos + size]
        self._pos += len(chunk)
        return bytes(chunk)
