"""An https crawl through the proxy: the crawler asks tinyproxy for a ``CONNECT`` tunnel and
speaks TLS to the site through it (docs/requests.md, "Proxies").

The site's certificate is signed by a throwaway CA that ``openssl`` makes here; the ``crawl``
process trusts it through ``SSL_CERT_FILE`` (OpenSSL's default verify paths), nothing else.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web

from tests.integration.site import STREAMCRAWL, free_port
from tests.proxy import tinyproxy

pytestmark = pytest.mark.integration


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for 127.0.0.1 and localhost signed by it: (ca, cert, key)."""
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.pem", "s.key", "s.csr", "s.pem")
    )
    ext = folder / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out",
            str(ca), "-days", "2", "-subj", "/CN=streamcrawl test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key


@contextmanager
def https_site(cert: Path, key: Path, port: int) -> Iterator[list[str]]:
    """Two pages over TLS on 127.0.0.1:``port``; yields the paths requested, in order."""
    seen: list[str] = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    started = threading.Event()

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path)
        if request.path == "/":
            return web.Response(text='<a href="/a">a</a>', content_type="text/html")
        if request.path == "/a":
            return web.Response(text="<title>a</title>", content_type="text/html")
        return web.Response(status=404)

    async def serve() -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
        started.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield seen
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def test_an_https_crawl_goes_through_the_proxys_connect_tunnel(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path)
    port = free_port()
    with tinyproxy(tmp_path / "proxy") as proxy, https_site(cert, key, port) as seen:
        done = subprocess.run(
            [
                STREAMCRAWL,
                "crawl",
                f"https://127.0.0.1:{port}/",
                "--delay",
                "0",
                "--proxy",
                proxy.url,
                "--out",
                str(tmp_path / "out"),
                "--state-dir",
                str(tmp_path / "state"),
                "--no-progress",
                "--ignore-robots",
            ],
            env={**os.environ, "SSL_CERT_FILE": str(ca)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "urls: fetched 2" in done.stdout, done.stdout
        assert sorted(seen) == ["/", "/a"]
        tunnels = [r for r in proxy.requests() if r.startswith("CONNECT ")]
        assert tunnels and all(r.startswith(f"CONNECT 127.0.0.1:{port} ") for r in tunnels)
        assert not [r for r in proxy.requests() if r.startswith("GET ")]  # all inside the tunnel
