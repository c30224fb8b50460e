"""Test doubles for the SSRF guard tests: a DNS resolver that answers from a table, and a spy on
every connection aiohttp dials. Tests never send a packet to a non-loopback address: internal
answers come from ``StaticResolver``, and ``spy_dials`` fails a test that tries to dial one.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import aiohappyeyeballs
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult


class StaticResolver(AbstractResolver):
    """Answers from a table; a host with several answers gives them in turn (the last one
    repeats), which is how DNS rebinding looks to the crawler. ``asked`` logs every query."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = {host: [list(a) for a in queue] for host, queue in answers.items()}
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        queue = self.answers[host]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        return [
            ResolveResult(
                hostname=host,
                host=a,
                port=port,
                family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for a in addresses
        ]

    async def close(self) -> None:
        pass


def spy_dials(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every address aiohttp is about to connect to (its only way to a socket is
    ``aiohappyeyeballs.start_connection``); a non-loopback address fails the test at once,
    before any socket exists."""
    seen: list[str] = []
    real = aiohappyeyeballs.start_connection

    async def spy(addr_infos: list[Any], **kwargs: Any) -> socket.socket:
        for info in addr_infos:
            address = str(info[4][0])
            seen.append(address)
            assert ipaddress.ip_address(address).is_loopback, f"dialled {address}"
        return await real(addr_infos, **kwargs)

    monkeypatch.setattr(aiohappyeyeballs, "start_connection", spy)
    return seen
