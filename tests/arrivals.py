"""Kernel arrival times for the test servers' requests (``SO_TIMESTAMPNS``).

A server that stamps a request with ``time.time()`` in its handler stamps it late whenever its
process waits for a CPU (on the loaded 2-core test machine: up to 0.45 s in the fault test
loops), and the next gap of that origin then looks short. Here the accepted connections read
with ``recvmsg`` and keep, per read, the time the kernel received the data (``CLOCK_REALTIME``,
the clock of ``time.time()``); a handler takes the arrival of its request's first bytes with
``arrival(peer)``. On loopback the kernel stamps a segment when the sender's ``send`` hands it
to the loopback device, so a request's arrival is its start as the crawler wrote it, to within
the microseconds of a system call (``tests/unit/test_arrivals.py`` measures it).

Only for servers that answer one request at a time per connection (no pipelining), which is
how aiohttp's client, and so the crawler, sends them.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Linux's value; the socket module exports it only on some builds.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size)


class StampedConnection(socket.socket):
    """An accepted connection whose reads record the kernel's receive time of their data."""

    __slots__ = ("arrivals", "unstamped")

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self.recvmsg(bufsize, _ANCILLARY, flags)
        if data:
            self._note(ancillary)
        return data

    def recv_into(self, buffer: WriteableBuffer, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer).cast("B")
        size, ancillary, _, _ = self.recvmsg_into([view[: nbytes or len(view)]], _ANCILLARY, flags)
        if size:
            self._note(ancillary)
        return size

    def _note(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack(data[: _TIMESPEC.size])
                self.arrivals.append(sec + nsec / 1e9)
                return
        # No stamp (the kernel gives none for data queued before stamping was on): the
        # handler's clock, counted so a test can check that none was needed.
        self.unstamped += 1
        self.arrivals.append(time.time())


class StampingListener(socket.socket):
    """A listening socket whose accepted connections are ``StampedConnection``s, kept by peer
    address for ``arrival``."""

    __slots__ = ("connections",)

    def accept(self) -> tuple[socket.socket, object]:
        fd, addr = self._accept()  # type: ignore[attr-defined]
        conn = StampedConnection(self.family, self.type, self.proto, fileno=fd)
        conn.arrivals = []
        conn.unstamped = 0
        conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if socket.getdefaulttimeout() is None and self.gettimeout():
            conn.setblocking(True)
        self.connections[addr] = conn
        return conn, addr

    def arrival(self, peer: object) -> float:
        """The kernel arrival time of the first bytes the connection from ``peer`` received
        since the last call (the request its handler is answering); ``time.time()`` if none."""
        conn = self.connections.get(peer)
        if conn is None or not conn.arrivals:
            return time.time()
        first = conn.arrivals[0]
        conn.arrivals.clear()
        return first

    def unstamped(self) -> int:
        """Reads that had no kernel stamp, over every connection accepted so far."""
        return sum(c.unstamped for c in self.connections.values())


def listen(host: str, port: int = 0) -> StampingListener:
    """A bound, listening ``StampingListener`` on ``host:port`` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = StampingListener(family, socket.SOCK_STREAM)
    sock.connections = {}
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # On the listener too: connections accepted from it start with stamping on, so the first
    # request's bytes, which may arrive before accept() returns, are stamped as well.
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock
