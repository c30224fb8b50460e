"""What the CLI's commands share: exit codes, the one-line argparse parser, the argparse types,
the crawl policy flags of ``crawl`` and ``seed``, and the policy built from them.

It imports no other command module, so every command module may import it (no import cycle
through ``cli.py``).
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, get_type_hints

import msgspec

from streamcrawl.agents.errors import ConfigError, InvalidURL
from streamcrawl.schemas.codec import BadMessage, check
from streamcrawl.schemas.records import (
    DEFAULT_USER_AGENT,
    CrawlId,
    CrawlPolicy,
    Extractor,
    PluginName,
    PluginSpec,
)

if TYPE_CHECKING:
    from streamcrawl.agents.net.network import Network
    from streamcrawl.agents.plugins.registry import Registry

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports errors as one line (no usage dump) and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"streamcrawl: error: {message}\n")


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)


@functools.cache
def _policy_hints() -> dict[str, Any]:
    # Resolved once: every command line builds the parser, which types ~30 flags by them.
    return get_type_hints(CrawlPolicy, include_extras=True)


def _policy_value(name: str, parse: Callable[[str], object], what: str) -> Callable[[str], Any]:
    """An argparse type for the ``CrawlPolicy`` field ``name``: ``parse`` the text, then check
    it against the bounds on the record itself (``schemas/records.py``), which the control topic
    and the JSON Schema share."""
    hint = _policy_hints()[name]

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        try:
            return msgspec.convert(value, hint)
        except msgspec.ValidationError as exc:
            raise argparse.ArgumentTypeError(f"{exc}, got {text}") from None

    return convert


def _duration(text: str) -> float:
    from streamcrawl.agents.policy.revisit import parse_duration

    return parse_duration(text)


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
WARC_MAX_SIZE = 1 << 30  # the and Heritrix's default rotation size


def byte_size(text: str) -> int:
    """``"1G"`` -> 1073741824: a positive whole number of bytes, with an optional K/M/G/T
    suffix (binary; ``KiB`` / ``KB`` / ``k`` read the same)."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1:] if value[-1:] in _SIZE_UNITS else ""
    number = value[: len(value) - len(unit)].strip()
    if not number.isdigit() or int(number) <= 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 500M or 1G, got {text!r}")
    return int(number) * _SIZE_UNITS[unit]


def _crawl_id(text: str) -> str:
    try:
        return msgspec.convert(text, CrawlId)
    except msgspec.ValidationError:
        raise argparse.ArgumentTypeError(
            f"crawl id {text!r} must be 1-100 letters, digits, '.', '_' or '-'"
        ) from None


def _extractor(text: str) -> Extractor:
    """``NAME=SELECTOR``: an extractor whose selector lexbor parses (docs/extraction.md)."""
    from streamcrawl.agents.policy.extractors import parse_extractor

    try:
        return parse_extractor(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_plugin(text: str) -> PluginSpec:
    """``NAME`` or ``NAME=JSON`` (a JSON object: the plugin's arguments) -> a ``PluginSpec``;
    ``argparse.ArgumentTypeError`` (one line) if malformed. Whether the plugin is installed and
    takes these arguments is the crawl's rules' check (``policy_from_args``)."""
    name, eq, raw = text.partition("=")
    try:
        name = msgspec.convert(name.strip(), PluginName)
    except msgspec.ValidationError:
        raise argparse.ArgumentTypeError(
            f"plugin name {name[:80]!r} must be 1-64 letters, digits, '_', '.' or '-'"
        ) from None
    try:
        args = msgspec.json.decode(raw) if eq else {}
    except msgspec.DecodeError as exc:
        raise argparse.ArgumentTypeError(
            f"plugin {name}: its arguments are not JSON: {exc}"
        ) from None
    if not isinstance(args, dict):
        raise argparse.ArgumentTypeError(f"plugin {name}: its arguments must be a JSON object")
    return PluginSpec(name=name, args=args)


def _regex(text: str) -> str:
    """A scope pattern RE2 can evaluate (linear time; ``agents/urls/patterns.py``)."""
    from streamcrawl.agents.errors import ConfigError
    from streamcrawl.agents.urls.patterns import compile_pattern

    try:
        compile_pattern(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


# The numeric policy flags: (CrawlPolicy field, parse, what a value is, help). The flag is the
# field's name with dashes; its default is the record's own, and so are its bounds.
_NUMBERS: tuple[tuple[str, Callable[[str], object], str, str], ...] = (
    ("max_pages", int, "a whole number", "stop admitting URLs after N"),
    ("max_depth", int, "a whole number", "links followed from the seeds"),
    ("delay", float, "seconds", "seconds between requests to one origin (default %(default)s)"),
    ("per_origin_concurrency", int, "a whole number", "requests in flight per origin (default 1)"),
    ("max_crawl_delay", float, "seconds", "cap on robots.txt Crawl-delay (default %(default)s)"),
    ("max_body", int, "a whole number", "stop reading a body past BYTES (default 10 MiB)"),
    ("timeout", float, "seconds", "total seconds per request (default %(default)s)"),
    ("retries", int, "a whole number", "extra attempts after a retryable error (default 2)"),
    ("max_page_links", int, "a whole number", "links listed per page record (default 1000)"),
    (
        "max_assets",
        int,
        "a whole number",
        "queue at most N page assets (default: 10 per page of --max-pages, else no limit)",
    ),
    (
        "recrawl_after",
        _duration,
        "a duration",
        "keep the crawl fresh: revisit each fetched URL after DURATION (e.g. 30m, 1d); "
        "adaptive by default (off: each URL once)",
    ),
    ("recrawl_min", _duration, "a duration", "shortest revisit interval (default: after / 8)"),
    ("recrawl_max", _duration, "a duration", "longest revisit interval (default: after x 14)"),
    (
        "recrawl_feed_min",
        _duration,
        "a duration",
        "shortest revisit interval of RSS/Atom feeds (default: min / 4)",
    ),
    (
        "recrawl_jitter",
        float,
        "a fraction",
        "bring each due time up to this share of its interval sooner (default 0.1)",
    ),
    (
        "max_fetches_per_hour",
        int,
        "a whole number",
        "at most N requests per hour, first fetches and revisits together",
    ),
)

# The switches: (flag, CrawlPolicy field, whether the flag turns the field off, help).
_SWITCHES: tuple[tuple[str, str, bool, str], ...] = (
    ("--ignore-robots", "obey_robots", True, "do not fetch or obey robots.txt"),
    (
        "--ignore-nofollow",
        "honor_nofollow",
        True,
        "follow rel=nofollow and meta/X-Robots-Tag nofollow",
    ),
    ("--keep-query-order", "sort_query", True, "do not sort query parameters"),
    ("--fold-trailing-slash", "fold_trailing_slash", False, "treat /a/ and /a as the same URL"),
    (
        "--store-bodies",
        "store_bodies",
        False,
        "keep decoded HTML bodies in the sinks (pages.jsonl, Cassandra)",
    ),
    (
        "--no-bodies",
        "stream_bodies",
        True,
        "Kafka wiring: the pages topic carries no bodies (default: decoded, zstd)",
    ),
    (
        "--follow-canonical",
        "follow_canonical",
        False,
        "a page whose rel=canonical names another URL: crawl that URL, not the page's links",
    ),
    (
        "--no-sitemaps",
        "sitemaps",
        True,
        "do not read sitemaps (neither robots.txt Sitemap: lines nor --sitemap)",
    ),
    ("--no-feeds", "feeds", True, "do not fetch the RSS/Atom feeds pages link to"),
    (
        "--text",
        "main_text",
        False,
        "keep each page's main text (boilerplate removed) and its language in its record",
    ),
)

# Repeatable flags: (flag, metavar, argparse type, help).
_LISTS: tuple[tuple[str, str, Callable[[str], str], str], ...] = (
    ("--allow-host", "HOST", str, "also crawl this host (repeatable)"),
    ("--allow-domain", "DOMAIN", str, "also crawl this registrable domain and its subdomains"),
    ("--include", "REGEX", _regex, "only URLs matching (repeatable)"),
    ("--exclude", "REGEX", _regex, "never URLs matching (repeatable)"),
    (
        "--sitemap",
        "URL",
        str,
        "also start from this sitemap or sitemap index (repeatable; may be gzipped)",
    ),
    (
        "--render-include",
        "REGEX",
        _regex,
        "render URLs matching in a browser whenever --render is not never; with --render "
        "always, only these (repeatable)",
    ),
)


def asset_types(text: str) -> tuple[str, ...]:
    """``--assets``: ``css,js,images,fonts,media`` (any of them, comma-separated), ``all`` or
    ``none``; docs/assets.md."""
    from streamcrawl.agents.content.assets import ASSET_TYPES

    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if words in (["all"], ["none"]):
        return ASSET_TYPES if words == ["all"] else ()
    unknown = [w for w in words if w not in ASSET_TYPES]
    if unknown or not words:
        raise argparse.ArgumentTypeError(
            f"expected all, none or a comma-separated list of {','.join(ASSET_TYPES)}, got {text!r}"
        )
    return tuple(t for t in ASSET_TYPES if t in words)


def asset_hosts(text: str) -> tuple[str, ...] | None:
    """``--asset-hosts``: ``any`` (None), ``same`` (the crawl's own hosts: ()) or a
    comma-separated list of hosts besides the crawl's own."""
    value = text.strip().lower()
    if value == "any":
        return None
    if value == "same":
        return ()
    hosts = tuple(h.strip() for h in value.split(",") if h.strip())
    if not hosts:
        raise argparse.ArgumentTypeError(f"expected any, same or HOST[,HOST...], got {text!r}")
    return hosts


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def add_policy_flags(p: argparse.ArgumentParser) -> None:
    """Flags that define a crawl, shared by ``crawl`` and ``seed``."""
    defaults = {f.name: f.default for f in msgspec.structs.fields(CrawlPolicy)}
    p.add_argument("--crawl-id", type=_crawl_id, help="name of the crawl (resume with the same)")
    for field, parse, what, text in _NUMBERS:
        metavar = "BYTES" if field == "max_body" else None
        p.add_argument(
            "--" + field.replace("_", "-"),
            type=_policy_value(field, parse, what),
            default=defaults[field],
            metavar=metavar,
            help=text,
        )
    for flag, metavar, kind, text in _LISTS:
        p.add_argument(flag, action="append", default=[], type=kind, metavar=metavar, help=text)
    p.add_argument(
        "--user-agent",
        default=DEFAULT_USER_AGENT,
        help="User-Agent; its product token selects the robots.txt group",
    )
    for flag, _field, _turns_off, text in _SWITCHES:
        p.add_argument(flag, action="store_true", help=text)
    p.add_argument(
        "--recrawl-mode",
        choices=("adaptive", "fixed"),
        default="adaptive",
        help="adaptive: longer after no change, shorter after a change; fixed: every "
        "--recrawl-after (default %(default)s)",
    )
    add_content_flags(p)
    add_request_flags(p)


def add_content_flags(p: argparse.ArgumentParser) -> None:
    """What a crawl keeps of a page and fetches with it: extractors, plugins, assets."""
    p.add_argument(
        "--render",
        choices=("never", "always", "auto"),
        default="never",
        help="render HTML pages in a browser (the system's Chromium) before they are parsed: "
        "never, always, or auto: those that look built by scripts, learned per origin and "
        "path prefix (default %(default)s; docs/rendering.md)",
    )
    p.add_argument(
        "--extract",
        action="append",
        default=[],
        type=_extractor,
        metavar="NAME=SELECTOR",
        help="put what the CSS SELECTOR matches in each page record's data[NAME]: the "
        "element's text, or SELECTOR::attr(NAME); NAME=all:SELECTOR for every match "
        "(repeatable, at most 32; docs/extraction.md)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        type=parse_plugin,
        metavar="NAME[=JSON]",
        help="run the installed plugin NAME, with the arguments JSON (an object), after the "
        "built-in rules; plugins run in the order given (repeatable, at most 16; "
        "docs/plugins.md)",
    )
    p.add_argument(
        "--assets",
        type=asset_types,
        default=(),
        metavar="TYPES",
        help="also fetch what each page needs to be seen: css,js,images,fonts,media (any of "
        "them), all or none (default none; docs/assets.md)",
    )
    p.add_argument(
        "--asset-hosts",
        type=asset_hosts,
        default=None,
        metavar="WHERE",
        help="where assets may be: any (any host, the default), same (the crawl's own "
        "hosts) or HOST,... (those and these hosts)",
    )


def add_request_flags(p: argparse.ArgumentParser) -> None:
    """What the crawl's requests carry (docs/requests.md); part of the crawl spec, so no
    secret: credentials are named here and held by the process."""
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="send this header with every request of the crawl, robots.txt included "
        "(repeatable; framing, hop-by-hop and credential headers are refused)",
    )
    p.add_argument(
        "--header-for",
        action="append",
        default=[],
        nargs=2,
        metavar=("ORIGIN", "'NAME: VALUE'"),
        help="send this header with the requests to ORIGIN only (repeatable)",
    )
    p.add_argument(
        "--cookies",
        action="store_true",
        help="keep a cookie jar per origin (RFC 6265): send back the cookies sites set",
    )
    p.add_argument(
        "--cookie-for",
        action="append",
        default=[],
        nargs=2,
        metavar=("ORIGIN", "NAME=VALUE"),
        help="start ORIGIN's jar with this cookie (repeatable; implies --cookies)",
    )
    p.add_argument(
        "--auth-for",
        action="append",
        default=[],
        nargs=2,
        metavar=("ORIGIN", "NAME"),
        help="send ORIGIN (only) the credential NAME, whose value the process holds: "
        "STREAMCRAWL_CREDENTIAL_<NAME> or a file NAME in STREAMCRAWL_CREDENTIALS_DIR",
    )
    p.add_argument(
        "--warc-credentials",
        choices=("redact", "keep"),
        default="redact",
        help="WARC request records: credential and cookie values replaced by a mark "
        "(redact, the default) or archived as sent (keep)",
    )


def request_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The ``CrawlPolicy`` request fields of the flags; ``ConfigError`` (one line) for a
    malformed or forbidden header, a malformed cookie or origin."""
    from streamcrawl.agents.policy.requests import check_cookie, parse_header, parse_origin
    from streamcrawl.schemas.records import CookiePreset, OriginAuth, RequestHeader

    headers = [RequestHeader(name=n, value=v) for n, v in map(parse_header, args.header)]
    for origin, text in args.header_for:
        name, value = parse_header(text)
        headers.append(RequestHeader(name=name, value=value, origin=parse_origin(origin)))
    presets = []
    for origin, pair in args.cookie_for:
        check_cookie(pair)
        presets.append(CookiePreset(origin=parse_origin(origin), cookie=pair))
    auth = [OriginAuth(origin=parse_origin(o), credential=n) for o, n in args.auth_for]
    return {
        "headers": tuple(headers),
        "cookies": bool(args.cookies or presets),
        "cookie_presets": tuple(presets),
        "auth": tuple(auth),
        "warc_credentials": args.warc_credentials,
    }


def policy_from_args(
    args: argparse.Namespace, seeds: Sequence[str], crawl_id: str, registry: Registry | None = None
) -> CrawlPolicy:
    """Build and validate the crawl policy; raises ``InvalidURL`` for a bad seed and
    ``ConfigError`` for a spec outside the record's bounds (e.g. too many ``--allow-host``), or
    a ``--plugin`` that ``registry`` (default: the installed entry points) lacks or that
    refuses its arguments."""
    if not seeds and not args.sitemap:
        raise ConfigError("a URL to crawl (or a --sitemap URL) is required")
    if args.sitemap and args.no_sitemaps:
        raise ConfigError("--sitemap and --no-sitemaps contradict each other")
    numbers = {field: getattr(args, field) for field, *_ in _NUMBERS}
    switches = {field: getattr(args, _dest(flag)) != off for flag, field, off, _ in _SWITCHES}
    policy = CrawlPolicy(
        crawl_id=crawl_id,
        seeds=_canonical(seeds, "seed"),
        allow_hosts=tuple(h.lower() for h in args.allow_host),
        allow_domains=tuple(d.lower() for d in args.allow_domain),
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        user_agent=args.user_agent,
        connect_timeout=min(10.0, args.timeout),
        sitemap_seeds=_canonical(args.sitemap, "sitemap"),
        recrawl_mode=args.recrawl_mode,
        extract=tuple(args.extract),
        plugins=tuple(args.plugin),
        assets=args.assets,
        asset_hosts=args.asset_hosts,
        render=args.render,
        render_include=tuple(args.render_include),
        **numbers,
        **switches,
        **request_fields(args),
    )
    try:
        policy = check(policy)
    except BadMessage as exc:
        raise ConfigError(str(exc)) from None
    from streamcrawl.agents.policy.rules import CrawlRules

    # ConfigError: revisit bounds, request options, extractors, plugins
    CrawlRules.from_policy(policy, registry)
    if policy.recrawl_after is None and any(
        getattr(args, f) is not None for f in ("recrawl_min", "recrawl_max", "recrawl_feed_min")
    ):
        raise ConfigError("--recrawl-min/--recrawl-max/--recrawl-feed-min need --recrawl-after")
    return policy


def _canonical(urls: Sequence[str], what: str) -> tuple[str, ...]:
    """The canonical form of each of ``urls``; ``InvalidURL`` names the first bad one."""
    from streamcrawl.agents.urls.canonical import canonicalize

    canonical = []
    for url in urls:
        try:
            canonical.append(canonicalize(url).url)
        except InvalidURL as exc:
            raise InvalidURL(f"invalid {what} URL {url!r}: {exc}") from None
    return tuple(canonical)


def add_allow_network_flag(p: argparse.ArgumentParser) -> None:
    """``--allow-network`` of ``crawl`` and ``worker``: a process setting, never part of a crawl
    spec (whoever starts a crawl must not widen what the workers' network may reach)."""
    p.add_argument(
        "--allow-network",
        action="append",
        default=[],
        metavar="CIDR",
        help="also connect to this non-public network, e.g. 10.0.0.0/8 (repeatable; env "
        "STREAMCRAWL_ALLOW_NETWORKS; default: public addresses only, plus the seeds' own "
        "addresses for crawl)",
    )


def add_network_flags(p: argparse.ArgumentParser) -> None:
    """The process's network of ``crawl`` and ``worker`` (docs/requests.md): the SSRF guard's
    allow-list, the egress proxy, the credentials folder. Never part of a crawl spec."""
    add_allow_network_flag(p)
    p.add_argument(
        "--proxy",
        metavar="URL",
        help="send every request through this HTTP proxy, http://host:port (https targets "
        "through CONNECT; env STREAMCRAWL_PROXY)",
    )
    p.add_argument(
        "--no-proxy-for",
        action="append",
        default=[],
        metavar="HOST",
        help="fetch HOST and its subdomains directly (repeatable; env STREAMCRAWL_NO_PROXY_FOR)",
    )
    p.add_argument(
        "--proxy-credential",
        metavar="NAME",
        help="the credential (basic:USER:PASSWORD) sent to the proxy (env "
        "STREAMCRAWL_PROXY_CREDENTIAL)",
    )
    p.add_argument(
        "--credentials-dir",
        type=Path,
        metavar="DIR",
        help="folder of credential files, one per NAME (env STREAMCRAWL_CREDENTIALS_DIR)",
    )


def network_from_args(args: argparse.Namespace, *, limit: int) -> Network:
    """The process's network of ``crawl`` from its flags, else ``STREAMCRAWL_*``; ``ConfigError``
    (one line) for a bad allow-list or proxy, or a proxy credential this process lacks."""
    from streamcrawl.agents.net.credentials import Credentials
    from streamcrawl.agents.net.guard import AddressGuard, parse_networks
    from streamcrawl.agents.net.network import Network
    from streamcrawl.agents.net.proxy import proxy_setting

    env = os.environ
    credentials = Credentials(directory=args.credentials_dir)
    proxy = proxy_setting(
        args.proxy or env.get("STREAMCRAWL_PROXY"),
        ",".join(args.no_proxy_for) or env.get("STREAMCRAWL_NO_PROXY_FOR", ""),
        args.proxy_credential or env.get("STREAMCRAWL_PROXY_CREDENTIAL"),
        credentials,
    )
    guard = AddressGuard(parse_networks([allowed_networks(args)]))
    return Network(guard=guard, credentials=credentials, proxy=proxy, limit=limit)


def allowed_networks(args: argparse.Namespace) -> str:
    """``--allow-network`` flags, else ``STREAMCRAWL_ALLOW_NETWORKS``, comma-separated."""
    from streamcrawl.agents.net.guard import ENV_ALLOW_NETWORKS

    return ",".join(args.allow_network) or os.environ.get(ENV_ALLOW_NETWORKS, "")
