"""One reshard at a time: a lease on ``<prefix>.generation`` (key ``lock``).

A run claims the lease (``Lease``: who, until when), renews it every ``TTL_S / 4`` from a
thread, and releases it at the end. Who holds it is decided by the records in offset order,
which every reader sees alike (``holder``): a claim takes the lock when it is free, released, or
expired by the claim's own time; a claim made while another run holds it is ignored. So of two
runs started together the first claim in the log wins, and the other fails with one line.

A run killed with -9 stops renewing: its lease expires ``TTL_S`` after its last renewal, or at
once for a run on this host whose process is gone.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec

from streamcrawl.agents.errors import CrawlError
from streamcrawl.topology.admin import generation
from streamcrawl.topology.settings import Settings

TTL_S = 10.0


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    holder: str
    host: str
    pid: int
    at: float
    expires: float
    released: bool = False


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Lease).decode


def holder(records: Iterable[tuple[bytes, bytes | None]]) -> Lease | None:
    """The lease in force after ``records`` (in offset order), or None; expiry is judged by
    each claim's own time, so every reader agrees (module docstring)."""
    held: Lease | None = None
    for key, value in records:
        if key != generation.LOCK or value is None:
            continue
        try:
            lease = _decode(value)
        except msgspec.DecodeError:
            continue
        if held is not None and lease.holder != held.holder and lease.at < held.expires:
            continue  # claimed while held by another
        held = None if lease.released else lease
    return held


def alive(lease: Lease, now: float) -> bool:
    """The lease still binds: not expired, and its process lives if it ran on this host."""
    if now >= lease.expires:
        return False
    if lease.host == socket.gethostname():
        try:
            os.kill(lease.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return True


class Lock:
    """The lease of this run: ``acquire``, then ``release`` (also on errors)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.me = uuid.uuid4().hex
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _claim(self, *, released: bool = False) -> None:
        now = time.time()
        lease = Lease(
            holder=self.me,
            host=socket.gethostname(),
            pid=os.getpid(),
            at=now,
            expires=now + TTL_S,
            released=released,
        )
        generation.write(self.settings, [(generation.LOCK, _encode(lease))])

    def acquire(self) -> None:
        """Raises CrawlError (one line) when another run holds the lock."""
        held = holder(generation.read_records(self.settings))
        now = time.time()
        if held is not None and held.holder != self.me and alive(held, now):
            raise busy(held, now)
        if held is not None and not alive(held, now):
            # a dead run's lease: release it in its name, so that the claim below is taken
            stale = msgspec.structs.replace(held, at=now, released=True)
            generation.write(self.settings, [(generation.LOCK, _encode(stale))])
        self._claim()
        held = holder(generation.read_records(self.settings))
        if held is None or held.holder != self.me:
            raise busy(held, time.time()) if held else CrawlError("could not take the lock")
        self._renewer = threading.Thread(target=self._renew, name="reshard-lock", daemon=True)
        self._renewer.start()

    def check(self) -> None:
        """Raises CrawlError if this run no longer holds the lock (its lease lapsed, e.g. Kafka
        was away longer than ``TTL_S``, and another run took it)."""
        held = holder(generation.read_records(self.settings))
        if held is None or held.holder != self.me:
            raise CrawlError("this reshard lost its lock to another run: it stops here")

    def _renew(self) -> None:
        while not self._stop.wait(TTL_S / 4):
            try:
                self._claim()
            except CrawlError:  # Kafka away: the lease may lapse; the steps are idempotent
                continue

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._claim(released=True)


def busy(held: Lease, now: float) -> CrawlError:
    since = datetime.fromtimestamp(held.at, UTC).strftime("%H:%M:%S")
    return CrawlError(
        f"another `streamcrawl admin reshard` is running (pid {held.pid} on {held.host}, lock "
        f"renewed at {since} UTC); if it was killed, its lock expires in "
        f"{max(0.0, held.expires - now):.0f} s"
    )
