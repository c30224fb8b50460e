"""The topology tests' site, served from a CHILD process that does nothing else.

Arrival times are the kernel's (``tests/arrivals.py``), whatever the serving thread does; a
child process still keeps the handlers from waiting for the pytest process's GIL (seen: ~90 ms
while the test polls Cassandra), which would slow the answers. The parent reads the logs
through a control port.

Child: ``python -m tests.integration.site_process ORIGINS PAGES [SPREAD]`` prints one JSON line
``{"origins": [...], "control": "http://..."}`` and serves until stdin closes. With ``SPREAD``
(a partition count) it picks ports so that the origins cover every partition.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from aiohttp import web

from tests.httpserver import RecordingServer, Request


@dataclass
class RemoteServer:
    """The parent's view of one origin served by the child (the RecordingServer subset the
    tests use)."""

    origin: str
    control: str

    def url(self, path: str = "/") -> str:
        return self.origin + path

    @property
    def log(self) -> list[Request]:
        query = urllib.parse.quote(self.origin, safe="")
        with urllib.request.urlopen(f"{self.control}/log?origin={query}", timeout=10) as resp:
            return [Request(t, m, p, {}, h) for t, m, p, h in json.loads(resp.read())]

    def paths(self) -> list[str]:
        return [r.path for r in self.log]


@contextmanager
def serve_site(origins: int, pages: int, spread: int = 0) -> Iterator[list[RemoteServer]]:
    """Start the child; yields one ``RemoteServer`` per origin; stops the child after."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.site_process",
            str(origins),
            str(pages),
            str(spread),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the site process did not start")
        info = json.loads(line)
        yield [RemoteServer(o, info["control"]) for o in info["origins"]]
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def _child(origins: int, pages: int, spread: int) -> None:
    from streamcrawl.agents.stream.tables import partition_for
    from tests.integration.site import build_routes

    servers: list[RecordingServer] = []
    spare: list[RecordingServer] = []
    covered: set[int] = set()
    while len(servers) < origins:
        srv = await RecordingServer().start()
        part = partition_for(srv.origin, spread) if spread else None
        if part is None or part not in covered:
            servers.append(srv)
            if part is not None:
                covered.add(part)
        else:
            spare.append(srv)
        if len(spare) > 500:
            raise RuntimeError("cannot cover every partition with an origin")
    for srv in spare:
        await srv.stop()
    build_routes(servers, pages)  # type: ignore[arg-type]
    by_origin = {s.origin: s for s in servers}

    async def log(request: web.Request) -> web.Response:
        srv = by_origin[request.query["origin"]]
        return web.json_response([[r.t, r.method, r.path, r.handled] for r in srv.log])

    app = web.Application()
    app.router.add_get("/log", log)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(
        json.dumps({"origins": [s.origin for s in servers], "control": f"http://127.0.0.1:{port}"}),
        flush=True,
    )
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until EOF
    for srv in servers:
        await srv.stop()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(_child(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
