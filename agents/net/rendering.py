"""The render stage: after the HTTP fetch of an HTML page, render it when the crawl says so.

``render_view`` decides (``agents/policy/rendering.py``: ``--render`` and ``--render-include``,
the guess and the origin's tallies for ``auto``), renders the response the crawl fetched in the
process's ``Renderer`` (``agents/render/browser.py``), every subrequest served by
``Subrequests`` on the crawl's own network path, and returns what the parse stage reads: the
rendered DOM, or the HTTP copy with the render's error (docs/rendering.md, "Failures": a page
whose render failed keeps its HTTP copy; its record says why).

In the Kafka wiring the fetch worker renders nothing: ``render_request`` is what it hands to a
render worker instead (a ``RenderRequest`` on the ``render`` topic), and ``handed_dispatch``,
``handed_result`` and ``handed_request`` rebuild there what the render and the parse read
(docs/rendering.md, "The Kafka wiring").
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import aiohttp

from streamcrawl.agents.content.charset import decode_html
from streamcrawl.agents.errors import RenderError
from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.capture import Recorder
from streamcrawl.agents.net.fetch import FetchResult
from streamcrawl.agents.net.other_origins import OtherOrigins
from streamcrawl.agents.net.request import RequestContext
from streamcrawl.agents.net.subrequests import Subrequests
from streamcrawl.agents.policy import rendering
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.render.browser import Renderer
from streamcrawl.agents.render.page import Served
from streamcrawl.agents.robots.rules import RobotsRules
from streamcrawl.agents.urls.cookies import receive
from streamcrawl.schemas.records import RenderRequest

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass
class RenderView:
    """What a render adds to a fetched page. ``html``: the rendered DOM (None: the render
    failed, ``error`` says why); ``needed``: ``auto`` compared the render with the HTTP copy
    (None: not compared); ``navigation``: where a script tried to send the page; ``sent_at``:
    when the last request to the origin was on the wire (the page's or a subrequest's)."""

    html: str | None
    render_ms: float | None
    refused: int
    sent_at: float
    error: str | None = None
    navigation: str | None = None
    needed: bool | None = None


def wants_render(d: Dispatch, result: FetchResult) -> bool:
    """Whether the page of ``result`` is rendered: a new or changed HTML page (2xx) of a crawl
    whose ``--render`` and ``--render-include`` say so."""
    entry, rules = d.entry, d.rules
    policy = rules.policy
    if policy.render == "never" or entry is None or entry.kind != "page":
        return False
    if result.text is None or result.content_type not in HTML_TYPES or result.status >= 300:
        return False
    included = rules.render_included(result.final_url)
    looks = False
    if rendering.needs_http_signals(policy.render, included):
        looks = rendering.looks_client_built(rendering.signals(result.text))
    return rendering.decide(
        policy.render,
        result.final_url,
        included=included,
        any_include=bool(rules.render_include),
        looks=looks,
        tally=d.renders.get(rendering.path_prefix(result.final_url)),
    )


async def render_view(
    renderer: Renderer,
    session: aiohttp.ClientSession,
    d: Dispatch,
    result: FetchResult,
    request: RequestContext,
    recorder: Recorder | None,
    others: OtherOrigins | None = None,
) -> RenderView:
    """Render the page of ``result`` (``wants_render`` said so); never raises ``RenderError``:
    a failed render is a view without ``html``. ``others``: how subrequests to other origins
    are made (None: they are refused, ``cross_origin``)."""
    serve = Subrequests(session, d, request, recorder, last_sent=result.sent_at, others=others)
    if others is not None and others.owner.lends_own:  # its subrequests borrow the slot
        others.owner.fetched(d.origin, d.seq, result.sent_at)
    document = Served(result.status, dict(result.headers), result.body)
    try:
        rendered = await renderer.render(
            d.origin, result.final_url, document, serve, loads=serve.loads
        )
    except RenderError as exc:
        log.info("render of %s failed: %s", result.final_url, exc, extra={"origin": d.origin})
        error = f"{exc.error_class}: {exc}"
        return RenderView(None, None, 0, serve.last_sent, error=error[:500])
    finally:
        await serve.close()
    needed = None
    if d.rules.policy.render == "auto" and result.text is not None:
        before = rendering.signals(result.text).hrefs
        needed = rendering.found_more(before, rendering.signals(rendered.html).hrefs)
    return RenderView(
        rendered.html,
        rendered.render_ms,
        rendered.refused,
        serve.last_sent,
        navigation=rendered.navigation,
        needed=needed,
    )


def render_request(
    d: Dispatch,
    result: FetchResult,
    final_url: str,
    request: RequestContext,
    recorder: Recorder | None,
    dispatched_at: float,
    expires_at: float,
) -> RenderRequest:
    """What a render worker needs of the fetched page of ``d`` (``final_url`` canonical)."""
    entry = d.entry
    assert entry is not None
    robots_status, robots_body = d.robots_txt if d.robots_txt is not None else (None, None)
    return RenderRequest(
        crawl_id=entry.crawl_id,
        origin=d.origin,
        seq=d.seq,
        entry=entry,
        final_url=final_url,
        response_url=result.final_url,
        status=result.status,
        headers=result.headers,
        content_type=result.content_type,
        charset=result.charset,
        body=result.body,
        started_at=result.started_at,
        elapsed_ms=result.elapsed_ms,
        sent_at=result.sent_at,
        redirects=result.redirects,
        robots_status=robots_status,
        robots_body=robots_body,
        cookies=d.cookies,
        set_cookies=tuple(request.set_cookies),
        exchanges=tuple(recorder.exchanges) if recorder is not None else (),
        dispatched_at=dispatched_at,
        expires_at=expires_at,
    )


def handed_dispatch(req: RenderRequest, rules: CrawlRules) -> Dispatch:
    """The page dispatch ``req`` was fetched for, under the crawl's ``rules``."""
    robots = None
    if req.robots_status is not None:
        robots = RobotsRules.from_response(req.robots_status, req.robots_body)
    robots_txt = (req.robots_status, req.robots_body) if robots is not None else None
    return Dispatch(
        "page",
        req.origin,
        req.seq,
        req.entry,
        rules,
        robots,
        cookies=req.cookies,
        robots_txt=robots_txt,
    )


def handed_result(req: RenderRequest) -> FetchResult:
    """The fetch's response as the fetch worker read it (its text decoded with its codec)."""
    text = None
    if req.charset is not None:
        text, _ = decode_html(req.body, req.charset)
    return FetchResult(
        url=req.entry.url,
        final_url=req.response_url,
        status=req.status,
        headers=dict(req.headers),
        content_type=req.content_type,
        charset=req.charset,
        body=req.body,
        text=text,
        started_at=req.started_at,
        elapsed_ms=req.elapsed_ms,
        sent_at=req.sent_at,
        redirects=req.redirects,
    )


def handed_request(request: RequestContext, req: RenderRequest) -> RequestContext:
    """``request`` (the render worker's, for the same dispatch) as the page's fetch left it:
    the cookies its responses set in the jar, their headers kept for the outcome."""
    jar = request.jar
    if jar is not None:
        now = time.time()
        for cookie in req.set_cookies:
            jar = receive(jar, cookie.header, cookie.url, now)
    return dataclasses.replace(request, jar=jar, set_cookies=list(req.set_cookies))
