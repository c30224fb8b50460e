"""``streamcrawl crawl``: an embedded crawl with the progress bar and the summary (``demo`` runs
one too)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from streamcrawl.agents.errors import ConfigError
from streamcrawl.schemas.records import CrawlPolicy

if TYPE_CHECKING:
    from streamcrawl.agents.net.network import Network
from streamcrawl.topology.cli.options import (
    EXIT_INTERRUPTED,
    WARC_MAX_SIZE,
    network_from_args,
    policy_from_args,
)
from streamcrawl.topology.worker.gc_thresholds import tune_gc


def cmd_crawl(args: argparse.Namespace) -> int:
    """Run ``crawl URL... [flags]``; 130 if interrupted (resumable), else 0."""
    crawl_id = args.crawl_id or "crawl-" + uuid.uuid4().hex[:8]
    policy = policy_from_args(args, args.urls, crawl_id)
    if args.recrawl_now:
        if policy.recrawl_after is None:
            raise ConfigError("--recrawl-now needs --recrawl-after (a continuous crawl)")
        policy = msgspec.structs.replace(policy, recrawl_at=time.time())
    if args.warc is not None:
        policy = msgspec.structs.replace(policy, warc=True)
    # A crawl process, as a worker is: the same garbage collector thresholds (the measurement
    # for this command: docs/performance.md, "The garbage collector").
    network = network_from_args(args, limit=args.concurrency)
    # A crawl that names a credential this process lacks: one line, nothing crawled.
    network.credentials.require(a.credential for a in policy.auth)
    tune_gc()
    summary = run_embedded(
        policy,
        out=args.out,
        state_dir=args.state_dir,
        concurrency=args.concurrency,
        progress=not args.no_progress and sys.stderr.isatty(),
        as_json=args.json,
        network=network,
        warc=args.warc,
        warc_max_size=args.warc_max_size,
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
) -> dict[str, object]:
    """Run an embedded crawl with the progress bar and print the summary.

    ``network``: the process's side of the requests (SSRF guard, proxy, credentials; default:
    public addresses only). ``warc``: the directory of the crawl's WARC files (``policy.warc``
    must be set).
    """
    from streamcrawl.agents.net.core import CrawlCore
    from streamcrawl.agents.net.network import Network
    from streamcrawl.topology.cli.progress import ProgressBar, print_summary
    from streamcrawl.topology.embedded.runner import EmbeddedCrawl, install_signal_handlers

    core = CrawlCore(network if network is not None else Network(limit=concurrency))

    async def go() -> dict[str, object]:
        crawl = EmbeddedCrawl(
            policy,
            out_dir=out,
            state_dir=state_dir,
            concurrency=concurrency,
            core=core,
            warc=warc,
            warc_max_size=warc_max_size,
        )
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
