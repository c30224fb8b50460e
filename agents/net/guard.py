"""The SSRF guard: which IP addresses a crawl may connect to, checked at connect time.

A crawler follows links strangers wrote, so a page must not be able to point it at cloud
metadata (``169.254.169.254``), the Kafka or Cassandra ports, or any other service of the
network it runs in. ``AddressGuard`` refuses every address that is not globally routable
(loopback, RFC 1918 and fc00::/7 private, link-local, 100.64.0.0/10 shared, multicast,
unspecified, documentation and other reserved ranges) unless an allow-list network contains it.

The check runs on the RESOLVED address, inside the connector (``GuardedConnector``): every
request of the session goes through it, so redirects, robots.txt fetches, names that resolve
to an internal address and DNS rebinding (a name that answers a public address first and an
internal one later) cannot get past it. A refusal raises ``AddressBlocked`` before any socket
exists; the URL ends in the terminal state ``blocked``.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import Any, Final

import aiohttp
from aiohttp.abc import ResolveResult
from yarl import URL

from streamcrawl.agents.errors import ConfigError, ErrorClass, FetchError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IANA special-purpose registries (IPv4 and IPv6): every range that is not the public Internet.
_BLOCKED: Final[tuple[IPNetwork, ...]] = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",  # "this network", unspecified
        "10.0.0.0/8",  # RFC 1918
        "100.64.0.0/10",  # shared address space (carrier-grade NAT, many cluster networks)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata
        "172.16.0.0/12",  # RFC 1918
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",  # RFC 1918
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
        "::/96",  # unspecified, loopback, IPv4-compatible
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments (Teredo, ORCHID...)
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4: embeds any IPv4 address
        "3fff::/20",  # documentation
        "5f00::/16",  # segment routing
        "fc00::/7",  # unique local (private)
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
# IPv6 forms that carry an IPv4 address a gateway connects to: judged by that IPv4 address.
_NAT64: Final = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))

ENV_ALLOW_NETWORKS: Final = "STREAMCRAWL_ALLOW_NETWORKS"


class AddressBlocked(FetchError):
    """Every address of a host is refused by the SSRF guard; no connection was attempted."""

    error_class = ErrorClass.BLOCKED

    def __init__(self, host: str, addresses: Sequence[str]) -> None:
        shown = ", ".join(addresses) or host
        super().__init__(
            f"refused to connect to {host} ({shown}): not a public address; "
            "allow it with --allow-network / STREAMCRAWL_ALLOW_NETWORKS"
        )
        self.host = host
        self.addresses = tuple(addresses)


class _RefusedSocket(OSError):
    """Raised by the guard's socket factory: the last line of defence (see GuardedConnector)."""


def parse_networks(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDRs (``10.0.0.0/8``, ``fd00::/8``, a bare address for one host), comma-separated or one
    per value; raises ``ConfigError`` naming the bad entry."""
    nets: list[IPNetwork] = []
    for value in values:
        for item in value.split(","):
            text = item.strip()
            if not text:
                continue
            try:
                nets.append(ipaddress.ip_network(text, strict=False))
            except ValueError as exc:
                raise ConfigError(
                    f"allow-network entry {text!r} is not a CIDR such as 10.0.0.0/8: {exc}"
                ) from None
    return tuple(nets)


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.partition("%")[0])  # drop an IPv6 zone ("%eth0")
    except ValueError:
        return None


class AddressGuard:
    """Allows public addresses and those in ``allow``; refuses the rest (fail closed: an
    address that does not parse is refused)."""

    __slots__ = ("allow",)

    def __init__(self, allow: Iterable[IPNetwork] = ()) -> None:
        self.allow = tuple(allow)

    def with_addresses(self, addresses: Iterable[str]) -> AddressGuard:
        """A guard that also allows these exact addresses (a crawl's own seeds)."""
        extra = [ipaddress.ip_network(a) for a in addresses if _address(a) is not None]
        return AddressGuard((*self.allow, *extra))

    def allows(self, address: str) -> bool:
        ip = _address(address)
        if ip is None:
            return False
        if any(ip in net for net in self.allow if net.version == ip.version):
            return True
        return _public(ip)


def _public(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _public(ip.ipv4_mapped)
        if any(ip in net for net in _NAT64):
            return _public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return not any(ip in net for net in _BLOCKED if net.version == ip.version)


_CONNECTING_PROXY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "connecting_proxy", default=False
)


class GuardedConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` that connects only to addresses its ``AddressGuard`` allows.

    The addresses a host resolves to (its own IP for a literal) are filtered before aiohttp
    tries them, so a refused address is never dialled; when none is left, ``AddressBlocked``.
    The socket factory checks the exact address once more, so that a change of aiohttp's
    resolution path could not silently open the guard.
    """

    def __init__(
        self, guard: AddressGuard, *, proxy: tuple[str, int] | None = None, **kwargs: Any
    ) -> None:
        """``proxy``: the (host, port) of the process's egress proxy (``agents/net/proxy.py``),
        which the operator chose: connections to it are not the guard's to judge, the target
        of each request through it is."""
        super().__init__(socket_factory=self._socket, **kwargs)
        self.guard = guard
        self.proxy = proxy
        self._proxy_addresses: set[str] = set()

    async def _resolve_host(
        self, host: str, port: int, traces: Sequence[Any] | None = None
    ) -> list[ResolveResult]:
        hosts = await super()._resolve_host(host, port, traces=traces)
        if _CONNECTING_PROXY.get() and (host, port) == self.proxy:
            self._proxy_addresses.update(h["host"] for h in hosts)
            return hosts
        return self._judge(host, hosts)

    def _judge(self, host: str, hosts: list[ResolveResult]) -> list[ResolveResult]:
        allowed = [h for h in hosts if self.guard.allows(h["host"])]
        if not allowed:
            raise AddressBlocked(host, [h["host"] for h in hosts])
        return allowed

    async def _create_proxy_connection(
        self, req: aiohttp.ClientRequest, traces: list[Any], timeout: aiohttp.ClientTimeout
    ) -> Any:
        # The target is resolved and judged here, before the proxy is asked for it: a name that
        # resolves to an internal address never reaches the proxy.
        target = req.url.raw_host
        assert target is not None and req.port is not None
        self._judge(target, await super()._resolve_host(target, req.port, traces=traces))
        token = _CONNECTING_PROXY.set(True)  # this task only: the next resolve is the proxy's
        try:
            return await super()._create_proxy_connection(req, traces, timeout)
        finally:
            _CONNECTING_PROXY.reset(token)

    def _socket(self, addr_info: Any) -> socket.socket:
        family, kind, proto, _, sockaddr = addr_info
        address = str(sockaddr[0])
        if not self.guard.allows(address) and address not in self._proxy_addresses:
            raise _RefusedSocket(errno.EACCES, f"address guard refused {address}")
        return socket.socket(family=family, type=kind, proto=proto)


async def seed_addresses(seeds: Iterable[str]) -> list[str]:
    """The addresses the seeds' hosts resolve to now (unresolvable hosts are skipped: their
    fetch fails on its own)."""
    loop = asyncio.get_running_loop()
    found: list[str] = []
    for seed in seeds:
        host = URL(seed).raw_host
        if not host:
            continue
        if _address(host) is not None:
            found.append(host)
            continue
        try:
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError:
            continue
        found.extend(str(info[4][0]) for info in infos)
    return sorted(set(found))


def blocked_error(exc: BaseException) -> AddressBlocked | None:
    """The ``AddressBlocked`` behind an aiohttp error, if the guard caused it."""
    if isinstance(exc, AddressBlocked):
        return exc
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, _RefusedSocket):
        return AddressBlocked(str(getattr(exc, "host", "?")), [])
    return None
