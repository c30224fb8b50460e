"""The robots.txt fetch: the GET whose ``(status, text)`` ``RobotsRules.from_response`` reads.

What each answer means for the rules is decided in ``agents/robots/rules.py``; this module only
gets the file, through the same session, headers, timeouts, SSRF guard and redirect resolver
(``agents/net/redirects.py``) as a page fetch.
"""

from __future__ import annotations

import logging
import time

import aiohttp

from streamcrawl.agents.net.capture import Recorder, record_rest
from streamcrawl.agents.net.fetch import SentAt, client_timeout, hop, plain_request
from streamcrawl.agents.net.guard import blocked_error
from streamcrawl.agents.net.redirects import REDIRECT_STATUSES, resolve_redirect
from streamcrawl.agents.net.request import RequestContext
from streamcrawl.agents.net.response import read_body
from streamcrawl.agents.robots.rules import (
    ROBOTS_BLOCKED,
    ROBOTS_MAX_BYTES,
    ROBOTS_MAX_REDIRECTS,
    robots_text,
    robots_url,
)
from streamcrawl.schemas.records import CrawlPolicy

log = logging.getLogger(__name__)


async def fetch_robots(
    session: aiohttp.ClientSession,
    origin: str,
    policy: CrawlPolicy,
    sent: SentAt | None = None,
    recorder: Recorder | None = None,
    request: RequestContext | None = None,
) -> tuple[int | None, str | None]:
    """GET ``origin``/robots.txt; returns ``(status, text)``, never raises for network errors.

    Redirects are followed by hand, up to ``ROBOTS_MAX_REDIRECTS`` (RFC 9309: at least five),
    to any http(s) URL; the rules still apply to ``origin``. A sixth redirect, or one without a
    usable Location, returns ``(3xx, None)``, which ``RobotsRules.from_response`` reads as
    "unavailable" (allow all). ``text`` is the first 500 KiB decoded as UTF-8 for a 2xx, else
    None. ``(None, None)``: unreachable (DNS, connection refused or reset, timeout).
    ``(ROBOTS_BLOCKED, None)``: the SSRF guard refused an address on the way. ``sent``
    (optional) gets when the last request was written, for the origin's politeness delay.
    ``recorder`` (a crawl that archives) gets each response's exchange. ``request``: what the
    crawl's requests to ``origin`` carry (its headers, cookies and credential; the proxy).
    """
    url = robots_url(origin)
    sent = sent or SentAt()  # the WARC-Date of an archived robots.txt
    status: int | None = None
    request = request if request is not None else plain_request(policy)
    timeout = client_timeout(policy)
    try:
        for _ in range(ROBOTS_MAX_REDIRECTS + 1):
            headers = request.headers_for(url)
            async with hop(session, url, headers, timeout, sent, request) as resp:
                request.received(resp, url)
                status = resp.status
                if recorder is not None:
                    recorder.begin(resp, sent.at or time.time())
                    if not 200 <= status <= 299:
                        await record_rest(resp, recorder, ROBOTS_MAX_BYTES)
                if status in REDIRECT_STATUSES:
                    target = resolve_redirect(url, resp.headers.get("Location"))
                    if target is None:
                        return status, None
                    url = target
                    continue
                if not 200 <= status <= 299:
                    return status, None
                # One byte over the cap tells robots_text the file was cut: it drops the last line.
                chunks = recorder.chunks if recorder is not None else None
                body = await read_body(resp, ROBOTS_MAX_BYTES + 1, truncate=True, raw_parts=chunks)
                if recorder is not None:
                    recorder.end_read(truncated="length" if len(body) > ROBOTS_MAX_BYTES else None)
                return status, robots_text(body)
        return status, None
    except Exception as exc:
        if blocked_error(exc) is not None:
            log.info("robots.txt for %s not fetched: %s", origin, blocked_error(exc))
            return ROBOTS_BLOCKED, None
        # aiohttp errors, timeouts, OSError, ValueError (a URL yarl refuses), FetchPermanent (a
        # corrupt or unknown Content-Encoding): all mean "could not get the file".
        log.debug("robots.txt for %s unreachable: %r", origin, exc)
        return None, None
