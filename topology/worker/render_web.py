"""The render worker's web port: ``GET /healthz`` and ``GET /metrics`` (Prometheus).

A render worker has no Faust app, whose web server serves a fetch worker's endpoints, so this
module serves its two with aiohttp (already a dependency: the fetcher's HTTP client). It binds
``settings.web_host`` and ``settings.render_web_port`` (``STREAMCRAWL_RENDER_WEB_PORT``), not
the fetch worker's port: a fetch worker and a render worker may run on one host.

``/healthz`` answers 503 once the worker's consumer loop has ended while the worker is not
stopping (it raised, for instance a report that could not be published): the process then
renders nothing and should be restarted. There is no ``/readyz``: a render worker serves no
traffic, and a worker still reading the crawl specs simply has not joined its group yet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web

from streamcrawl.agents.stream.metrics import CONTENT_TYPE
from streamcrawl.agents.stream.render_metrics import RenderMetrics

log = logging.getLogger(__name__)


class WebPort:
    """The endpoints being served: ``port`` (the one bound: ``start`` may be given 0), ``stop``."""

    def __init__(self, runner: web.AppRunner) -> None:
        self.runner = runner
        self.port: int = runner.addresses[0][1]

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start(
    host: str, port: int, metrics: RenderMetrics, unhealthy: Callable[[], str | None]
) -> WebPort:
    """Serve the endpoints on ``host:port`` until ``stop``. ``unhealthy``: why ``/healthz``
    fails (None: healthy). Raises OSError when the port is taken."""

    async def healthz(_request: web.Request) -> web.Response:
        why = unhealthy()
        if why is not None:
            return web.Response(text=why + "\n", status=503)
        return web.Response(text="ok\n")

    async def metrics_page(_request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError:
        await runner.cleanup()
        raise
    log.info("render worker web port: %s:%d (/healthz, /metrics)", host, port)
    return WebPort(runner)
