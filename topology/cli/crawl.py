"""``streamcrawl crawl``: an embedded crawl with the progress bar and the summary (``demo`` runs
one too). Its flags, and the crawl they make, are shared with ``streamcrawl.crawl``, which takes
them as keyword arguments (docs/api.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import msgspec

from streamcrawl.agents.errors import ConfigError
from streamcrawl.schemas.records import CrawlPolicy

if TYPE_CHECKING:
    from streamcrawl.agents.net.network import Network
    from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from streamcrawl.topology.cli.options import (
    EXIT_INTERRUPTED,
    WARC_MAX_SIZE,
    add_network_flags,
    add_policy_flags,
    byte_size,
    network_from_args,
    policy_from_args,
    positive_int,
)
from streamcrawl.topology.worker.gc_thresholds import tune_gc


def add_crawl_flags(crawl: argparse.ArgumentParser) -> None:
    """The arguments of ``crawl`` that say what to crawl and how: the URLs, where the output
    and the state go, the concurrency, the WARC archive, the process's network and the policy
    flags. Not how the command reports (``--json``, ``--no-progress``): the command's own."""
    crawl.add_argument("urls", nargs="*", metavar="URL")
    crawl.add_argument(
        "--out", type=Path, default=Path("out"), help="output directory (default ./out)"
    )
    crawl.add_argument(
        "--state-dir",
        type=Path,
        default=Path(".streamcrawl"),
        help="RocksDB state, resumable (default ./.streamcrawl)",
    )
    crawl.add_argument(
        "--concurrency",
        type=positive_int,
        default=64,
        help="requests in flight, all origins (default 64)",
    )
    crawl.add_argument(
        "--recrawl-now",
        action="store_true",
        help="resume a continuous crawl with every URL it fetched due at once",
    )
    crawl.add_argument(
        "--warc",
        type=Path,
        metavar="DIR",
        help="also archive every HTTP exchange in WARC/1.1 files (.warc.gz) in DIR",
    )
    crawl.add_argument(
        "--warc-max-size",
        type=byte_size,
        default=WARC_MAX_SIZE,
        metavar="SIZE",
        help="start a new WARC file past SIZE (e.g. 500M; default 1G)",
    )
    crawl.add_argument(
        "--save-to",
        type=Path,
        metavar="DIR",
        help="also write an offline copy of the pages (and their --assets) in DIR, links "
        "rewritten to the copy's files (docs/assets.md)",
    )
    add_network_flags(crawl)
    add_policy_flags(crawl)


# What argparse names in its errors ("argument --max-pages: ..."), said as the keyword.
_FLAG = re.compile(r"argument --([a-z][a-z-]*)")


class _KeywordParser(argparse.ArgumentParser):
    """The crawl command's flags as ``crawl_args`` parses them: an error is a ``ConfigError``
    that names the keyword, not a usage line and an exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(_FLAG.sub(lambda m: m.group(1).replace("-", "_"), message))


def crawl_args(urls: Sequence[str], options: Mapping[str, object]) -> argparse.Namespace:
    """``crawl``'s arguments from keyword arguments (``streamcrawl.crawl``'s): each is a flag
    of ``add_crawl_flags`` with underscores for dashes. ``name=value`` is ``--name value``,
    ``name=True`` the switch ``--name`` (``False``: off), a list or tuple the flag once per
    item, an item that is a pair the two values of a two-value flag
    (``header_for=[(origin, "X-A: 1")]``); ``None`` leaves the default. Every value goes
    through the command's own checks.

    Raises ``TypeError`` for a keyword that is no such flag (``--json`` and ``--no-progress``
    are how the command reports, not options) or a value of the wrong shape, ``ConfigError``
    naming the keyword for a value the flag refuses.
    """
    parser = _KeywordParser(prog="streamcrawl.crawl", add_help=False)
    add_crawl_flags(parser)
    defaults = vars(parser.parse_args([]))
    argv: list[str] = []
    for name, value in options.items():
        if name not in defaults or name == "urls":
            raise TypeError(f"crawl() got an unexpected keyword argument {name!r}")
        argv += _flag_words("--" + name.replace("_", "-"), defaults[name], value)
    args = parser.parse_args(argv)
    if args.urls:  # a word no flag took: a pair given to a flag of one value
        raise TypeError(f"a pair is for a flag of two values, not {args.urls[0]!r}")
    args.urls = list(urls)
    return args


def _flag_words(flag: str, default: object, value: object) -> list[str]:
    """The command-line words of ``flag`` given ``value``, by the kind its default shows: a
    switch (``False``), a repeatable flag (a list), or a flag with one value."""
    name = flag[2:].replace("-", "_")
    if value is None:
        return []
    if default is False:
        if not isinstance(value, bool):
            raise TypeError(f"{name} is a switch: True or False, not {value!r}")
        return [flag] if value else []
    if isinstance(default, list):
        if not isinstance(value, list | tuple):
            raise TypeError(f"{name} takes a list (the flag repeats), not {value!r}")
        words = []
        for item in value:  # "--flag=item": an item may begin with a dash (a pattern)
            words += (
                [flag, *map(str, item)] if isinstance(item, list | tuple) else [f"{flag}={item}"]
            )
        return words
    return [f"{flag}={value}"]


@dataclass(frozen=True)
class CrawlSetup:
    """An embedded crawl checked and not yet opened: its policy, the process's network, and
    where it writes."""

    policy: CrawlPolicy
    network: Network
    out: Path
    state_dir: Path
    concurrency: int
    warc: Path | None = None
    warc_max_size: int = WARC_MAX_SIZE
    save_to: Path | None = None

    def open(self) -> EmbeddedCrawl:
        """The crawl with its store and output files open; ``StateError`` if another crawl
        holds the store."""
        from streamcrawl.agents.net.core import CrawlCore
        from streamcrawl.topology.embedded.runner import EmbeddedCrawl

        return EmbeddedCrawl(
            self.policy,
            out_dir=self.out,
            state_dir=self.state_dir,
            concurrency=self.concurrency,
            core=CrawlCore(self.network),
            warc=self.warc,
            warc_max_size=self.warc_max_size,
            save_to=self.save_to,
        )


def crawl_setup(args: argparse.Namespace) -> CrawlSetup:
    """The crawl ``args`` (``add_crawl_flags``'s) describe; ``InvalidURL`` or ``ConfigError``
    (one line) for a bad seed, flag or network setting, or a credential the crawl names that
    this process lacks. A crawl without ``--crawl-id`` gets a new id."""
    crawl_id = args.crawl_id or "crawl-" + uuid.uuid4().hex[:8]
    policy = policy_from_args(args, args.urls, crawl_id)
    if args.recrawl_now:
        if policy.recrawl_after is None:
            raise ConfigError("--recrawl-now needs --recrawl-after (a continuous crawl)")
        policy = msgspec.structs.replace(policy, recrawl_at=time.time())
    if args.warc is not None:
        policy = msgspec.structs.replace(policy, warc=True)
    if policy.render != "never":  # no browser, or no playwright: one line, nothing crawled
        from streamcrawl.agents.render.browser import check_render

        check_render()
    network = network_from_args(args, limit=args.concurrency)
    # A crawl that names a credential this process lacks: one line, nothing crawled.
    network.credentials.require(a.credential for a in policy.auth)
    return CrawlSetup(
        policy,
        network,
        out=args.out,
        state_dir=args.state_dir,
        concurrency=args.concurrency,
        warc=args.warc,
        warc_max_size=args.warc_max_size,
        save_to=args.save_to,
    )


def cmd_crawl(args: argparse.Namespace) -> int:
    """Run ``crawl URL... [flags]``; 130 if interrupted (resumable), else 0."""
    setup = crawl_setup(args)
    # A crawl process, as a worker is: the same garbage collector thresholds (the measurement
    # for this command: docs/performance.md, "The garbage collector").
    tune_gc()
    summary = run_embedded(
        setup.policy,
        out=setup.out,
        state_dir=setup.state_dir,
        concurrency=setup.concurrency,
        progress=not args.no_progress and sys.stderr.isatty(),
        as_json=args.json,
        network=setup.network,
        warc=setup.warc,
        warc_max_size=setup.warc_max_size,
        save_to=setup.save_to,
    )
    return EXIT_INTERRUPTED if summary["interrupted"] else 0


def run_embedded(
    policy: CrawlPolicy,
    *,
    out: Path,
    state_dir: Path,
    concurrency: int,
    progress: bool,
    as_json: bool,
    network: Network | None = None,
    warc: Path | None = None,
    warc_max_size: int = WARC_MAX_SIZE,
    save_to: Path | None = None,
) -> dict[str, object]:
    """Run an embedded crawl with the progress bar and print the summary.

    ``network``: the process's side of the requests (SSRF guard, proxy, credentials; default:
    public addresses only). ``warc``: the directory of the crawl's WARC files (``policy.warc``
    must be set). ``save_to``: the directory of its offline copy.
    """
    from streamcrawl.agents.net.network import Network
    from streamcrawl.topology.cli.progress import ProgressBar, print_summary
    from streamcrawl.topology.embedded.runner import install_signal_handlers

    network = network if network is not None else Network(limit=concurrency)
    setup = CrawlSetup(
        policy, network, out, state_dir, concurrency, warc, warc_max_size, save_to=save_to
    )

    async def go() -> dict[str, object]:
        crawl = setup.open()
        install_signal_handlers(crawl)
        with ProgressBar(enabled=progress) as bar:
            summary = await crawl.run(bar.update)
        return summary.as_dict()

    result = asyncio.run(go())
    if as_json:
        print(json.dumps(result, sort_keys=True))
    else:
        print_summary(result)
    return result
