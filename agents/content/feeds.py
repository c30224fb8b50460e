"""RSS 2.0 and Atom feeds: the entry links of a feed a page links to (``<link rel=alternate
type=application/rss+xml|atom+xml>``), read with the same safety and limits as sitemaps.

``parse_feed(body)`` returns the raw entry links, in document order: an RSS ``<item>``'s
``<link>`` (else its ``<guid>`` unless ``isPermaLink="false"``), an Atom ``<entry>``'s
``<link href>`` whose ``rel`` is ``alternate`` or absent. Relative links are resolved by the
caller against the feed's URL (Atom's ``xml:base`` is not read). Pure and total.
"""

from __future__ import annotations

import logging
from typing import Final
from xml.etree.ElementTree import Element

from streamcrawl.agents.content.sitemap import (
    MAX_LOC_CHARS,
    MAX_URLS,
    gunzip_capped,
    text_of,
    xml_elements,
)

log = logging.getLogger(__name__)

FEED_TYPES: Final = (
    "application/rss+xml",
    "application/atom+xml",
    "application/xml",
    "text/xml",
    "application/rdf+xml",
)


def parse_feed(body: bytes) -> list[str]:
    """Entry links of an RSS 2.0 or Atom document (see the module docstring); never raises."""
    links: list[str] = []
    for element in xml_elements(gunzip_capped(body)):
        if element.tag == "item":
            link = text_of(element, "link") or _permalink(element)
        elif element.tag == "entry":
            link = _atom_link(element)
        else:
            continue
        element.clear()
        if link and len(link) <= MAX_LOC_CHARS:
            links.append(link)
            if len(links) >= MAX_URLS:
                log.info("feed lists more than %d entries: the rest is ignored", MAX_URLS)
                break
    return links


def _permalink(item: Element) -> str | None:
    for child in item:
        if child.tag == "guid" and child.get("isPermaLink", "true").strip().lower() != "false":
            return (child.text or "").strip() or None
    return None


def _atom_link(entry: Element) -> str | None:
    for child in entry:
        if child.tag == "link" and child.get("rel", "alternate").strip() == "alternate":
            return (child.get("href") or "").strip() or None
    return None
