"""URL canonicalization: the one function every stage uses to turn an href into a crawl key.

``canonicalize(url, base)`` resolves ``url`` against ``base`` and returns a
``Canonical(url, origin)`` or raises ``InvalidURL(reason)``.  Two layers:

1. **Browser resolution.** The WHATWG URL Standard's parser (the ``ada`` parser through
   ``ada-url``) resolves and serializes the href exactly as a browser would before sending it:
   leading/trailing C0 controls and spaces stripped, tabs and newlines removed, ``\\`` read as
   ``/``, the special-scheme quirks (``http:/host/x``; ``http:x`` relative to an http base but a
   host against another scheme; ``///host``), an empty userinfo (``http://@host``) dropped,
   IDNA (UTS46) and WHATWG IPv4 parsing of hosts (``0x7f.1`` is ``127.0.0.1``), dot segments
   (``%2e`` counts), the default port dropped, and the percent-encoding browsers apply (in a
   query ``'`` is sent as ``%27``).  So two spellings a browser treats as one URL give one key.
2. **Crawl rules on top**, on the serialized URL:

   * only ``http`` and ``https``; userinfo is rejected;
   * hosts: one trailing dot dropped; each label 1-63 characters of ``[a-z0-9_-]``, the host
     at most 253; an ``xn--`` label must be valid punycode of a label UTS46 keeps as is;
   * ports must be 1-65535;
   * percent-encoding normalised in path and query (RFC 3986 character classes): ``%xx`` of an
     unreserved character decoded, other ``%xx`` uppercased, a stray ``%`` becomes ``%25``, any
     other character outside the class is UTF-8 percent-encoded; then dot segments are removed
     again (so a decoded ``%2E%2E`` counts as ``..``, keeping the function idempotent);
   * the fragment is dropped; in the query, empty pairs (``&&``) are dropped, parameters whose
     name matches a ``strip_params`` glob (case-sensitive) are removed, and with ``sort_query``
     the pairs are sorted by name, stably; session ids (``sid=<token>``, ``;jsessionid=<token>``
     in the path) are removed (``agents/urls/traps.py``).  ``a=`` and ``a`` stay distinct (servers
     may tell them apart); ``+`` and ``%20`` stay distinct; an empty query disappears;
   * a trailing slash is kept unless ``fold_trailing_slash`` (then ``/a/`` -> ``/a``, root
     stays);
   * the result must be at most ``max_length`` characters.

Where this differs from the WHATWG parser, deliberately (``tests/unit/test_canonical_wpt.py``
checks every http(s) case of the standard's conformance data, ``urltestdata.json``, and fails on
any difference not in this list):

* **refused** although browsers accept them: URLs with a user name or password (credentials do
  not belong in a crawl key and are never sent); port 0 (nothing listens there); hosts with
  characters DNS names cannot hold (``!"$&'()*+,;=`{}~``), empty labels (``a..b``, ``.``) or
  labels over 63 characters.
* **merged** where browsers keep two URLs apart (the crawl key is coarser, never finer): ``%7e``
  and ``~`` (RFC 3986 says unreserved escapes are equivalent), lowercase and uppercase escapes,
  a raw character and its escape (``|`` and ``%7C``: browsers leave some raw that RFC 3986 does
  not allow), a trailing dot of a host, the fragment, tracking parameters, the query order.

Speed: ``Canonicalizer`` adds a (base, href) LRU in front (a page's hrefs, less their fragment,
keyed by what they depend on: nothing, the origin, or the folder of the base), and hosts are
memoised (``bench/micro_canonical.py``; rows in ``bench/notes/canonicalization-and-discovery.md``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import ada_url

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.urls.host import canonical_host
from streamcrawl.agents.urls.traps import is_session_param, strip_path_sessions
from streamcrawl.schemas.records import DEFAULT_STRIP_PARAMS, CrawlPolicy

_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 3986 appendix B, except that a scheme must look like one (else "a b:c" is a relative path,
# as in browsers).  Always matches.
_SPLIT = re.compile(r"(?:([A-Za-z][A-Za-z0-9+.\-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# pchar plus "/" and "?" (RFC 3986 3.3, 3.4); "?" cannot occur in a split path anyway.
_SAFE = r"A-Za-z0-9\-._~!$&'()*+,;=:@/?"
_NEEDS_PCT_WORK = re.compile(rf"[^{_SAFE}]")
_PCT_TOKEN = re.compile(rf"%[0-9A-Fa-f]{{2}}|[^{_SAFE}]")


def _pct_table() -> dict[str, str]:
    """Every "%xx" spelling (any hex case) -> its normal form: the character when unreserved."""
    table = {}
    for byte in range(256):
        upper = f"{byte:02X}"
        normal = chr(byte) if chr(byte) in _UNRESERVED else "%" + upper
        for high in {upper[0], upper[0].lower()}:
            for low in {upper[1], upper[1].lower()}:
                table[f"%{high}{low}"] = normal
    return table


_PCT_FIXED = _pct_table()


@dataclass(frozen=True, slots=True)
class CanonicalOptions:
    """The crawl-wide knobs of canonicalization (see the module docstring for the rules)."""

    strip_params: tuple[str, ...] = DEFAULT_STRIP_PARAMS
    """Glob patterns (``fnmatch``, case-sensitive) of query parameter names to remove."""
    sort_query: bool = True
    fold_trailing_slash: bool = False
    max_length: int = 2048
    _strip: Callable[[str], object] | None = field(
        init=False, repr=False, compare=False, hash=False, default=None
    )

    def __post_init__(self) -> None:
        patterns = tuple(self.strip_params)
        object.__setattr__(self, "strip_params", patterns)
        if patterns:
            # One alternation of fnmatch regexes (each ends in \Z): one match call per parameter.
            regex = re.compile("|".join(fnmatch.translate(p) for p in patterns))
            object.__setattr__(self, "_strip", regex.match)

    @classmethod
    def from_policy(cls, policy: CrawlPolicy) -> CanonicalOptions:
        """The options of one crawl: its strip list, query sorting, slash folding, URL limit."""
        return cls(
            strip_params=policy.strip_params,
            sort_query=policy.sort_query,
            fold_trailing_slash=policy.fold_trailing_slash,
            max_length=policy.max_url_length,
        )


DEFAULT_OPTIONS = CanonicalOptions()


class Canonical(NamedTuple):
    """A canonical absolute URL and its origin ``scheme://host[:port]`` (the Kafka key)."""

    url: str
    origin: str


def canonicalize(
    url: str, base: str | None = None, options: CanonicalOptions = DEFAULT_OPTIONS
) -> Canonical:
    """Resolve ``url`` against ``base`` (if given) as browsers do, and canonicalize it.

    Raises ``InvalidURL(reason)`` for a URL the WHATWG parser rejects (a relative URL without a
    usable base included), a scheme other than http(s), userinfo, a host or port we refuse (see
    the module docstring), or a result longer than ``options.max_length``.
    ``canonicalize(canonicalize(u).url)`` equals ``canonicalize(u)``.
    """
    return _crawl_key(resolve(url, base), options)


def _crawl_key(resolved: str, options: CanonicalOptions) -> Canonical:
    """The crawl rules (layer 2 of the module docstring) on a URL ``resolve`` returned."""
    scheme, authority, path, query = _split(resolved)
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(f"unsupported scheme {scheme!r} (only http and https are crawled)")
    origin = _origin(scheme, authority)
    path = _path(path, options.fold_trailing_slash)
    canonical = origin + path + _query(query, options) if query else origin + path
    if len(canonical) > options.max_length:
        raise InvalidURL(f"URL longer than {options.max_length} characters")
    return Canonical(canonical, origin)


def resolve(url: str, base: str | None = None) -> str:
    """The WHATWG URL parser's serialization of ``url`` resolved against ``base`` (ada): the
    URL a browser would request, before any crawl rule; raises ``InvalidURL`` if it rejects it.
    """
    if not url.isascii():
        url = _without_surrogates(url)
    try:
        return ada_url.join_url(base, url) if base is not None else ada_url.normalize_url(url)
    except ValueError:
        pass
    if base is not None:
        try:  # an unusable base does not matter to an absolute URL
            return ada_url.normalize_url(url)
        except ValueError:
            pass
        raise InvalidURL(f"invalid URL {url[:200]!r} (against base {base[:200]!r})") from None
    raise InvalidURL(f"invalid or relative URL {url[:200]!r} without a base URL") from None


def _without_surrogates(text: str) -> str:
    """A lone surrogate (not encodable as UTF-8) becomes U+FFFD, as in browsers."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def origin_of(url: str) -> str:
    """The origin of an already-canonical URL (no validation: pass only ``Canonical.url``)."""
    slash = url.find("/", url.find("://") + 3)
    return url if slash == -1 else url[:slash]


class Canonicalizer:
    """Fast path used per page: ``canonicalize`` with fixed options behind a bounded LRU cache.

    Cached results are exactly those of the module function; invalid URLs are cached too (as their
    reason, re-raised as a fresh ``InvalidURL``). Behind the (href, base) cache, a smaller one
    keyed by the resolved URL applies the crawl rules once per URL a page links, however many
    spellings and pages link it. URLs without a base (the frontier's, already canonical when a
    wiring sent them; redirect targets) have their own cache, which the churn of a crawl's
    relative hrefs cannot evict.
    """

    __slots__ = ("_absolute", "_lookup", "options")

    def __init__(self, options: CanonicalOptions = DEFAULT_OPTIONS, cache_size: int = 65536):
        self.options = options

        def key_of(resolved: str) -> Canonical | str:
            try:
                return _crawl_key(resolved, options)
            except InvalidURL as exc:
                return str(exc)

        crawl_key = functools.lru_cache(maxsize=max(1, cache_size // 4))(key_of)

        def compute(url: str, base: str | None) -> Canonical | str:
            try:
                return crawl_key(resolve(url, base))
            except InvalidURL as exc:
                return str(exc)

        self._lookup = functools.lru_cache(maxsize=cache_size)(compute)
        self._absolute = functools.lru_cache(maxsize=max(1, cache_size // 4))(
            functools.partial(compute, base=None)
        )

    def canonicalize(self, url: str, base: str | None = None) -> Canonical:
        """Like the module function ``canonicalize``; raises ``InvalidURL``."""
        result = self._absolute(url) if base is None else self._lookup(url, base)
        if isinstance(result, str):
            raise InvalidURL(result)
        return result

    def try_canonicalize(self, url: str, base: str | None = None) -> Canonical | None:
        """Like ``canonicalize`` but ``None`` when the URL is invalid or unsupported."""
        result = self._absolute(url) if base is None else self._lookup(url, base)
        return None if isinstance(result, str) else result

    def links(self, hrefs: Iterable[str], base: str) -> list[Canonical]:
        """Canonical outlinks of a page at ``base``: deduplicated, first-seen order kept.

        Invalid and unsupported hrefs (``mailto:``, ``javascript:``, ``data:``, ``tel:``...) are
        skipped silently.
        """
        seen_urls: set[str] = set()
        out: list[Canonical] = []
        for result in self.each(dict.fromkeys(hrefs), base):
            if result is None or result.url in seen_urls:
                continue
            seen_urls.add(result.url)
            out.append(result)
        return out

    def each(self, hrefs: Iterable[str], base: str) -> list[Canonical | None]:
        """The canonical URL of each href of a page at ``base``, in order; ``None`` for an
        invalid or unsupported one. Not deduplicated."""
        lookup = self._lookup
        page = lookup(base, None)
        # An absolute href ignores the base, a root-relative one only needs the base's origin
        # and a path-relative one the base's folder: each is keyed as the absolute URL it
        # spells (origin + href, folder + href), so "/s/p.html", "../s/p.html" from any
        # folder and "http://host/s/p.html" share one cache entry, site-wide.
        origin, folder = (page.origin, _folder(base)) if isinstance(page, Canonical) else ("", None)
        out: list[Canonical | None] = []
        for href in hrefs:
            # The crawl key drops the fragment, so the cache is keyed without it: p.html,
            # p.html#a and p.html#b share one entry. Not after a space or a control, which
            # the parser strips from the end of an href but keeps before a "#".
            cut = href.find("#")
            if cut > 0 and href[cut - 1] > " ":
                href = href[:cut]
            if href.startswith(("http://", "https://")):
                result = lookup(href, None)
            elif href[:1] == "/":
                # Not "//host" or "/\\host" (scheme-relative), nor with a tab or newline,
                # which the parser removes first (so "/\t/host" is scheme-relative too).
                if origin and not href.startswith(("//", "/\\")) and href.isprintable():
                    result = lookup(origin + href, None)
                else:
                    result = lookup(href, origin + "/" if origin else base)
            elif folder is not None and _path_relative(href):
                # The parser reads the folder's path, then the href's segments: as it reads
                # them after a base's last "/" (tabs and newlines go in both, and
                # _path_relative leaves out hrefs it would strip at the start).
                result = lookup(folder + href, None)
            else:
                result = lookup(href, base)
            out.append(None if isinstance(result, str) else result)
        return out


@functools.lru_cache(maxsize=1024)  # a page's base, asked for by each of its link lists
def _folder(base: str) -> str | None:
    """The http(s) ``base`` as the WHATWG parser serializes it, up to its path's last "/"
    (no query, no fragment); ``None`` if the parser rejects it."""
    try:
        url = resolve(base)
    except InvalidURL:
        return None
    # Serialized, "?" and "#" only start the query and the fragment (the path escapes them).
    url = url.partition("#")[0].partition("?")[0]
    return url[: url.rfind("/") + 1]


def _path_relative(href: str) -> bool:
    """Whether the WHATWG parser resolves ``href`` against its (http(s)) base's folder alone,
    as a path-relative reference: it does not start with "/", "\\", "?", "#" (nor with a
    control or space, which the parser strips first), and it has no scheme (no ":" before a
    "/"; a ":" anywhere else is taken as a scheme, to be safe)."""
    if href[:1] <= " " or href[0] in "/\\?#":
        return False
    colon = href.find(":")
    return colon == -1 or "/" in href[:colon]


def _split(url: str) -> tuple[str | None, str | None, str, str | None]:
    match = _SPLIT.match(url)
    assert match is not None  # every group is optional
    scheme, authority, path, query = match.groups()
    return scheme, authority, path, query


@functools.lru_cache(maxsize=8192)
def _origin(scheme: str, authority: str | None) -> str:
    if not authority:
        raise InvalidURL("empty host")
    if "@" in authority:
        raise InvalidURL("userinfo (user:password@) in URL is not allowed")
    if authority[0] == "[":
        close = authority.find("]") + 1
        host, port = authority[:close], authority[close:]
        if close == 0 or (port and port[0] != ":"):
            raise InvalidURL(f"invalid IPv6 host {authority!r}")
        port = port[1:]
    else:
        host, _, port = authority.partition(":")
    if not port:  # "host:" has an empty port, which RFC 3986 allows and means the default
        return f"{scheme}://{canonical_host(host)}"
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) <= 65535:
        raise InvalidURL(f"invalid port {port!r}")
    number = int(port)
    if number == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{canonical_host(host)}"
    return f"{scheme}://{canonical_host(host)}:{number}"


def _pct_normalize(text: str) -> str:
    if _NEEDS_PCT_WORK.search(text) is None:
        return text
    return _PCT_TOKEN.sub(_fix_token, text)


def _fix_token(match: re.Match[str]) -> str:
    token = match.group()
    fixed = _PCT_FIXED.get(token)
    if fixed is not None:
        return fixed
    if token == "%":
        return "%25"
    try:
        data = token.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: U+FFFD, as browsers do
        data = b"\xef\xbf\xbd"
    return "".join(f"%{byte:02X}" for byte in data)


def _path(path: str, fold: bool) -> str:
    if not path:
        return "/"
    path = strip_path_sessions(_pct_normalize(path))
    if "/." in path:
        path = _remove_dot_segments(path)
    if fold and len(path) > 1 and path[-1] == "/":
        path = path.rstrip("/") or "/"
    return path


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path ("../" above the root stays at the root)."""
    segments = path.split("/")
    out: list[str] = []
    for segment in segments[1:-1]:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    last = segments[-1]
    if last == "..":
        if out:
            out.pop()
        out.append("")
    else:
        out.append("" if last == "." else last)
    return "/" + "/".join(out)


def _query(query: str, options: CanonicalOptions) -> str:
    strip = options._strip
    pairs = []
    for pair in _pct_normalize(query).split("&"):  # a plain loop: no comprehension frames
        if (
            pair
            and (strip is None or not strip(pair.partition("=")[0]))
            and not is_session_param(pair)
        ):
            pairs.append(pair)
    if options.sort_query and len(pairs) > 1:
        pairs.sort(key=_param_name)
    return "?" + "&".join(pairs) if pairs else ""


def _param_name(pair: str) -> str:
    return pair.partition("=")[0]
