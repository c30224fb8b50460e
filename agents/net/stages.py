"""Carry out one dispatch: fetch robots.txt or a page, parse it, and report what happened.

The report holds everything the wiring must publish: the ``Outcome`` for the frontier, the
``Page`` for the sinks, and ONE ``FrontierBatch`` per target origin of the discovered links.
No state is written here; the embedded runner applies reports directly, the Kafka scheduler
sends them to topics.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import aiohttp
import msgspec
from selectolax.lexbor import LexborHTMLParser

from streamcrawl.agents.content.assets import (
    Asset,
    asset_batches,
    page_assets,
    stylesheet_assets,
)
from streamcrawl.agents.content.extract import Data, extract, nothing
from streamcrawl.agents.content.link_header import page_rels
from streamcrawl.agents.content.listings import (
    LISTING_STATES,
    Found,
    group,
    listed,
    listing_policy,
    merge,
    robots_sitemaps,
)
from streamcrawl.agents.content.maintext import MainText, main_text
from streamcrawl.agents.content.outlinks import PageLinks, canonical_links, followed, record_links
from streamcrawl.agents.content.parse import Link, parse_html, parse_tree
from streamcrawl.agents.content.plugged import plugin_data, plugin_links
from streamcrawl.agents.errors import ErrorClass, FetchError, FetchRetryable
from streamcrawl.agents.frontier.revisits import GONE_STATUSES
from streamcrawl.agents.frontier.scheduler import Dispatch
from streamcrawl.agents.net.capture import Recorder, page_capture
from streamcrawl.agents.net.fetch import FetchResult, SentAt, conditional_headers, fetch
from streamcrawl.agents.net.guard import AddressBlocked
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.other_origins import OtherOrigins
from streamcrawl.agents.net.rendering import RenderView, render_request, render_view, wants_render
from streamcrawl.agents.net.reports import (
    fetched_outcome,
    gone_page,
    link_batches,
    page_outcome,
    page_record,
    unchanged_page,
)
from streamcrawl.agents.net.request import RequestContext
from streamcrawl.agents.net.robots_fetch import fetch_robots
from streamcrawl.agents.plugins.api import PageView
from streamcrawl.agents.policy.assets import MAX_ASSET_DEPTH, asset_policy, is_asset
from streamcrawl.agents.render.browser import Renderer
from streamcrawl.agents.robots.rules import robots_url, x_robots_tag
from streamcrawl.agents.urls.canonical import Canonical
from streamcrawl.schemas.records import (
    MAX_MAIN_TEXT_CHARS,
    Capture,
    FrontierBatch,
    Outcome,
    Page,
    RenderRequest,
    SetCookie,
    TerminalState,
    UrlRef,
)

log = logging.getLogger(__name__)

INTERNAL_ERROR_CHARS = 500  # an exception message can be anything: keep the error a line
SeenCheck = Callable[[str, str], bool]  # (crawl id, canonical URL) -> already seen?


class Body(NamedTuple):
    """A fetched page's or asset's body as received (decoded from its transfer and content
    encodings), for a wiring that keeps a copy (the embedded crawl's ``--save-to``)."""

    url: str
    final_url: str
    content_type: str | None
    charset: str | None
    body: bytes
    page: bool


@dataclass
class Report:
    """The result of one dispatch."""

    outcome: Outcome
    page: Page | None = None
    batches: list[FrontierBatch] = field(default_factory=list)
    # A crawl with ``CrawlPolicy.warc``: the fetch's HTTP exchanges, for the WARC archive.
    capture: Capture | None = None
    # The stage raised (a bug, or input no stage expected): the outcome is an ``internal``
    # retry; the wirings count it (``streamcrawl_pipeline_stage_failures``).
    failed: bool = False
    # A page or asset fetched with a body: what an offline copy saves (a reference to the
    # fetch's bytes; a wiring without a copy drops it with the report).
    body: Body | None = None
    # A page the crawl renders, for a render worker (``Stages`` built with ``render_wait``):
    # the wiring publishes it instead of this report, whose outcome only counts the fetch.
    render: RenderRequest | None = None


class Stages:
    """The fetch-and-parse stage, bound to one HTTP session, the process's ``Network`` (proxy,
    credentials) and a read-only seen lookup. Built by ``agents.net.core.CrawlCore``."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        seen: SeenCheck,
        network: Network | None = None,
        renderer: Renderer | None = None,
        render_wait: float | None = None,
        others: OtherOrigins | None = None,
    ) -> None:
        """``renderer``: the process's browser, for crawls with ``--render`` (None: pages are
        read over HTTP only); ``render_wait``: without a renderer, a page to render is not
        parsed here but handed on (``Report.render``), for a render worker that has this many
        seconds (docs/rendering.md, "The Kafka wiring"); ``others``: how a render's
        subrequests to other origins are made (None: refused)."""
        self.session = session
        self.seen = seen
        self.network = network if network is not None else Network()
        self.renderer = renderer
        self.render_wait = render_wait
        self.others = others

    async def close(self) -> None:
        await self.session.close()

    async def run(self, d: Dispatch) -> Report:
        """Never raises (except ``CancelledError``): errors become outcomes.

        An unexpected exception inside a stage becomes a ``retry`` outcome with an
        ``internal: ...`` error, so the frontier retries the URL up to ``retries`` times and
        then ends it ``failed``, instead of leaving it at its queue head to be dispatched again
        forever. The traceback is logged on the entry's first attempt only.
        """
        started = time.time()
        try:
            return await self._run(d)
        except Exception as exc:
            return self._internal(d, exc, started)

    async def _run(self, d: Dispatch) -> Report:
        if d.kind == "robots":
            return await self._robots(d)
        if d.kind == "due":  # no request: the frontier queues the origin's due revisits
            now = time.time()
            return Report(
                Outcome(
                    crawl_id=d.rules.policy.crawl_id,
                    origin=d.origin,
                    kind="due",
                    seq=d.seq,
                    url=d.origin,
                    state="due",
                    started_at=0.0,
                    finished_at=now,
                )
            )
        assert d.entry is not None
        if d.kind == "deny":
            return Report(page_outcome(d, TerminalState.ROBOTS_DENIED, started=0.0))
        if d.kind == "cancel":
            return Report(
                page_outcome(d, TerminalState.CANCELLED, started=0.0, error="crawl stopped")
            )
        return await self._page(d)

    def _internal(self, d: Dispatch, exc: Exception, started: float) -> Report:
        what = d.entry.url if d.entry is not None else robots_url(d.origin)
        error = f"internal: {type(exc).__name__}: {exc}"[:INTERNAL_ERROR_CHARS]
        if d.entry is None or d.entry.attempts == 0:
            log.exception("stage failed on %s", what, extra={"origin": d.origin})
        else:
            log.warning("stage failed again on %s: %s", what, error, extra={"origin": d.origin})
        if d.kind == "robots":  # an unreachable robots.txt: retried, then the origin is denied
            outcome = Outcome(
                crawl_id=d.rules.policy.crawl_id,
                origin=d.origin,
                kind="robots",
                seq=d.seq,
                url=what,
                state="retry",
                error=error,
                started_at=started,
                finished_at=time.time(),
            )
        else:
            outcome = page_outcome(d, "retry", started=started, error=error)
        return Report(outcome, failed=True)

    def recorder(self, d: Dispatch, request: RequestContext) -> Recorder | None:
        """A recorder for a crawl that archives, redacting secrets unless the crawl keeps them."""
        policy = d.rules.policy
        if not policy.warc:
            return None
        keep = policy.warc_credentials == "keep"
        return Recorder(frozenset() if keep else request.secret_headers())

    async def _robots(self, d: Dispatch) -> Report:
        sent = SentAt()
        dispatched = time.time()
        request = self.network.request(d)
        if isinstance(request, str):  # robots.txt is asked for without the credential
            request = self.network.request(d, credential=False)
            assert not isinstance(request, str)
        recorder = self.recorder(d, request)
        status, body = await fetch_robots(
            self.session, d.origin, d.rules.policy, sent, recorder, request
        )
        outcome = Outcome(
            crawl_id=d.rules.policy.crawl_id,
            origin=d.origin,
            kind="robots",
            seq=d.seq,
            url=robots_url(d.origin),
            state=TerminalState.FETCHED,
            status=status,
            # The origin's delay counts from when the request was on the wire (as for pages).
            started_at=sent.at or dispatched,
            finished_at=time.time(),
            robots_status=status,
            robots_body=body,
            set_cookies=tuple(request.set_cookies),
        )
        crawl_id = d.rules.policy.crawl_id
        report = Report(outcome, batches=robots_sitemaps(d.rules, crawl_id, d.origin, status, body))
        if recorder is not None and recorder.exchanges:
            report.capture = Capture(
                crawl_id=crawl_id,
                origin=d.origin,
                url=outcome.url,
                kind="robots",
                elapsed_ms=(outcome.finished_at - dispatched) * 1000.0,
                exchanges=tuple(recorder.exchanges),
            )
        return report

    async def _page(self, d: Dispatch) -> Report:
        if d.rules.plugins.missing is not None:  # nothing is sent (docs/plugins.md)
            error = d.rules.plugins.missing
            return Report(page_outcome(d, TerminalState.FAILED, started=0.0, error=error))
        request = self.network.request(d)
        if isinstance(request, str):  # the process lacks the credential: nothing is sent
            error = f"{ErrorClass.MISSING_CREDENTIAL}: {request}"
            return Report(page_outcome(d, TerminalState.FAILED, started=0.0, error=error))
        recorder = self.recorder(d, request)
        started = time.time()
        report = await self._fetch_page(d, recorder, request)
        if report.render is not None:  # handed on: the render worker reports it
            return report
        return self.finish(d, report, request.set_cookies, recorder, started)

    def finish(
        self,
        d: Dispatch,
        report: Report,
        set_cookies: Sequence[SetCookie],
        recorder: Recorder | None,
        started: float,
    ) -> Report:
        """``report`` of a page fetch with the ``Set-Cookie`` headers its responses carried and
        (a crawl with ``warc``) the capture of ``recorder``'s exchanges."""
        if set_cookies:
            cookies = tuple(set_cookies)
            report.outcome = msgspec.structs.replace(report.outcome, set_cookies=cookies)
        if recorder is not None and recorder.exchanges:
            report.capture = page_capture(d, report.page, report.outcome.status, recorder, started)
        return report

    async def _fetch_page(
        self, d: Dispatch, recorder: Recorder | None, request: RequestContext
    ) -> Report:
        entry, rules = d.entry, d.rules
        assert entry is not None
        hop = _Hop()
        previous = entry.revisit
        validators = None
        if previous is not None:
            validators = conditional_headers(previous.etag, previous.last_modified)
        started = time.time()
        policy = rules.policy
        if is_asset(entry.kind):
            policy = asset_policy(policy)
        elif entry.kind != "page":
            policy = listing_policy(policy)
        try:
            result = await fetch(
                self.session,
                entry.url,
                policy,
                hop_check=partial(self._hop_check, d, hop),
                hop_delay=d.rules.delay_for(d.robots),
                validators=validators,
                recorder=recorder,
                request=request,
            )
        except FetchError as exc:
            return _failed(d, exc, started)
        final = rules.canonicalizer.try_canonicalize(result.final_url)
        final_url = final.url if final is not None else entry.url
        if result.stopped is not None:
            return _stopped(d, result, final_url, hop)
        view = None
        if wants_render(d, result) and not _unchanged(d, result):
            if self.renderer is not None:
                view = await render_view(
                    self.renderer, self.session, d, result, request, recorder, self.others
                )
                result = msgspec.structs.replace(result, sent_at=view.sent_at)  # politeness
            elif self.render_wait is not None:
                deadline = time.time() + self.render_wait
                handed = render_request(d, result, final_url, request, recorder, started, deadline)
                outcome = fetched_outcome(d, result, final_url, None, TerminalState.FETCHED)
                return Report(outcome, render=handed)
        return self.read(d, result, final_url, view)

    def _hop_check(self, d: Dispatch, hop: _Hop, target: str) -> str | None:
        """Whether a redirect to ``target`` is followed (None) or ends the fetch in a state; a
        cross-origin target is kept in ``hop.target``, for that origin's own queue, and the
        reason of a refusal (the scope's, or a URL filter's ``NAME: reason``, as at admission)
        in ``hop.error``."""
        entry, rules = d.entry, d.rules
        assert entry is not None
        canon = rules.canonicalizer.try_canonicalize(target)
        if canon is None:
            return TerminalState.OUT_OF_SCOPE
        if canon.origin != d.origin:
            hop.target = canon.url
            return TerminalState.REDIRECTED
        if is_asset(entry.kind):
            hop.error = rules.scope.check_asset(canon.url)
        else:
            hop.error = rules.scope.check(canon.url, entry.depth)
        if hop.error is None and rules.plugins.url_filters:
            hop.error = rules.plugins.check(canon.url, entry.depth, "redirect")
        if hop.error is not None:
            return TerminalState.OUT_OF_SCOPE
        if d.robots is not None and not d.robots.allowed(canon.url, rules.policy.user_agent):
            return TerminalState.ROBOTS_DENIED
        if canon.url != entry.url and self.seen(entry.crawl_id, canon.url):
            return TerminalState.DUPLICATE
        return None

    def read(
        self, d: Dispatch, result: FetchResult, final_url: str, view: RenderView | None = None
    ) -> Report:
        """A response to read: a listing's URLs, a revisit found unchanged, or a page (with
        ``view``: the page as a render found it)."""
        entry, rules = d.entry, d.rules
        assert entry is not None
        previous = entry.revisit
        # A 304 answers our validators: the copy of the previous fetch is still the page.
        not_modified = result.status == 304 and previous is not None
        digest = None if not_modified else hashlib.sha256(result.body).hexdigest()
        if is_asset(entry.kind):
            return Report(
                fetched_outcome(d, result, final_url, digest, TerminalState.FETCHED),
                batches=_asset_assets(d, result) if digest else [],
                body=_body(d, result, final_url, page=False) if digest else None,
            )
        if entry.kind != "page":  # a sitemap or a feed: its URLs, no page record
            batches = listed(rules, entry, result.body, result.final_url) if digest else []
            state = LISTING_STATES[entry.kind]
            outcome = fetched_outcome(d, result, final_url, digest, state)
            return Report(outcome, batches=merge(batches))
        if previous is not None and (digest is None or digest == previous.digest):
            # Unchanged (a 304, or a server that ignores validators sent the same body):
            # its links were followed before; a small record says it is still fresh.
            outcome = fetched_outcome(d, result, final_url, digest, TerminalState.FETCHED)
            return Report(outcome, unchanged_page(d, result, final_url))
        assert digest is not None
        return self._parsed(d, result, final_url, digest, view)

    def _parsed(
        self,
        d: Dispatch,
        result: FetchResult,
        final_url: str,
        digest: str,
        view: RenderView | None = None,
    ) -> Report:
        entry, rules = d.entry, d.rules
        assert entry is not None
        policy = rules.policy
        doc = _read_document(d, result, view.html if view is not None else None)
        # Each href canonicalized once, for the page record's list and for the links followed.
        found = canonical_links(doc.links, doc.header_follow, rules, doc.base)
        # Recorded resolved and canonicalized (http(s) only): the page's own choice of crawl key.
        canon = (
            rules.canonicalizer.try_canonicalize(doc.canonical, doc.base) if doc.canonical else None
        )
        follow, feeds = _to_follow(d, doc, found, canon, final_url, view)
        batches = link_batches(entry.crawl_id, rules, follow, final_url, entry.depth + 1)
        outlinks = sum(len(b.urls) for b in batches)
        if feeds:
            feed_links = [Found(href, "feed") for href in feeds]
            batches = merge(
                batches
                + group(rules, entry.crawl_id, feed_links, doc.base, final_url, entry.depth + 1)
            )
        assets: list[str] = []
        if doc.assets:  # what the page needs to be seen, whatever its links' fate
            more, assets = asset_batches(
                rules, entry.crawl_id, doc.assets, doc.base, final_url, depth=1
            )
            # Assets first: a URL the page both needs and links to is crawled as its asset
            # (the frontier keeps the first), not as a page that is never HTML.
            batches = merge(more + batches)
        noindex = policy.honor_noindex and "noindex" in doc.directives
        page = _page_record(
            d,
            result,
            final_url,
            digest,
            doc,
            record_links(found, rules, entry.depth),
            outlinks,
            canonical=canon.url if canon is not None else None,
            noindex=noindex,
            assets=assets,
        )
        outcome = fetched_outcome(d, result, final_url, digest, TerminalState.FETCHED)
        if view is not None:
            page = _rendered_record(page, view, policy.wants_bodies() and not noindex)
            outcome = msgspec.structs.replace(outcome, render_needed=view.needed)
        return Report(outcome, page, batches, body=_body(d, result, final_url, page=True))


@dataclass
class _Hop:
    """What ``_hop_check`` decided about the redirect that stopped a fetch: a cross-origin
    ``target`` (canonical) for its own origin's queue, or the ``error`` of a refusal."""

    target: str | None = None
    error: str | None = None


@dataclass
class _Document:
    """What parsing a response found: title, base, links, feeds, directives, canonical, and
    what the crawl's extractors read (None: it has none)."""

    title: str | None
    base: str
    links: list[Link]
    header_follow: list[str]
    feeds: tuple[str, ...]
    directives: frozenset[str]
    canonical: str | None
    data: Data | None = None
    main: MainText | None = None
    view: PageView | None = None  # what the crawl's plugins read (None: it has none)
    plugin_errors: list[str] = field(default_factory=list)
    assets: list[Asset] = field(default_factory=list)


def _read_document(d: Dispatch, result: FetchResult, rendered: str | None = None) -> _Document:
    """Parse the body (HTML) and the headers (Link, X-Robots-Tag) of a page response: the
    body once, for its links and the crawl's extractors; ``rendered``: the DOM a browser
    rendered from it, read instead of the body."""
    policy, extractors = d.rules.policy, d.rules.extractors
    if rendered is not None:
        result = msgspec.structs.replace(result, text=rendered)
    directives: frozenset[str] = frozenset()
    if policy.honor_x_robots_tag:
        directives = x_robots_tag(result.headers, policy.user_agent)
    header = page_rels(result.headers, result.final_url)
    doc = _Document(None, result.final_url, [], header.follow, (), directives, header.canonical)
    if result.text is None:
        doc.data = nothing(extractors) if extractors else None
        _plug(d, result, doc, None)
        return doc
    tree = parse_tree(result.text, result.final_url)
    parsed = parse_html(result.text, result.final_url, product_token=d.rules.token, parsed=tree)
    doc.title, doc.base = parsed.title, parsed.base
    doc.canonical = parsed.canonical or doc.canonical
    doc.directives = directives | parsed.meta_robots
    doc.links = parsed.links
    doc.feeds = parsed.feeds if policy.feeds else ()
    if extractors:
        doc.data = extract(extractors, tree, result.final_url)
    if policy.main_text:
        doc.main = main_text(result.text, result.final_url, max_chars=MAX_MAIN_TEXT_CHARS)
    if policy.assets:
        doc.assets = page_assets(tree.tree, frozenset(policy.assets))
    _plug(d, result, doc, tree.tree)
    return doc


def _plug(d: Dispatch, result: FetchResult, doc: _Document, tree: LexborHTMLParser | None) -> None:
    """The page as the crawl's plugins see it, and its page extractors' data (docs/plugins.md)."""
    plugins = d.rules.plugins
    if not (plugins.link_extractors or plugins.page_extractors):
        return
    view = PageView(
        result.final_url, result.status, result.headers, result.text, tree, doc.base, doc.data
    )
    doc.view = view
    doc.data = plugin_data(d.rules, view, doc.data, doc.plugin_errors)


def _to_follow(
    d: Dispatch,
    doc: _Document,
    found: list[tuple[Link, Canonical]],
    canon: Canonical | None,
    final_url: str,
    view: RenderView | None,
) -> tuple[list[Canonical], tuple[str, ...]]:
    """The links a page's URLs come from, and its feeds: none under nofollow; the page's
    canonical alone when it names another URL and the crawl follows canonicals; else its links
    (and a script's navigation), as the crawl's link extractor plugins change them."""
    rules = d.rules
    policy = rules.policy
    follow: list[Canonical] = []
    feeds = doc.feeds
    if not (policy.honor_nofollow and "nofollow" in doc.directives):
        follow = followed(found, policy.honor_nofollow) + _navigation(d, view)
    else:
        feeds = ()
    if policy.follow_canonical and canon is not None and canon.url != final_url:
        return [canon], ()  # the canonical is crawled instead of these links
    if rules.plugins.link_extractors and doc.view is not None and "nofollow" not in doc.directives:
        follow = plugin_links(rules, doc.view, follow, found, doc.plugin_errors)
    return follow, feeds


def _unchanged(d: Dispatch, result: FetchResult) -> bool:
    """A revisit that found the page as it was (a 304, or the same body): nothing to render."""
    assert d.entry is not None
    previous = d.entry.revisit
    if previous is None:
        return False
    return result.status == 304 or hashlib.sha256(result.body).hexdigest() == previous.digest


def _navigation(d: Dispatch, view: RenderView | None) -> list[Canonical]:
    """Where a script tried to send the page: a link for the frontier (not followed there)."""
    if view is None or view.navigation is None:
        return []
    canon = d.rules.canonicalizer.try_canonicalize(view.navigation)
    return [canon] if canon is not None else []


def _rendered_record(page: Page, view: RenderView, body: bool) -> Page:
    """The page record of a render: ``render`` and its time, or why it failed."""
    if view.html is None:
        return msgspec.structs.replace(page, render_error=view.error)
    return msgspec.structs.replace(
        page,
        render="browser",
        render_ms=view.render_ms,
        render_refused=view.refused,
        body=view.html if body else None,
    )


def _page_record(
    d: Dispatch,
    result: FetchResult,
    final_url: str,
    digest: str,
    doc: _Document,
    record: PageLinks,
    outlinks: int,
    *,
    canonical: str | None,
    noindex: bool,
    assets: list[str],
) -> Page:
    entry = d.entry
    assert entry is not None
    policy = d.rules.policy
    return page_record(
        d,
        "new" if entry.revisit is None else "changed",
        final_url=final_url,
        status=result.status,
        headers=result.headers,
        content_type=result.content_type,
        charset=result.charset,
        title=doc.title,
        fetched_at=result.started_at,
        elapsed_ms=result.elapsed_ms,
        body_sha256=digest,
        body_bytes=len(result.body),
        outlinks=outlinks,
        canonical=canonical,
        noindex=noindex,
        redirects=result.redirects,
        links=record.links,
        links_total=record.total,
        links_truncated=record.truncated,
        # The wiring's sinks keep it only with store_bodies (docs/architecture.md).
        body=result.text if policy.wants_bodies() and not noindex else None,
        data=doc.data,
        # Index content, as the body is: a noindex page keeps neither.
        main_text=doc.main.text if doc.main is not None and not noindex else None,
        language=doc.main.language if doc.main is not None and not noindex else None,
        plugin_errors=tuple(doc.plugin_errors),
        assets=tuple(assets),
    )


def _body(d: Dispatch, result: FetchResult, final_url: str, *, page: bool) -> Body:
    assert d.entry is not None
    return Body(d.entry.url, final_url, result.content_type, result.charset, result.body, page)


def _asset_assets(d: Dispatch, result: FetchResult) -> list[FrontierBatch]:
    """What a fetched asset needs in turn, one step deeper: a stylesheet's ``@import`` and
    ``url()`` assets, and the source map a script or stylesheet names in its ``SourceMap``
    header (docs/assets.md); nothing past ``MAX_ASSET_DEPTH``. Never its page links."""
    entry, rules = d.entry, d.rules
    assert entry is not None
    types = frozenset(rules.policy.assets)
    if entry.depth >= MAX_ASSET_DEPTH:
        return []
    found: list[Asset] = []
    if entry.kind == "stylesheet":
        text = result.text
        if text is None:  # served as another type: CSS is ASCII-compatible
            text = result.body.decode("utf-8", errors="replace")
        found = stylesheet_assets(text, types)
    source_map = result.headers.get("sourcemap") or result.headers.get("x-sourcemap")
    if source_map and "js" in types:
        found.append(Asset(source_map.strip(), "js"))
    batches, _ = asset_batches(
        rules, entry.crawl_id, found, result.final_url, entry.url, entry.depth + 1
    )
    return batches


def _failed(d: Dispatch, exc: FetchError, started: float) -> Report:
    """The report of a fetch that raised: blocked, retried, or failed (a revisit: gone?)."""
    if isinstance(exc, AddressBlocked):
        # No request left this process: the attempt is not counted (started_at 0).
        return Report(page_outcome(d, TerminalState.BLOCKED, started=0.0, error=f"blocked: {exc}"))
    if isinstance(exc, FetchRetryable):
        outcome = page_outcome(
            d,
            "retry",
            started=started,
            status=exc.status,
            error=f"{exc.error_class}: {exc}",
            retry_after=exc.retry_after,
            backoff=True,
        )
        return Report(outcome)
    status = getattr(exc, "status", None)
    outcome = page_outcome(
        d, TerminalState.FAILED, started=started, status=status, error=f"{exc.error_class}: {exc}"
    )
    assert d.entry is not None
    previous = d.entry.revisit
    gone = previous is not None and previous.gone >= 1 and status in GONE_STATUSES
    return Report(outcome, gone_page(d, outcome) if gone else None)


def _stopped(d: Dispatch, result: FetchResult, final_url: str, hop: _Hop) -> Report:
    """A fetch that stopped early (too large, a content type, a redirect not followed, with
    the reason of a refused one); a cross-origin redirect's target goes to its own origin's
    queue."""
    entry = d.entry
    assert entry is not None and result.stopped is not None
    outcome = page_outcome(
        d,
        result.stopped,
        started=result.sent_at,
        status=result.status,
        final_url=final_url,
        error=hop.error,
    )
    report = Report(outcome)
    if hop.target is not None:
        target = UrlRef(hop.target, entry.depth, entry.url, entry.kind, entry.lastmod)
        report.batches.append(
            FrontierBatch(
                crawl_id=entry.crawl_id,
                origin=d.rules.canonicalizer.canonicalize(hop.target).origin,
                urls=(target,),
            )
        )
    return report
