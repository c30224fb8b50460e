"""The test servers log a request's kernel arrival time, not the time its handler ran."""

from __future__ import annotations

import asyncio
import socket
import time

from tests.httpserver import RecordingServer, html

REQUEST = b"GET /p HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"


def _send(conn: socket.socket) -> float:
    sent = time.time()
    conn.sendall(REQUEST)
    return sent


def _read_response(conn: socket.socket) -> None:
    data = b""
    while b"</title>" not in data:
        chunk = conn.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk


def _stall(srv: RecordingServer, seconds: float) -> None:
    """Block the server's event loop for ``seconds``, as a CPU-starved process would be."""
    assert srv._loop is not None
    srv._loop.call_soon_threadsafe(time.sleep, seconds)


def test_a_stalled_server_still_logs_when_each_request_arrived() -> None:
    with RecordingServer({"/p": html("<title>p</title>")}) as srv:
        with socket.create_connection(("127.0.0.1", srv.port)) as conn:
            errors = []
            for i in range(20):  # one keep-alive connection: each request its own stamp
                stall = 0.2 if i % 4 == 0 else 0.0
                if stall:
                    _stall(srv, stall)
                    time.sleep(0.02)  # the loop is asleep before the request arrives
                sent = _send(conn)
                _read_response(conn)
                answered = time.time()
                logged = srv.log[-1].t
                errors.append(logged - sent)
                if stall:
                    assert answered - sent > 0.1  # the handler ran late...
        assert len(srv.log) == 20
        assert srv.unstamped() == 0
        # ...yet each logged time is the send's, to within a system call on loopback (seen:
        # 10-60 us); negative would mean the stamp came before the send.
        assert all(0 <= e < 0.002 for e in errors), errors


def test_arrivals_are_kept_per_connection() -> None:
    async def main() -> list[float]:
        async with RecordingServer({"/p": html("<title>p</title>")}) as srv:
            conns = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(2)]
            try:
                sent = []
                for conn in conns:
                    sent.append(_send(conn))
                    await asyncio.sleep(0.05)
                for conn in conns:
                    await asyncio.to_thread(_read_response, conn)
                logged = sorted(r.t for r in srv.log)
                return [a - b for a, b in zip(logged, sent, strict=True)]
            finally:
                for conn in conns:
                    conn.close()

    errors = asyncio.run(main())
    assert all(0 <= e < 0.002 for e in errors), errors
