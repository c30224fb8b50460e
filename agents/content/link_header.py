"""``Link:`` response headers (RFC 8288): the targets a crawler follows or records.

``header_links`` reads a (possibly joined) ``Link`` header value into ``(target, rels)`` pairs;
``page_rels`` picks what the stages use: ``rel=canonical`` (recorded on the page) and
``next``/``prev`` (followed like ``<link rel=next>``). Pure and total: a malformed part is
skipped, never an error; linear in the header's length.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final, NamedTuple

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.urls.canonical import resolve

MAX_LINK_HEADER_CHARS: Final = 64 * 1024  # a longer header is read only up to here
FOLLOWED_RELS: Final = frozenset({"next", "prev", "previous"})


class HeaderLinks(NamedTuple):
    """What a response's ``Link`` headers say, as absolute URLs (not yet canonicalized)."""

    canonical: str | None
    follow: list[str]


def header_links(value: str) -> Iterator[tuple[str, frozenset[str]]]:
    """``(target, rels)`` of each link-value in ``value``; rels lower-cased.

    A scan by hand, not a regex: each character is read once whatever the input (a regex with
    an open ``<`` or quote to match would rescan the rest of a hostile header at every one).
    """
    value = value[:MAX_LINK_HEADER_CHARS]
    pos = 0
    while (start := value.find("<", pos)) != -1:
        end = value.find(">", start + 1)
        if end == -1:
            return
        stop = _value_end(value, end + 1)
        pos = stop + 1
        target = value[start + 1 : end].strip()
        rels = _rels(value[end + 1 : stop])
        if target and rels:
            yield target, rels


def _value_end(value: str, pos: int) -> int:
    """Where the link-value whose parameters start at ``pos`` ends: a "," outside quotes."""
    quoted = False
    while pos < len(value):
        char = value[pos]
        if quoted:
            if char == "\\":
                pos += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char == ",":
            return pos
        pos += 1
    return pos


def _rels(params: str) -> frozenset[str]:
    for param in params.split(";"):
        name, _, rel = param.partition("=")
        if name.strip().lower() == "rel":  # RFC 8288 3.3: only the first rel parameter counts
            return frozenset(rel.strip().strip('"').lower().split())
    return frozenset()


def page_rels(headers: Mapping[str, str], url: str) -> HeaderLinks:
    """The first ``rel=canonical`` target and the ``next``/``prev`` targets of ``headers``
    (lower-cased names, as ``FetchResult.headers``), resolved against the response's ``url``
    as browsers resolve them; targets that do not resolve are skipped."""
    value = headers.get("link")
    if not value:
        return HeaderLinks(None, [])
    canonical = None
    follow = []
    for target, rels in header_links(value):
        try:
            absolute = resolve(target, url)
        except InvalidURL:
            continue
        if "canonical" in rels and canonical is None:
            canonical = absolute
        if rels & FOLLOWED_RELS and "nofollow" not in rels:
            follow.append(absolute)
    return HeaderLinks(canonical, follow)
