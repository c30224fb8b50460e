"""What the CLI's commands share: exit codes, the one-line argparse parser, the argparse types,
the crawl policy flags of ``crawl`` and ``seed``, and the policy built from them.

It imports no other command module, so every command module may import it (no import cycle
through ``cli.py``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, get_type_hints

import msgspec

from streamcrawl.agents.errors import ConfigError, InvalidURL
from streamcrawl.schemas.codec import BadMessage, check
from streamcrawl.schemas.records import DEFAULT_USER_AGENT, CrawlId, CrawlPolicy

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


def _policy_value(name: str, parse: Callable[[str], object], what: str) -> Callable[[str], Any]:
    """An argparse type for the ``CrawlPolicy`` field ``name``: ``parse`` the text, then check
    it against the bounds on the record itself (``schemas/records.py``), which the control topic
    and the JSON Schema share."""
    hint = get_type_hints(CrawlPolicy, include_extras=True)[name]

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


def _crawl_id(text: str) -> str:
    try:
        return msgspec.convert(text, CrawlId)
    except msgspec.ValidationError:
        raise argparse.ArgumentTypeError(
            f"crawl id {text!r} must be 1-100 letters, digits, '.', '_' or '-'"
        ) from None


def _regex(text: str) -> str:
    """A scope pattern RE2 can evaluate (linear time; ``agents/patterns.py``)."""
    from streamcrawl.agents.errors import ConfigError
    from streamcrawl.agents.patterns import compile_pattern

    try:
        compile_pattern(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_policy_flags(p: argparse.ArgumentParser) -> None:
    """Flags that define a crawl, shared by ``crawl`` and ``seed``."""
    p.add_argument("--crawl-id", type=_crawl_id, help="name of the crawl (resume with the same)")
    p.add_argument(
        "--max-pages",
        type=_policy_value("max_pages", int, "a whole number"),
        help="stop admitting URLs after N",
    )
    p.add_argument(
        "--max-depth",
        type=_policy_value("max_depth", int, "a whole number"),
        help="links followed from the seeds",
    )
    p.add_argument(
        "--delay",
        type=_policy_value("delay", float, "seconds"),
        default=1.0,
        help="seconds between requests to one origin (default 1)",
    )
    p.add_argument(
        "--per-origin-concurrency",
        type=_policy_value("per_origin_concurrency", int, "a whole number"),
        default=1,
        help="requests in flight per origin (default 1)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="also crawl this host (repeatable)",
    )
    p.add_argument(
        "--allow-domain",
        action="append",
        default=[],
        metavar="DOMAIN",
        help="also crawl this registrable domain and its subdomains",
    )
    p.add_argument(
        "--include",
        action="append",
        default=[],
        type=_regex,
        metavar="REGEX",
        help="only URLs matching (repeatable)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        type=_regex,
        metavar="REGEX",
        help="never URLs matching (repeatable)",
    )
    p.add_argument(
        "--user-agent",
        default=DEFAULT_USER_AGENT,
        help="User-Agent; its product token selects the robots.txt group",
    )
    p.add_argument("--ignore-robots", action="store_true", help="do not fetch or obey robots.txt")
    p.add_argument(
        "--ignore-nofollow",
        action="store_true",
        help="follow rel=nofollow and meta/X-Robots-Tag nofollow",
    )
    p.add_argument(
        "--max-crawl-delay",
        type=_policy_value("max_crawl_delay", float, "seconds"),
        default=30.0,
        help="cap on robots.txt Crawl-delay (default 30)",
    )
    p.add_argument(
        "--max-body",
        type=_policy_value("max_body", int, "a whole number"),
        default=10 * 1024 * 1024,
        metavar="BYTES",
        help="stop reading a body past this size (default 10 MiB)",
    )
    p.add_argument(
        "--timeout",
        type=_policy_value("timeout", float, "seconds"),
        default=30.0,
        help="total seconds per request (default 30)",
    )
    p.add_argument(
        "--retries",
        type=_policy_value("retries", int, "a whole number"),
        default=2,
        help="extra attempts after a retryable error (default 2)",
    )
    p.add_argument("--keep-query-order", action="store_true", help="do not sort query parameters")
    p.add_argument(
        "--fold-trailing-slash", action="store_true", help="treat /a/ and /a as the same URL"
    )
    p.add_argument(
        "--store-bodies",
        action="store_true",
        help="keep decoded HTML bodies in the sinks (pages.jsonl, Cassandra)",
    )
    p.add_argument(
        "--no-bodies",
        action="store_true",
        help="Kafka wiring: the pages topic carries no bodies (default: decoded, zstd)",
    )
    p.add_argument(
        "--follow-canonical",
        action="store_true",
        help="a page whose rel=canonical names another URL: crawl that URL, not the page's links",
    )
    p.add_argument(
        "--sitemap",
        action="append",
        default=[],
        metavar="URL",
        help="also start from this sitemap or sitemap index (repeatable; may be gzipped)",
    )
    p.add_argument(
        "--no-sitemaps",
        action="store_true",
        help="do not read sitemaps (neither robots.txt Sitemap: lines nor --sitemap)",
    )
    p.add_argument(
        "--no-feeds", action="store_true", help="do not fetch the RSS/Atom feeds pages link to"
    )


def policy_from_args(args: argparse.Namespace, seeds: Sequence[str], crawl_id: str) -> CrawlPolicy:
    """Build and validate the crawl policy; raises ``InvalidURL`` for a bad seed and
    ``ConfigError`` for a spec outside the record's bounds (e.g. too many ``--allow-host``)."""
    from streamcrawl.agents.canonical import canonicalize

    if not seeds and not args.sitemap:
        raise ConfigError("a URL to crawl (or a --sitemap URL) is required")
    if args.sitemap and args.no_sitemaps:
        raise ConfigError("--sitemap and --no-sitemaps contradict each other")
    canonical = []
    for seed in seeds:
        try:
            canonical.append(canonicalize(seed).url)
        except InvalidURL as exc:
            raise InvalidURL(f"invalid seed URL {seed!r}: {exc}") from None
    sitemaps = []
    for sitemap in args.sitemap:
        try:
            sitemaps.append(canonicalize(sitemap).url)
        except InvalidURL as exc:
            raise InvalidURL(f"invalid sitemap URL {sitemap!r}: {exc}") from None
    policy = CrawlPolicy(
        crawl_id=crawl_id,
        seeds=tuple(canonical),
        allow_hosts=tuple(h.lower() for h in args.allow_host),
        allow_domains=tuple(d.lower() for d in args.allow_domain),
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        max_depth=args.max_depth,
        max_pages=args.max_pages,
        delay=args.delay,
        per_origin_concurrency=args.per_origin_concurrency,
        max_crawl_delay=args.max_crawl_delay,
        user_agent=args.user_agent,
        obey_robots=not args.ignore_robots,
        honor_nofollow=not args.ignore_nofollow,
        max_body=args.max_body,
        timeout=args.timeout,
        connect_timeout=min(10.0, args.timeout),
        retries=args.retries,
        sort_query=not args.keep_query_order,
        fold_trailing_slash=args.fold_trailing_slash,
        store_bodies=args.store_bodies,
        stream_bodies=not args.no_bodies,
        follow_canonical=args.follow_canonical,
        sitemaps=not args.no_sitemaps,
        sitemap_seeds=tuple(sitemaps),
        feeds=not args.no_feeds,
    )
    try:
        return check(policy)
    except BadMessage as exc:
        raise ConfigError(str(exc)) from None


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


def allowed_networks(args: argparse.Namespace) -> str:
    """``--allow-network`` flags, else ``STREAMCRAWL_ALLOW_NETWORKS``, comma-separated."""
    from streamcrawl.agents.netguard import ENV_ALLOW_NETWORKS

    return ",".join(args.allow_network) or os.environ.get(ENV_ALLOW_NETWORKS, "")
