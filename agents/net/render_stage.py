"""The render stage of a render worker: a page a fetch worker handed on, rendered and read.

``RenderStage.run`` takes a ``RenderRequest`` (the ``render`` topic) and the crawl's rules,
rebuilds the dispatch, the response and the request context the fetch worker had
(``agents/net/rendering.py``), renders the response with the process's ``Renderer`` and the
same ``Subrequests`` path, then reads it with the fetch stage's own parse, plugins and records
(``Stages.read``, ``Stages.finish``): the report is the one the fetch worker would have made
had it rendered in process. ``http_copy`` is the report without a render (the page's HTTP
copy, ``render_error`` saying why), for a request no render worker served in time
(docs/rendering.md, "The Kafka wiring").
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from streamcrawl.agents.errors import ErrorClass
from streamcrawl.agents.net.capture import Recorder
from streamcrawl.agents.net.fetch import FetchResult
from streamcrawl.agents.net.rendering import (
    RenderView,
    handed_dispatch,
    handed_request,
    handed_result,
    render_view,
)
from streamcrawl.agents.net.stages import Report, Stages
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import RenderRequest, SetCookie


class RenderStage:
    """Renders handed-on pages over ``stages`` (built with a renderer: ``CrawlCore.stages``
    with ``render=True``)."""

    def __init__(self, stages: Stages) -> None:
        self.stages = stages

    async def run(self, req: RenderRequest, rules: CrawlRules) -> Report:
        """The report of ``req``'s page, rendered; never raises ``RenderError`` (a failed
        render is the HTTP copy with ``render_error``, as in process)."""
        d = handed_dispatch(req, rules)
        renderer = self.stages.renderer
        context = self.stages.network.request(d)
        if renderer is None or isinstance(context, str):
            why = context if isinstance(context, str) else "this process renders nothing"
            return self.http_copy(req, rules, f"{ErrorClass.RENDER_CRASH}: {why}")
        request = handed_request(context, req)
        recorder = self.stages.recorder(d, request)
        if recorder is not None:
            recorder.exchanges = list(req.exchanges)
        result = handed_result(req)
        view = await render_view(
            renderer, self.stages.session, d, result, request, recorder, self.stages.others
        )
        return self._report(req, rules, result, view, request.set_cookies, recorder)

    def http_copy(self, req: RenderRequest, rules: CrawlRules, error: str) -> Report:
        """The report of ``req``'s page read over HTTP, its record's ``render_error`` ``error``."""
        view = RenderView(None, None, 0, req.sent_at, error=error[:500])
        recorder = None
        if req.exchanges:
            recorder = Recorder()
            recorder.exchanges = list(req.exchanges)
        return self._report(req, rules, handed_result(req), view, list(req.set_cookies), recorder)

    def _report(
        self,
        req: RenderRequest,
        rules: CrawlRules,
        result: FetchResult,
        view: RenderView,
        set_cookies: Sequence[SetCookie],
        recorder: Recorder | None,
    ) -> Report:
        d = handed_dispatch(req, rules)
        # The origin's next delay counts from the render's last subrequest (politeness).
        result = msgspec.structs.replace(result, sent_at=view.sent_at)
        report = self.stages.read(d, result, req.final_url, view)
        return self.stages.finish(d, report, set_cookies, recorder, req.dispatched_at)
