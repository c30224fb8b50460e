"""Sub-commands of the Kafka wiring: worker, render-worker, seed, pages, status,
pause/resume/stop, recrawl, admin, warc.

The parsers live here so ``streamcrawl --help`` lists every command; the implementations live
in ``topology.cli.kafka_commands`` and are imported only when one of them runs. They need the
``kafka`` extra (pyproject.toml): without it ``run`` raises a one-line ``ConfigError`` that
names the extra, before importing anything of it. ``warc index`` reads files only and runs on
the base install, like the embedded crawl (``tests/unit/test_import_graph.py`` holds both to it).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamcrawl.agents.errors import ConfigError
from streamcrawl.topology.cli.options import (
    WARC_MAX_SIZE,
    _policy_value,
    add_network_flags,
    add_policy_flags,
    byte_size,
)

KAFKA_COMMANDS = (
    "worker", "render-worker", "seed", "pages", "status", "pause", "resume", "stop", "recrawl",
    "admin", "warc",
)  # fmt: skip


# The import names of the kafka extra's distributions that the Kafka wiring imports (Faust's own
# ``mode`` comes with faust-streaming, pydantic with pydantic-settings).
KAFKA_EXTRA = (
    "faust", "aiokafka", "confluent_kafka", "cassandra", "prometheus_client", "pydantic_settings",
)  # fmt: skip
INSTALL_KAFKA_EXTRA = "pip install 'streamcrawl[kafka]'"


def _service_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kafka-bootstrap", help="Kafka bootstrap servers (env STREAMCRAWL_KAFKA_BOOTSTRAP)"
    )
    p.add_argument("--topic-prefix", help="topic prefix (env STREAMCRAWL_TOPIC_PREFIX)")


def _cassandra_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cassandra-hosts", help="Cassandra contact points (env STREAMCRAWL_CASSANDRA_HOSTS)"
    )
    p.add_argument("--cassandra-keyspace", help="keyspace (env STREAMCRAWL_CASSANDRA_KEYSPACE)")


def add_kafka_commands(sub: Any) -> None:
    """Add the Kafka wiring's sub-commands to ``sub`` (the CLI's sub-parsers)."""
    _worker_command(sub)
    _render_worker_command(sub)
    _seed_command(sub)
    _pages_command(sub)
    _status_command(sub)
    _control_commands(sub)
    _recrawl_command(sub)
    _admin_command(sub)
    _warc_command(sub)


def _worker_command(sub: Any) -> None:
    """``worker``: a Faust worker of the Kafka wiring, its services and its web port."""
    worker = sub.add_parser("worker", help="run a Faust worker (Kafka wiring)")
    _service_flags(worker)
    _cassandra_flags(worker)
    worker.add_argument("--state-dir", help="RocksDB table state (env STREAMCRAWL_STATE_DIR)")
    worker.add_argument(
        "--web-port", type=int, help="health and /metrics port (env STREAMCRAWL_WEB_PORT)"
    )
    worker.add_argument(
        "--concurrency", type=int, help="fetches in flight (env STREAMCRAWL_CONCURRENCY)"
    )
    add_network_flags(worker)


def _render_worker_command(sub: Any) -> None:
    """``render-worker``: renders the pages fetch workers hand on (the ``render`` topic)."""
    worker = sub.add_parser(
        "render-worker", help="render the pages crawls ask to render (Kafka wiring, Chromium)"
    )
    _service_flags(worker)
    worker.add_argument(
        "--concurrency",
        type=int,
        help="pages rendered at once (env STREAMCRAWL_RENDER_CONCURRENCY, default 2)",
    )
    worker.add_argument(
        "--web-port",
        type=int,
        help="/healthz and /metrics port (env STREAMCRAWL_RENDER_WEB_PORT, default 6067)",
    )
    add_network_flags(worker)


def _seed_command(sub: Any) -> None:
    """``seed URL...``: publish a crawl spec (the policy flags) and its seed URLs."""
    seed = sub.add_parser("seed", help="publish a crawl spec and its seed URLs")
    seed.add_argument("urls", nargs="*", metavar="URL")
    _service_flags(seed)
    add_policy_flags(seed)
    # A policy flag of seed only: the embedded crawl writes every fetch to pages.jsonl.
    seed.add_argument(
        "--keep-versions",
        type=_policy_value("keep_versions", int, "a whole number"),
        default=0,
        metavar="N",
        help="Cassandra keeps the digest, status and fetch time of each page's N newest "
        "versions (table page_versions; default 0: the latest copy only)",
    )
    seed.add_argument(
        "--warc",
        action="store_true",
        help="archive the crawl: workers publish every fetch's HTTP exchanges on the captures "
        "topic, which `streamcrawl warc` writes to WARC files (docs/warc.md)",
    )


def _pages_command(sub: Any) -> None:
    """``pages``: the page stream as JSON lines."""
    pages = sub.add_parser("pages", help="print the page stream as JSON lines")
    _service_flags(pages)
    pages.add_argument("--crawl-id", help="only pages of this crawl")
    pages.add_argument("--follow", action="store_true", help="keep waiting for new pages")
    pages.add_argument("--from-beginning", action="store_true", help="start at the oldest page")
    pages.add_argument(
        "--changes",
        action="store_true",
        help="changes only: leave out the revisits that found a page unchanged",
    )


def _status_command(sub: Any) -> None:
    """``status``: counts per terminal state, rates and lags; ``--watch`` refreshes them."""
    status = sub.add_parser("status", help="counts per terminal state, rate, sink lag")
    _service_flags(status)  # the counts topic and the sink group's lag
    _cassandra_flags(status)  # --exact
    status.add_argument("--crawl-id", help="one crawl (default: all)")
    status.add_argument(
        "--json", action="store_true", help="one JSON object (--watch: one per line per refresh)"
    )
    status.add_argument(
        "--exact", action="store_true", help="count the state rows in Cassandra (reads them all)"
    )
    status.add_argument(
        "--watch",
        action="store_true",
        help="refresh until Ctrl-C: a live view on a terminal (rates, queue, partition owners "
        "and lags, slowest origins), else one line per refresh",
    )
    status.add_argument(
        "--interval",
        type=_seconds,
        metavar="SECONDS",
        help="--watch: seconds between refreshes (default 2)",
    )


def _control_commands(sub: Any) -> None:
    """``pause``, ``resume``, ``stop``: a control message for one crawl."""
    for verb in ("pause", "resume", "stop"):
        control = sub.add_parser(verb, help=f"{verb} a crawl")
        _service_flags(control)
        control.add_argument("--crawl-id", required=True)


def _recrawl_command(sub: Any) -> None:
    """``recrawl [URL...]``: a continuous crawl's URLs (all, or those given) due now."""
    recrawl = sub.add_parser(
        "recrawl", help="make a continuous crawl's URLs due now (all, or the URLs given)"
    )
    recrawl.add_argument("urls", nargs="*", metavar="URL")
    _service_flags(recrawl)
    recrawl.add_argument("--crawl-id", required=True)


def _admin_command(sub: Any) -> None:
    """``admin create-topics|create-schema|reshard``: setup, and a move to a new partition count."""
    admin = sub.add_parser(
        "admin", help="idempotent setup; reshard: move the crawls to another partition count"
    )
    admin.add_argument("action", choices=["create-topics", "create-schema", "reshard"])
    _service_flags(admin)
    _cassandra_flags(admin)
    admin.add_argument(
        "--partitions",
        type=int,
        help="partitions per topic (env STREAMCRAWL_PARTITIONS); reshard: the new count",
    )
    admin.add_argument(
        "--rollback",
        action="store_true",
        help="reshard: serve the previous generation again, or abandon a reshard under way",
    )
    admin.add_argument(
        "--delete-old",
        action="store_true",
        help="reshard: delete the topics of every generation but the one served",
    )
    admin.add_argument(
        "--replication-factor",
        type=int,
        help="topic replication (env STREAMCRAWL_REPLICATION_FACTOR)",
    )


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {text}")
    return value


def _warc_command(sub: Any) -> None:
    """``warc --out DIR``: the WARC writer; ``warc index DIR``: the CDXJ index of its files."""
    warc = sub.add_parser(
        "warc",
        help="write the captures of crawls seeded with --warc into WARC files "
        "(`warc index DIR`: their CDXJ index)",
    )
    warc.add_argument(
        "--out", type=Path, metavar="DIR", help="directory of the WARC files (required to write)"
    )
    warc.add_argument(
        "--warc-max-size",
        type=byte_size,
        default=WARC_MAX_SIZE,
        metavar="SIZE",
        help="start a new WARC file past SIZE (e.g. 500M; default 1G)",
    )
    warc.add_argument(
        "--prefix", default="streamcrawl", help="WARC file name prefix (default streamcrawl)"
    )
    _service_flags(warc)
    actions = warc.add_subparsers(dest="warc_action", metavar="index")
    index = actions.add_parser(
        "index", help="print the CDXJ index of the closed WARC files of DIR (duplicates dropped)"
    )
    index.add_argument("directory", type=Path, metavar="DIR")
    index.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write the index to FILE, not stdout"
    )


def missing_kafka_extra() -> str | None:
    """The first import name of ``KAFKA_EXTRA`` that is not installed; None: all are."""
    return next((name for name in KAFKA_EXTRA if not _installed(name)), None)


def _installed(name: str) -> bool:
    # Checked in sys.modules first: once imported, faust replaces its module with one that has
    # no __spec__, and find_spec raises on that.
    return name in sys.modules or importlib.util.find_spec(name) is not None


def run(args: argparse.Namespace) -> int:
    """Run the Kafka command ``args.command``; its exit code.

    Raises ConfigError (exit 2, one line: what to install) when the kafka extra is missing.
    """
    if args.command == "warc" and args.warc_action == "index":
        from streamcrawl.topology.cli.warc_index import cmd_index

        return cmd_index(args.directory, args.output)
    missing = missing_kafka_extra()
    if missing is not None:
        raise ConfigError(
            f"{args.command} needs the kafka extra ({missing} is not installed): "
            + INSTALL_KAFKA_EXTRA
        )
    from streamcrawl.topology.cli import kafka_commands

    handler: Callable[[argparse.Namespace], int] = getattr(
        kafka_commands, "cmd_" + args.command.replace("-", "_")
    )
    return handler(args)
