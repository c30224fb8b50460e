"""A local site that wants what docs/requests.md shows a crawl sending: run it, then crawl it.

    python examples/login_site.py --port 8765

serves two origins on 127.0.0.1 until Ctrl-C:

- ``http://127.0.0.1:8765`` (the shop): ``/team`` answers 403 without ``X-Team: blue``;
  ``/login`` sets a session cookie and redirects to ``/members``, which (like the report it
  links) answers 401 without that cookie;
- ``http://127.0.0.1:8766`` (the partner): every path, robots.txt included, answers 401 without
  basic auth of ``crawler`` / ``hunter2``.

It prints one line per request with the headers that matter, so what the crawler sent each
origin can be read off the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib

from aiohttp import web

SESSION = "session=7f3a9c"
PARTNER_AUTH = "Basic " + base64.b64encode(b"crawler:hunter2").decode()


def page(title: str, links: str = "") -> web.Response:
    return web.Response(text=f"<title>{title}</title>{links}", content_type="text/html")


def shop(partner: str) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if path == "/":
            links = (
                f'<a href="/team">team</a> <a href="/login">log in</a> <a href="{partner}/">x</a>'
            )
            return page("shop", links)
        if path == "/team":
            if request.headers.get("X-Team") != "blue":
                return web.Response(status=403, text="team members only")
            return page("team")
        if path == "/login":
            raise web.HTTPFound("/members", headers={"Set-Cookie": f"{SESSION}; Path=/; HttpOnly"})
        if path in ("/members", "/members/report"):
            if SESSION not in request.headers.get("Cookie", ""):
                return web.Response(status=401, text="log in first")
            return page("members", '<a href="/members/report">report</a>')
        return web.Response(status=404)

    return _app(handle, "shop")


def partner(shop_url: str) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != PARTNER_AUTH:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="p"'})
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/":
            return page(
                "partner", f'<a href="/catalog">catalog</a> <a href="{shop_url}/team">t</a>'
            )
        if request.path == "/catalog":
            return page("catalog")
        return web.Response(status=404)

    return _app(handle, "partner")


def _app(handle: object, name: str) -> web.Application:
    @web.middleware
    async def show(request: web.Request, handler: object) -> web.StreamResponse:
        sent = [h for h in ("X-Team", "Cookie", "Authorization") if h in request.headers]
        print(f"{name} {request.method} {request.path} {' '.join(sent) or '-'}", flush=True)
        return await handler(request)  # type: ignore[operator, no-any-return]

    app = web.Application(middlewares=[show])
    app.router.add_route("*", "/{tail:.*}", handle)  # type: ignore[arg-type]
    return app


async def main(port: int) -> None:
    shop_url, partner_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"
    runners = []
    for app, at in ((shop(partner_url), port), (partner(shop_url), port + 1)):
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", at).start()
        runners.append(runner)
    print(f"serving {shop_url} and {partner_url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        for runner in runners:
            await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765, help="the shop's; the partner's is +1")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(parser.parse_args().port))
