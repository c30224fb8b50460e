"""The SSRF guard: which addresses are refused, and that a refusal opens no connection.

Only loopback is ever dialled: internal answers (private, link-local, ...) come from a test
resolver, and ``start_connection`` is wrapped so that any attempt to dial a non-loopback
address fails the test instead of sending a packet.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.net.fetch import fetch, make_session
from streamcrawl.agents.net.guard import (
    AddressBlocked,
    AddressGuard,
    GuardedConnector,
    parse_networks,
    seed_addresses,
)
from streamcrawl.agents.net.robots_fetch import fetch_robots
from streamcrawl.agents.robots.rules import ROBOTS_BLOCKED, RobotsRules
from streamcrawl.schemas.records import CrawlPolicy
from tests.fakedns import StaticResolver, spy_dials
from tests.httpserver import RecordingServer, html, redirect

POLICY = CrawlPolicy(crawl_id="t", timeout=2.0, connect_timeout=1.0)

REFUSED = [
    "127.0.0.1",
    "127.8.9.10",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata
    "100.64.0.1",  # shared address space
    "0.0.0.0",
    "224.0.0.1",
    "239.255.255.250",
    "255.255.255.255",
    "240.0.0.1",
    "192.0.2.1",
    "198.18.0.1",
    "::1",
    "::",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "fe80::1%eth0",
    "ff02::1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2001:db8::1",
    "not-an-address",
]
PUBLIC = ["93.184.215.14", "1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", REFUSED)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert not AddressGuard().allows(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert AddressGuard().allows(address)


def test_allow_list_opens_exactly_its_networks() -> None:
    guard = AddressGuard(parse_networks(["10.0.0.0/8", "fd00::/8,192.168.1.5"]))
    assert guard.allows("10.200.0.1") and guard.allows("fd00::5") and guard.allows("192.168.1.5")
    assert not guard.allows("192.168.1.6") and not guard.allows("169.254.169.254")
    seeds = AddressGuard().with_addresses(["127.0.0.1", "::1", "junk"])
    assert seeds.allows("127.0.0.1") and seeds.allows("::1") and not seeds.allows("127.0.0.2")


def test_bad_allow_network_entry_is_a_config_error() -> None:
    assert parse_networks(["", " 10.0.0.0/8 , "]) == (ipaddress.ip_network("10.0.0.0/8"),)
    with pytest.raises(
        ConfigError, match=re.escape("allow-network entry '10.0.0.0/33' is not a CIDR")
    ):
        parse_networks(["10.0.0.0/33"])


def test_the_connector_overrides_aiohttps_resolution_step() -> None:
    # GuardedConnector filters in _resolve_host; if aiohttp renamed it, the override would be
    # dead code (the socket factory would still refuse, but with a poorer error).
    assert "_resolve_host" in vars(aiohttp.TCPConnector)
    assert "_resolve_host" in vars(GuardedConnector)


@pytest.fixture
def dialled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return spy_dials(monkeypatch)


RESOLVER_ANSWERS = {
    "internal.test": [["10.0.0.5"]],
    "metadata.test": [["169.254.169.254"]],
    "v6.test": [["fd00::7", "fe80::1"]],
    "mixed.test": [["10.0.0.5", "127.0.0.1"]],
    "rebind.test": [["127.0.0.1"], ["10.9.9.9"]],
}


@pytest.fixture
async def guarded() -> AsyncIterator[tuple[aiohttp.ClientSession, StaticResolver]]:
    resolver = StaticResolver(RESOLVER_ANSWERS)
    guard = AddressGuard(parse_networks(["127.0.0.1/32"]))
    session = make_session(guard=guard, resolver=resolver)
    yield session, resolver
    await session.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://internal.test/x", "10.0.0.5"),
        ("http://metadata.test/latest/meta-data/", "169.254.169.254"),
        ("http://v6.test:8080/", "fd00::7, fe80::1"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("http://10.0.0.1:9092/", "10.0.0.1"),
        ("http://[fd00::1]/", "fd00::1"),
        ("http://127.0.0.2/", "127.0.0.2"),  # loopback, but only 127.0.0.1 is allowed
    ],
)
async def test_refused_before_any_connection(
    guarded: tuple[aiohttp.ClientSession, StaticResolver],
    dialled: list[str],
    url: str,
    shown: str,
) -> None:
    session, _ = guarded
    with pytest.raises(AddressBlocked, match=f"refused to connect to .*\\({shown}\\)") as exc:
        await fetch(session, url, POLICY, hop_check=lambda _t: None)
    assert exc.value.error_class == "blocked"
    assert dialled == []


async def test_a_mixed_answer_dials_only_the_allowed_address(
    guarded: tuple[aiohttp.ClientSession, StaticResolver], dialled: list[str]
) -> None:
    session, _ = guarded
    async with RecordingServer({"/": html("<title>ok</title>")}) as srv:
        result = await fetch(
            session, f"http://mixed.test:{srv.port}/", POLICY, hop_check=lambda _t: None
        )
    assert result.status == 200
    assert dialled == ["127.0.0.1"]


async def test_a_redirect_to_an_internal_address_is_refused(
    guarded: tuple[aiohttp.ClientSession, StaticResolver], dialled: list[str]
) -> None:
    session, _ = guarded
    async with RecordingServer({"/": redirect("http://metadata.test/latest/")}) as srv:
        with pytest.raises(AddressBlocked, match=re.escape("169.254.169.254")):
            await fetch(session, srv.url("/"), POLICY, hop_check=lambda _t: None)
    assert dialled == ["127.0.0.1"]
    assert srv.paths() == ["/"]


async def test_dns_rebinding_is_refused_on_the_next_connection(
    guarded: tuple[aiohttp.ClientSession, StaticResolver], dialled: list[str]
) -> None:
    """rebind.test answers 127.0.0.1 (allowed) and then 10.9.9.9: each new connection checks
    the address it is about to use, so the second answer is refused."""
    session, resolver = guarded
    async with (
        RecordingServer({"/": html("<title>a</title>")}) as a,
        RecordingServer({"/": html("<title>b</title>")}) as b,
    ):
        first = await fetch(session, f"http://rebind.test:{a.port}/", POLICY, hop_check=_none)
        with pytest.raises(AddressBlocked, match=re.escape("10.9.9.9")):
            await fetch(session, f"http://rebind.test:{b.port}/", POLICY, hop_check=_none)
    assert first.status == 200
    assert resolver.asked == ["rebind.test", "rebind.test"]
    assert dialled == ["127.0.0.1"]
    assert b.log == []


async def test_robots_txt_of_a_refused_address_is_not_fetched(
    guarded: tuple[aiohttp.ClientSession, StaticResolver], dialled: list[str]
) -> None:
    session, _ = guarded
    assert await fetch_robots(session, "http://metadata.test", POLICY) == (ROBOTS_BLOCKED, None)
    # "unavailable": allow all, so each page meets the guard itself and ends `blocked`
    assert RobotsRules.from_response(ROBOTS_BLOCKED, None).allow_all
    async with RecordingServer({"/robots.txt": redirect("http://internal.test/robots.txt")}) as s:
        assert await fetch_robots(session, s.origin, POLICY) == (ROBOTS_BLOCKED, None)
    assert dialled == ["127.0.0.1"]


async def test_socket_factory_refuses_even_past_the_resolver(dialled: list[str]) -> None:
    """The last line of defence: an address that reached the socket factory is checked again."""
    connector = GuardedConnector(AddressGuard())
    try:
        with pytest.raises(OSError, match=re.escape("address guard refused 127.0.0.1")):
            connector._socket((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80)))
    finally:
        await connector.close()


async def test_seed_addresses_keep_literals() -> None:
    # (names are resolved with getaddrinfo; not exercised here: no test sends a DNS query)
    found = await seed_addresses(["http://127.0.0.1:8080/", "http://[::1]/", "http://127.0.0.1/"])
    assert found == ["127.0.0.1", "::1"]


def _none(_target: str) -> str | None:
    return None
