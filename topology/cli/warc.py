"""``streamcrawl warc --out DIR``: the Kafka wiring's WARC writer (``topology/archive``,
docs/warc.md, "Kafka wiring"); ``warc index`` is ``topology/cli/warc_index.py``."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

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
