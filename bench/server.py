"""Serve the synthetic web with nginx on 127.0.0.1, one ``server`` per origin port.

nginx runs in the foreground (``daemon off``) as a child of the harness, with its own prefix
directory holding the config, pid file, error log and access log; ``stop()`` asks it to quit
gracefully (SIGQUIT), which flushes the buffered access log.  If the ``nginx`` binary is missing
and we are root, ``ensure_nginx()`` installs Debian's package (``apt-get update && apt-get
install -y nginx``); ``ensure_debian_tool`` does the same for the other tools the harness runs
(tcpdump, ``bench/wire.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from bench.site import SiteSpec

TEMPLATE = Path(__file__).with_name("nginx.conf.tmpl")


def ensure_debian_tool(binary: str, package: str | None = None) -> str:
    """Path of ``binary``, installing its Debian ``package`` (default: the binary's name) first
    if it is missing and we are root; ``RuntimeError`` naming the install command otherwise."""
    package = package or binary
    path = shutil.which(binary) or (
        f"/usr/sbin/{binary}" if Path(f"/usr/sbin/{binary}").exists() else None
    )
    if path:
        return path
    command = f"apt-get update && apt-get install -y {package}"
    if os.geteuid() != 0:
        raise RuntimeError(f"{binary} is not installed: run `{command}`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for argv in (["apt-get", "update"], ["apt-get", "install", "-y", package]):
            subprocess.run(
                argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
            )
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or b"").decode(errors="replace").strip()[-200:]
        raise RuntimeError(f"{binary} is not installed and `{command}` failed: {tail}") from None
    return shutil.which(binary) or f"/usr/sbin/{binary}"


def ensure_nginx() -> str:
    """Path of the nginx binary, installing Debian's package first if it is missing."""
    return ensure_debian_tool("nginx")


def render_config(spec: SiteSpec, prefix: Path) -> str:
    servers = "\n".join(
        f"    server {{ listen 127.0.0.1:{port}; root {Path(spec.root).resolve() / str(port)}; "
        f"index index.html; }}"
        for port in spec.ports
    )
    text = TEMPLATE.read_text().format(prefix=prefix, servers=servers)
    if os.geteuid() == 0:  # workers otherwise run as nobody and may not read a private temp dir
        text = "user root;\nworker_rlimit_nofile 32768;\n" + text
    return text


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Nginx:
    """One nginx process tree serving ``spec``; use as a context manager."""

    def __init__(self, spec: SiteSpec, prefix: str | Path) -> None:
        self.spec = spec
        self.prefix = Path(prefix)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def access_log(self) -> Path:
        return self.prefix / "access.log"

    def start(self, timeout: float = 10.0) -> Nginx:
        busy = [p for p in self.spec.ports[:3] if _port_open(p)]
        if busy:
            raise RuntimeError(
                f"ports {busy} already in use on 127.0.0.1: stop whatever listens there"
            )
        self.prefix.mkdir(parents=True, exist_ok=True)
        conf = self.prefix / "nginx.conf"
        conf.write_text(render_config(self.spec, self.prefix.resolve()))
        binary = ensure_nginx()
        # -e: the error log before the config is read (the default path may not be writable).
        with open(self.prefix / "stderr.log", "wb") as stderr:
            self.proc = subprocess.Popen(
                [
                    binary,
                    "-p",
                    str(self.prefix.resolve()),
                    "-c",
                    str(conf.resolve()),
                    "-e",
                    str((self.prefix / "error.log").resolve()),
                ],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + timeout
        while not all(_port_open(p) for p in (self.spec.ports[0], self.spec.ports[-1])):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = (self.prefix / "stderr.log").read_text() + (
                    self.prefix / "error.log"
                ).read_text()
                self.stop()
                raise RuntimeError(f"nginx did not start: {err.strip()[-500:]}")
            time.sleep(0.05)
        return self

    def cpu_seconds(self) -> float:
        """CPU (user+system) used so far by the nginx master and its workers."""
        import psutil

        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        total = 0.0
        root = psutil.Process(self.proc.pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT)  # graceful: flushes the access log buffer
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
