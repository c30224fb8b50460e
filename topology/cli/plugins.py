"""``streamcrawl plugin list`` and ``streamcrawl plugin test NAME URL|FILE``: the installed
plugins, and what one of them decides on one page (docs/plugins.md, "Testing a plugin").

``test`` compiles the plugin as a crawl does (``CrawlRules``), gets the page (a URL through the
normal fetch path, its host's addresses allowed as an embedded crawl's seeds are; a FILE read
as the page at ``--url``) and prints ``agents.content.plugged.decisions`` as JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from streamcrawl.agents.content.plugged import decisions
from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.plugins.registry import installed
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.cli.options import parse_plugin

DEFAULT_FILE_URL = "http://127.0.0.1/page.html"


def add_plugin_command(sub: Any) -> None:
    """``plugin list`` and ``plugin test``."""
    plugin = sub.add_parser("plugin", help="list the installed plugins, or test one on a page")
    verbs = plugin.add_subparsers(dest="plugin_command", required=True)
    verbs.add_parser("list", help="the installed plugins, one JSON line each")
    test = verbs.add_parser("test", help="run one plugin on one page and print what it decided")
    test.add_argument("name", metavar="NAME", help="the plugin's name")
    test.add_argument("page", metavar="URL|FILE", help="an http(s) URL to fetch, or an HTML file")
    test.add_argument("--args", default=None, metavar="JSON", help="the plugin's arguments")
    test.add_argument(
        "--url",
        default=DEFAULT_FILE_URL,
        help="the URL a FILE stands for: its links resolve against it (default %(default)s)",
    )


def cmd_plugin(args: argparse.Namespace) -> int:
    """``plugin list``: ``{"name", "kind", "about"}`` per installed plugin; ``plugin test``:
    ``decisions`` as JSON lines. ``ConfigError`` (exit 2) for an unknown plugin or bad
    arguments, a file that cannot be read, or a URL that cannot be fetched."""
    if args.plugin_command == "list":
        registry = installed()
        for name in registry.names():
            found = registry.get(name)
            print(json.dumps({"name": name, "kind": found.kind, "about": found.description}))
        return 0
    text = args.name if args.args is None else f"{args.name}={args.args}"
    try:
        spec = parse_plugin(text)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(str(exc)) from None
    if not args.url.startswith(("http://", "https://")):
        raise ConfigError(f"--url must be an http(s) URL, not {args.url[:200]!r}")
    is_url = args.page.startswith(("http://", "https://"))
    url = args.page if is_url else args.url
    policy = CrawlPolicy(crawl_id="plugin-test", seeds=(url,), plugins=(spec,))
    rules = CrawlRules.from_policy(policy)
    if is_url:
        status, headers, text_, url = asyncio.run(_fetch(rules, url))
    else:
        status, headers, text_ = 200, {"content-type": "text/html"}, _read(Path(args.page))
    for line in decisions(rules, url, status, headers, text_):
        print(json.dumps(line))
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text("utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None


async def _fetch(rules: CrawlRules, url: str) -> tuple[int, dict[str, str], str | None, str]:
    """(status, headers, text, final URL) of ``url`` fetched as a crawl fetches a seed."""
    from streamcrawl.agents.errors import FetchError
    from streamcrawl.agents.net.fetch import fetch, make_session
    from streamcrawl.agents.net.guard import AddressGuard, seed_addresses

    guard = AddressGuard(()).with_addresses(await seed_addresses([url]))
    session = make_session(guard=guard)
    try:
        result = await fetch(session, url, rules.policy, hop_check=lambda _target: None)
    except FetchError as exc:
        raise ConfigError(f"fetching {url} failed: {exc.error_class}: {exc}") from None
    finally:
        await session.close()
    return result.status, dict(result.headers), result.text, result.final_url
