"""A small generated multi-origin site for topology tests, served by ``RecordingServer``.

Origin ``k`` serves ``/`` and ``/p1`` .. ``/p{n-1}``: page ``i`` links to pages ``i+1``, ``2i``
and ``3i`` of its own origin (when they exist) and to page ``i`` of the next origin, so every
page is reachable from every seed and links cross origins. ``robots.txt`` allows everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from tests.httpserver import RecordingServer, html, text


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/p{i}"


def build_routes(servers: list[RecordingServer], pages: int) -> None:
    """Fill every server's routes (servers must be started: their ports are in the links)."""
    for k, srv in enumerate(servers):
        nxt = servers[(k + 1) % len(servers)]
        srv.routes["/robots.txt"] = text("User-agent: *\nAllow: /\n")
        for i in range(pages):
            own = sorted({j for j in (i + 1, 2 * i, 3 * i) if 0 < j < pages and j != i})
            links = [f'<a href="{page_path(j)}">p{j}</a>' for j in own]
            links.append(f'<a href="{nxt.url(page_path(i))}">next origin</a>')
            body = f"<html><head><title>o{k} p{i}</title></head><body>{''.join(links)}</body></html>"
            srv.routes[page_path(i)] = html(body)


@contextmanager
def serve_site(origins: int = 3, pages: int = 100) -> Iterator[list[RecordingServer]]:
    """Start ``origins`` servers in background threads, each with ``pages`` pages."""
    with ExitStack() as stack:
        servers = [stack.enter_context(RecordingServer()) for _ in range(origins)]
        build_routes(servers, pages)
        yield servers


def page_requests(srv: RecordingServer) -> list[str]:
    """Requested paths other than robots.txt."""
    return [p for p in srv.paths() if p != "/robots.txt"]
