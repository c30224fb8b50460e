"""The host of a crawl key: lowercase, IDNA (UTS46) for Unicode names, IPv4 and IPv6 addresses
normalised, and the crawl's rules for DNS names (``agents.urls.canonical``, rules on hosts).

Memoised: a crawl meets few hosts and many URLs of each.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import urllib.parse

import idna

from streamcrawl.agents.errors import InvalidURL

_HOST_OK = re.compile(r"[a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*")
_IPV4_PART = re.compile(r"[0-9]+|0x[0-9a-f]*")


@functools.lru_cache(maxsize=8192)
def canonical_host(host: str) -> str:
    """The canonical form of a URL host (no port): lowercase, IDNA, IPs normalised.

    Raises ``InvalidURL`` for an empty or malformed host.
    """
    if host[:1] == "[":
        inner = host[1:-1]
        if host[-1] != "]" or not inner or "%" in inner:  # zone ids are meaningless on the web
            raise InvalidURL(f"invalid IPv6 host {host!r}")
        try:
            return f"[{ipaddress.IPv6Address(inner).compressed}]"
        except ValueError:
            raise InvalidURL(f"invalid IPv6 host {host!r}") from None
    if "%" in host:
        try:
            host = urllib.parse.unquote(host, errors="strict")
        except UnicodeDecodeError:
            raise InvalidURL(f"invalid percent-encoded host {host!r}") from None
    host = host.lower() if host.isascii() else _idna(host)
    if host[-1:] == ".":
        host = host[:-1]
    if not host:
        raise InvalidURL("empty host")
    if len(host) > 253:
        raise InvalidURL(f"host longer than 253 characters: {host[:40]!r}...")
    if _IPV4_PART.fullmatch(host.rpartition(".")[2]):
        return _ipv4(host)
    if not _HOST_OK.fullmatch(host):
        raise InvalidURL(f"invalid host {host!r} (labels of 1-63 characters of a-z 0-9 _ -)")
    if "xn--" in host and not all(map(_punycode_ok, host.split("."))):
        raise InvalidURL(f"invalid punycode label in host {host!r}")
    return host


def _punycode_ok(label: str) -> bool:
    """UTS46 validity of an ``xn--`` label: it decodes, and to a label that mapping keeps as is
    (``xn--pokxncvks`` decodes to compatibility characters UTS46 would map: browsers refuse)."""
    if not label.startswith("xn--"):
        return True
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
        return bool(decoded) and idna.uts46_remap(decoded, std3_rules=False) == decoded
    except (UnicodeError, idna.IDNAError):
        return False


def _idna(host: str) -> str:
    try:
        return idna.encode(host, uts46=True, transitional=False).decode("ascii")
    except UnicodeError as exc:
        strict_error = exc
    try:
        # IDNA2003 accepts some names browsers resolve but IDNA2008 refuses (symbols, emoji).
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise InvalidURL(f"invalid internationalized host {host!r}: {strict_error}") from None


def _ipv4(host: str) -> str:
    """WHATWG IPv4 parsing: 1-4 decimal, octal (0...) or hex (0x...) parts; last part fills."""
    parts = host.split(".")
    if len(parts) > 4 or not all(_IPV4_PART.fullmatch(part) for part in parts):
        raise InvalidURL(f"invalid IPv4 host {host!r}")
    try:
        numbers = [
            int(p[2:] or "0", 16) if p[:2] == "0x" else int(p, 8 if p[:1] == "0" else 10)
            for p in parts
        ]
    except ValueError:  # "08"
        raise InvalidURL(f"invalid IPv4 host {host!r}") from None
    last = numbers.pop()
    if any(n > 255 for n in numbers) or last >= 256 ** (4 - len(numbers)):
        raise InvalidURL(f"invalid IPv4 host {host!r}")
    value = last + sum(n << (8 * (3 - i)) for i, n in enumerate(numbers))
    return str(ipaddress.IPv4Address(value))
