"""A real HTTP forward proxy: Debian's tinyproxy on 127.0.0.1, with its own log, for the
``embedded-proxy`` row and for the tests (``tests/proxy.py``).

Its log is what shows a request went through it (a ``Request`` line per proxied request:
``GET http://host:port/path``, ``CONNECT host:port``), or never reached it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Proxy:
    url: str
    log_path: Path
    pid: int

    def log(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""

    def requests(self) -> list[str]:
        """The request lines the proxy received (``GET http://127.0.0.1:8080/a HTTP/1.1``)."""
        return [
            line.split("): ", 1)[1]
            for line in self.log().splitlines()
            if "]: Request (file descriptor" in line
        ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


MISSING = "tinyproxy is not installed (apt-get install tinyproxy; .ci/run does)"


def binary() -> str | None:
    """The tinyproxy binary, None when it is not installed."""
    return shutil.which("tinyproxy") or shutil.which("tinyproxy", path="/usr/bin:/usr/sbin")


@contextmanager
def tinyproxy(folder: Path, *, basic_auth: tuple[str, str] | None = None) -> Iterator[Proxy]:
    """A tinyproxy on a free port of 127.0.0.1, logging every request to ``folder``; with
    ``basic_auth`` it asks its clients for that user and password."""
    exe = binary()
    if exe is None:
        raise FileNotFoundError(MISSING)
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log_path = folder / "tinyproxy.log"
    lines = [
        f"Port {port}",
        "Listen 127.0.0.1",
        "Timeout 30",
        f'LogFile "{log_path}"',
        "LogLevel Info",
        "MaxClients 100",
        "Allow 127.0.0.1",
    ]
    if basic_auth is not None:
        lines.append(f"BasicAuth {basic_auth[0]} {basic_auth[1]}")
    config = folder / "tinyproxy.conf"
    config.write_text("\n".join(lines) + "\n")
    process = subprocess.Popen(
        [exe, "-d", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while "Accepting connections" not in (log_path.read_text() if log_path.exists() else ""):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tinyproxy did not start: {log_path}")
            time.sleep(0.05)
        yield Proxy(f"http://127.0.0.1:{port}", log_path, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
