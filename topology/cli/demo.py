"""``streamcrawl demo``: serve a small bundled site on 127.0.0.1 and crawl it embedded.

The site is generated deterministically in memory: two origins (two ports) of 30 pages each,
with a robots.txt that disallows ``/private/``, links carrying fragments and tracking
parameters, a cross-origin link, a redirect and a PDF, so the summary shows every mechanism.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from aiohttp import web

from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.cli.crawl import run_embedded
from streamcrawl.topology.cli.options import EXIT_INTERRUPTED

PAGES_PER_ORIGIN = 30


def _page(i: int, n: int, other: str) -> str:
    links = [
        f'<a href="/page/{(i + 1) % n}">next</a>',
        f'<a href="/page/{(i * 7 + 3) % n}#section">jump</a>',
        f'<a href="/page/{(i + 2) % n}?utm_source=demo&amp;utm_medium=web">tracked</a>',
        f'<a href="{other}/page/{i}">elsewhere</a>',
        '<a href="/private/secret">private</a>',
        '<a href="/doc.pdf">a pdf</a>',
        '<a href="/old">moved</a>',
        '<a href="mailto:demo@example.invalid">mail</a>',
    ]
    return (
        f"<!doctype html><html><head><title>Demo page {i}</title></head>"
        f"<body><h1>Page {i}</h1><p>{'Lorem ipsum dolor sit amet. ' * 20}</p>"
        f"{' '.join(links)}</body></html>"
    )


def _app(other: str) -> web.Application:
    async def robots(_: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nDisallow: /private/\n")

    async def page(request: web.Request) -> web.Response:
        i = int(request.match_info["n"]) % PAGES_PER_ORIGIN
        return web.Response(text=_page(i, PAGES_PER_ORIGIN, other), content_type="text/html")

    async def old(_: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/page/0")

    async def pdf(_: web.Request) -> web.Response:
        return web.Response(body=b"%PDF-1.4\n" + b"0" * 4096, content_type="application/pdf")

    async def private(_: web.Request) -> web.Response:
        return web.Response(text="robots.txt says you should not be here", status=403)

    app = web.Application()
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/", old)
    app.router.add_get("/page/{n:\\d+}", page)
    app.router.add_get("/old", old)
    app.router.add_get("/doc.pdf", pdf)
    app.router.add_get("/private/{tail:.*}", private)
    return app


@contextlib.contextmanager
def serve_demo_site() -> Iterator[list[str]]:
    """Serve the two demo origins from a background thread; yields their origins."""
    loop = asyncio.new_event_loop()
    runners: list[web.AppRunner] = []
    origins: list[str] = []
    ready = threading.Event()

    async def start() -> None:
        import socket

        socks = []
        for _ in range(2):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        ports = [s.getsockname()[1] for s in socks]
        for sock in socks:
            sock.close()
        for idx, port in enumerate(ports):
            other = f"http://127.0.0.1:{ports[1 - idx]}"
            runner = web.AppRunner(_app(other), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            runners.append(runner)
            origins.append(f"http://127.0.0.1:{port}")
        ready.set()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True, name="demo-site")
    thread.start()
    ready.wait(10)
    try:
        yield origins
    finally:

        async def stop() -> None:
            for runner in runners:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def run_demo(args: argparse.Namespace) -> int:
    out = args.out or Path(tempfile.mkdtemp(prefix="streamcrawl-demo-"))
    with serve_demo_site() as origins:
        print(f"demo site: {', '.join(origins)} (robots.txt disallows /private/)", file=sys.stderr)
        policy = CrawlPolicy(
            crawl_id="demo",
            seeds=(origins[0] + "/page/0",),
            allow_hosts=("127.0.0.1",),
            delay=0.05,
        )
        result = run_embedded(
            policy,
            out=out,
            state_dir=out / "state",
            concurrency=16,
            progress=sys.stderr.isatty(),
            as_json=args.json,
        )
    if not args.json:
        print(f"pages: {out / 'pages.jsonl'}  url states: {out / 'urls.jsonl'}")
        print(json.dumps(result["states"]))
    return EXIT_INTERRUPTED if result["interrupted"] else 0
