"""``admin reshard --partitions N | --rollback | --delete-old`` (``topology/admin/reshard/``)."""

from __future__ import annotations

import argparse

from streamcrawl.agents.errors import ConfigError
from streamcrawl.topology.admin.reshard import run
from streamcrawl.topology.settings import Settings


def cmd_reshard(args: argparse.Namespace, settings: Settings) -> int:
    """Exactly one of ``--partitions N``, ``--rollback``, ``--delete-old``; prints one line per
    step, or one line and exit 0 when the topics served have N partitions already and no
    reshard is under way (a rerun). Bad input raises ConfigError (exit 2); a state that forbids
    the run now (no topics, workers running, another reshard holding the lock) CrawlError
    (exit 1)."""
    chosen = [args.partitions is not None, args.rollback, args.delete_old]
    if sum(chosen) != 1:
        raise ConfigError(
            "admin reshard needs exactly one of --partitions N, --rollback, --delete-old"
        )
    if args.rollback:
        run.rollback(settings, say)
    elif args.delete_old:
        run.delete_old(settings, say)
    else:
        run.reshard(settings, settings.partitions, say)
    return 0


def say(line: str) -> None:
    print(line, flush=True)  # as each step ends, also into a pipe
