"""The harness's tools from Debian (bench/server.py ``ensure_debian_tool``): found, installed
when missing and we are root, and otherwise one error that says what to run."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from bench import server


def _missing(monkeypatch: pytest.MonkeyPatch, uid: int) -> list[list[str]]:
    ran: list[list[str]] = []
    installed: set[str] = set()

    def which(name: str) -> str | None:
        return f"/usr/bin/{name}" if name in installed else None

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        ran.append(argv)
        if argv[:2] == ["apt-get", "install"]:
            installed.add(argv[-1])
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(server.shutil, "which", which)
    monkeypatch.setattr(server.Path, "exists", lambda _self: False)
    monkeypatch.setattr(server.os, "geteuid", lambda: uid)
    monkeypatch.setattr(server.subprocess, "run", run)
    return ran


def test_a_missing_tool_is_installed_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _missing(monkeypatch, 0)
    assert server.ensure_debian_tool("tcpdump") == "/usr/bin/tcpdump"
    assert ran == [["apt-get", "update"], ["apt-get", "install", "-y", "tcpdump"]]


def test_a_missing_tool_names_its_install_command_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran = _missing(monkeypatch, 1000)
    with pytest.raises(RuntimeError, match=r"tcpdump is not installed: run `apt-get update && "):
        server.ensure_debian_tool("tcpdump")
    assert ran == []


def test_a_failed_install_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, 0)

    def run(argv: list[str], **_: Any) -> None:
        raise subprocess.CalledProcessError(100, argv, stderr=b"E: Unable to locate package")

    monkeypatch.setattr(server.subprocess, "run", run)
    with pytest.raises(RuntimeError, match="failed: E: Unable to locate package"):
        server.ensure_debian_tool("tcpdump")
