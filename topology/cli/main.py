"""The ``streamcrawl`` command line. Bad input exits 2 with one readable line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamcrawl.agents.errors import ConfigError, CrawlError, InvalidURL
from streamcrawl.topology.cli import kafka_args as commands
from streamcrawl.topology.cli.crawl import add_crawl_flags, cmd_crawl
from streamcrawl.topology.cli.options import EXIT_INTERRUPTED, EXIT_USAGE, OneLineParser
from streamcrawl.topology.cli.plugins import add_plugin_command, cmd_plugin


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="streamcrawl", description="A polite, replay-safe web crawler.")
    parser.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default WARNING; for the worker it overrides STREAMCRAWL_LOG_LEVEL (default INFO)",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    _crawl_command(sub)
    _demo_command(sub)
    commands.add_kafka_commands(sub)
    add_plugin_command(sub)
    return parser


def _crawl_command(sub: Any) -> None:
    """``crawl URL...``: a crawl in this process, its output files and policy flags."""
    crawl = sub.add_parser("crawl", help="crawl in this process (no Kafka, no Cassandra)")
    add_crawl_flags(crawl)
    crawl.add_argument(
        "--json", action="store_true", help="print the final summary as one JSON object"
    )
    crawl.add_argument(
        "--no-progress", action="store_true", help="no progress bar even on a terminal"
    )


def _demo_command(sub: Any) -> None:
    """``demo``: the bundled site served on 127.0.0.1 and crawled."""
    demo = sub.add_parser("demo", help="serve a small bundled site on 127.0.0.1 and crawl it")
    demo.add_argument(
        "--out", type=Path, default=None, help="output directory (default: a temp dir)"
    )
    demo.add_argument(
        "--json", action="store_true", help="print the final summary as one JSON object"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "worker":  # the worker configures logging from its settings
        logging.basicConfig(
            level=args.log_level or "WARNING",
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    try:
        if args.command == "crawl":
            return cmd_crawl(args)
        if args.command == "demo":
            from streamcrawl.topology.cli.demo import run_demo

            return run_demo(args)
        if args.command == "plugin":
            return cmd_plugin(args)
        return commands.run(args)
    except (ConfigError, InvalidURL) as exc:
        print(f"streamcrawl: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CrawlError as exc:
        print(f"streamcrawl: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
