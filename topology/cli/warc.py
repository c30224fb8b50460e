"""``streamcrawl warc``: the Kafka wiring's WARC writer (``topology/archive``), and the CDXJ
index of the files it closed (docs/warc.md, "Kafka wiring")."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.topology.settings import Settings

log = logging.getLogger(__name__)
_STOP = (signal.SIGTERM, signal.SIGINT)  # finish the batch in hand, close the file, exit 0


def cmd_write(args: argparse.Namespace, settings: Settings) -> int:
    """``warc --out DIR``: write until SIGTERM or SIGINT, then close the file and exit 0.

    Logs at ``--log-level``, else ``STREAMCRAWL_LOG_LEVEL`` (INFO), like the worker. Raises
    ``ConfigError`` without ``--out``, ``CrawlError`` (one line) when Kafka cannot be used or
    the files cannot be written (the ``.open`` file is then left to ``recover``).
    """
    from streamcrawl.topology.archive.writer import open_writer

    if args.out is None:
        raise ConfigError("warc needs --out DIR to write (or `streamcrawl warc index DIR`)")
    logging.getLogger("streamcrawl").setLevel(args.log_level or settings.log_level)
    stop = threading.Event()
    before = {sig: signal.signal(sig, lambda _sig, _frame: stop.set()) for sig in _STOP}
    try:
        writer = open_writer(
            settings,
            args.out,
            prefix=args.prefix,
            max_size=args.warc_max_size,
            info={
                "description": f"captures of crawls seeded with --warc ({settings.topic_prefix})"
            },
        )
        totals = writer.run(stop)
    except OSError as exc:  # a full disk, a volume gone: the .open file is recovered next start
        raise CrawlError(f"cannot write WARC files in {args.out}: {exc}") from None
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    log.info(
        "stopped: %d captures written in %d batches, %d messages skipped",
        totals.captures,
        totals.batches,
        totals.skipped,
    )
    return 0


def cmd_index(directory: Path, output: Path | None) -> int:
    """``warc index DIR [-o FILE]``: the CDXJ lines of DIR's closed files (``*.warc.gz``, not
    the ``.open`` one a writer is filling), each record once; to FILE (replaced whole) or
    stdout. Raises ``ConfigError`` if DIR is not a directory."""
    from streamcrawl.agents.sinks.warc.index import cdxj_lines

    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory")
    lines = cdxj_lines(sorted(directory.glob("*.warc.gz")))
    text = "".join(line + "\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
        return 0
    partial = output.with_name(output.name + ".partial")
    partial.write_text(text, "utf-8")
    os.replace(partial, output)
    return 0
