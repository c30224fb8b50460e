"""Where a redirect goes: the one resolver of the page fetch and the robots fetch.

Both fetches follow redirects by hand (``allow_redirects=False``) so that each hop passes their
own checks; the hop's target is computed here, once, so a page and a robots.txt that send the
same Location header are sent to the same URL.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.urls.canonical import resolve

REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})


def resolve_redirect(base: str, location: str | None) -> str | None:
    """The absolute http(s) URL a ``Location`` header received from ``base`` points to, without
    its fragment; None when there is no Location, or it is no URL, not http(s), or has no host.

    The header is resolved as a browser resolves it (the WHATWG URL parser, as links are:
    ``canonical.resolve``).

    >>> resolve_redirect("http://a.test/dir/page", "../b#top")
    'http://a.test/b'
    >>> resolve_redirect("http://a.test/", "mailto:x@a.test") is None
    True
    """
    if not location:
        return None
    try:
        target = resolve(location, base).partition("#")[0]
        parts = urlsplit(target)
    except (InvalidURL, ValueError):
        return None
    return target if parts.scheme in ("http", "https") and parts.hostname else None
