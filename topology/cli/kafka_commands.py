"""Handlers of the Kafka-wiring sub-commands declared in ``topology.cli.kafka_args``.

``commands.run`` calls ``cmd_<command>(args)``; each returns the exit code. Settings come from
the flags (``None`` = not given) and then the ``STREAMCRAWL_*`` environment. A bad setting raises
``ConfigError`` (exit 2, one line); an unreachable Kafka or Cassandra raises ``CrawlError`` whose
message says what to check (exit 1).

Sections: admin, status, pages, pause/resume/stop; ``worker``, ``seed`` and ``warc``
(``topology/cli/warc.py``) follow at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import uuid
from typing import Any

import msgspec

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.agents.sinks.contract import CrawlStats
from streamcrawl.schemas.records import CrawlRunState, Page
from streamcrawl.topology.admin import generation
from streamcrawl.topology.admin import status as kafka_status
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.cli.options import policy_from_args
from streamcrawl.topology.settings import Settings, load_settings

log = logging.getLogger(__name__)


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    """Settings from the flags this sub-command has (absent or ``None`` flags are ignored)."""
    names = (
        "kafka_bootstrap",
        "topic_prefix",
        "cassandra_hosts",
        "cassandra_keyspace",
        "partitions",
        "replication_factor",
    )
    flags = {name: getattr(args, name, None) for name in names}
    return load_settings(**flags, **extra)


# --- admin -----------------------------------------------------------------------------------


def cmd_admin(args: argparse.Namespace) -> int:
    """``admin create-topics|create-schema``: idempotent setup; prints one line per action, and
    one line on stderr per unsafe replication or consistency setting (``admin.safety``,
    ``agents.sinks.cassandra.replication``). ``create-topics`` makes the topics of the
    generation served (``admin.generation``). ``admin reshard``: ``topology/cli/reshard.py``."""
    if args.action != "reshard" and (args.rollback or args.delete_old):
        raise ConfigError("--rollback and --delete-old go with `admin reshard` only")
    settings = _settings(args)
    if args.action == "reshard":
        from streamcrawl.topology.cli.reshard import cmd_reshard

        return cmd_reshard(args, settings)
    if args.action == "create-topics":
        settings = generation.resolve(settings, strict=True)
        for line in admin.create_topics(settings, warn=_warn):
            print(line)
    else:
        from streamcrawl.agents.sinks.cassandra.driver import create_schema, quiet_driver_logs
        from streamcrawl.agents.sinks.cassandra.replication import check_ring

        quiet_driver_logs()
        config = settings.cassandra_config()
        for statement in create_schema(config, check=check_ring(config, _warn)):
            print(" ".join(statement.split()) + ";")
    return 0


def _warn(line: str) -> None:
    print(f"streamcrawl: warning: {line}", file=sys.stderr)


# --- status ----------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    """``status [--crawl-id ID] [--json] [--exact] [--watch [--interval S]]``: counts per
    terminal state.

    From the frontier agents' per-partition counts on ``<prefix>.counts`` (one message per
    partition, ``topology/admin/status.py``), with the sink's lag; ``--exact`` counts the
    state rows in Cassandra instead (reads every row of the crawl). With ``--json`` prints ONE
    object ``{"crawl_id", "states", "pages_per_s", "source", ...}`` where ``states`` has every
    terminal state (0 when none) and ``source`` is ``counts`` (then also ``sink_lag``: messages
    the sink has not written yet, null before its first commit) or ``cassandra``. Without
    ``--crawl-id`` the object sums all crawls (``crawl_id`` null) and adds
    ``"crawls": {id: {"states", "pages_per_s"}}``. A crawl with errors of its own (a plugin a
    worker lacks) also has ``"errors": {error: URLs failed with it}``.

    ``--watch`` refreshes every ``--interval`` seconds (default 2) until Ctrl-C or SIGTERM
    (exit 0), ``topology/cli/watch.py``; not with ``--exact``, which would scan Cassandra
    each time.
    """
    settings = _settings(args)
    if args.watch:
        return _watch(settings, args)
    if args.interval is not None:
        raise ConfigError("--interval applies to --watch only")
    settings = generation.resolve(settings)  # the counts of the generation served
    report = _status_report(settings, args.crawl_id, exact=args.exact)
    if args.json:
        print(json.dumps(report, sort_keys=False))
    else:
        _print_status(report)
    return 0


def _watch(settings: Settings, args: argparse.Namespace) -> int:
    from streamcrawl.topology.cli import watch

    if args.exact:
        raise ConfigError("--watch reads the counts topic: it cannot be combined with --exact")
    settings = generation.resolve(settings)
    interval = args.interval if args.interval is not None else watch.INTERVAL_S
    with (
        watch.until_stopped(),  # Ctrl-C or SIGTERM, from the first connection on: exit 0
        kafka_status.StatusReader(settings, timeout=watch.REQUEST_TIMEOUT_S) as reader,
    ):
        reader.connect()
        watch.run(lambda: reader.read(with_workers=True), args.crawl_id, interval, args.json)
    return 0


def _status_report(settings: Settings, crawl_id: str | None, *, exact: bool) -> dict[str, Any]:
    if exact:
        from streamcrawl.agents.sinks.cassandra.driver import quiet_driver_logs

        quiet_driver_logs()
        stats = asyncio.run(_cassandra_stats(settings, crawl_id))
        return kafka_status.report(stats, crawl_id, source="cassandra")
    snapshot = kafka_status.read_status(settings)
    return kafka_status.report(
        snapshot.stats,
        crawl_id,
        revisited=snapshot.revisits,
        errors=snapshot.errors,
        source="counts",
        sink_lag=snapshot.sink_lag,
    )


async def _cassandra_stats(settings: Settings, crawl_id: str | None) -> dict[str, CrawlStats]:
    from streamcrawl.agents.sinks.cassandra.sink import CassandraSink

    sink = CassandraSink(settings.cassandra_config())
    await sink.start()
    try:
        return await sink.stats(crawl_id)
    finally:
        await sink.stop()


def _print_status(report: dict[str, Any]) -> None:
    crawls = report.get("crawls")
    if crawls is None:
        crawls = {report["crawl_id"]: report}
    if not crawls:
        print("no crawls recorded yet")
        return
    lag = report.get("sink_lag")
    if report.get("source") == "counts":
        print("sink lag: " + ("not started" if lag is None else f"{lag} messages"))
    for crawl_id, crawl in crawls.items():
        rate = crawl["pages_per_s"]
        print(f"crawl {crawl_id}" + (f"  ({rate:.2f} pages/s)" if rate is not None else ""))
        for state, n in crawl["states"].items():
            print(f"  {state:<22}{n:>10}")
        print(f"  {'total':<22}{sum(crawl['states'].values()):>10}")
        r = crawl.get("revisits")
        if r is not None:
            print("  " + _revisit_line(r))
        for error, n in crawl.get("errors", {}).items():
            print(f"  error: {error} ({n} failed)")


def _revisit_line(r: dict[str, Any]) -> str:
    """One line of a continuous crawl's revisits (``topology.admin.status.revisits``)."""
    import time

    line = f"revisits: {r['fetched']} done"
    if r["per_s"] is not None:
        line += f" ({r['per_s']:.2f}/s)"
    if r["changed_share"] is not None:
        line += f", {r['changed_share']:.0%} found a change"
    line += f"; {r['waiting']} waiting, {r['due_now']} due now, {r['due_next_hour']} next hour"
    if r["oldest_due_at"] is not None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["oldest_due_at"]))
        line += f"; oldest due since {since}"
    return line


# --- pages -----------------------------------------------------------------------------------


def cmd_pages(args: argparse.Namespace) -> int:
    """``pages [--crawl-id ID] [--follow] [--from-beginning] [--changes]``: the page stream as
    JSON lines.

    One line per page: the value as published, minus ``"body": null`` (a body is printed only
    when the page has one). Starts at the oldest page with ``--from-beginning``, else at the
    end. Stops once caught up with the end of every partition, unless ``--follow``. Uses a
    throwaway consumer group and never commits, so it cannot disturb the workers
    (``topology/admin/pages.py``).
    """
    from streamcrawl.topology.admin.pages import read_pages

    pages = read_pages(
        _settings(args),
        args.crawl_id,
        from_beginning=args.from_beginning,
        follow=args.follow,
        changes=getattr(args, "changes", False),
        skipped=_skipped,
    )
    try:
        for page, value in pages:
            sys.stdout.write(_page_line(page, value) + "\n")
            if args.follow:
                sys.stdout.flush()
    except BrokenPipeError:  # `streamcrawl pages | head`
        sys.stderr.close()
    finally:
        pages.close()
    return 0


def _skipped(offset: int | None, exc: Exception) -> None:
    print(f"streamcrawl: skipping pages message at offset {offset}: {exc}", file=sys.stderr)


def _page_line(page: Page, value: bytes) -> str:
    """The JSON line printed for a page: its value as published if it has a body, else its
    fields without ``body``."""
    if page.body is not None:
        return bytes(value).decode("utf-8")
    fields = msgspec.structs.asdict(page)
    del fields["body"]
    return msgspec.json.encode(fields).decode("utf-8")


# --- pause / resume / stop -------------------------------------------------------------------


def cmd_pause(args: argparse.Namespace) -> int:
    """``pause --crawl-id ID``: workers stop starting fetches for the crawl."""
    return _set_run_state(args, "paused")


def cmd_resume(args: argparse.Namespace) -> int:
    """``resume --crawl-id ID``: a paused crawl continues."""
    return _set_run_state(args, "running")


def cmd_stop(args: argparse.Namespace) -> int:
    """``stop --crawl-id ID``: the crawl ends; its waiting URLs are cancelled by the workers."""
    return _set_run_state(args, "stopped")


def _set_run_state(args: argparse.Namespace, state: CrawlRunState) -> int:
    """Re-publish the crawl's latest policy on ``control`` with ``state``.

    Raises CrawlError if the crawl id has no policy on the control topic.
    """
    settings = _settings(args)
    policies = admin.read_control(settings)
    policy = policies.get(args.crawl_id)
    if policy is None:
        known = ", ".join(sorted(policies)) or "none"
        raise CrawlError(
            f"unknown crawl {args.crawl_id!r} on {admin.topic_name(settings, 'control')} "
            f"(known: {known}); start it with `streamcrawl seed URL --crawl-id ID`"
        )
    if policy.state == "stopped" and state != "stopped":
        raise CrawlError(f"crawl {args.crawl_id!r} is stopped; a stopped crawl cannot {state}")
    if policy.state != state:
        admin.publish_control(settings, msgspec.structs.replace(policy, state=state))
    print(f"crawl {args.crawl_id}: {state}" + (" (unchanged)" if policy.state == state else ""))
    return 0


def cmd_recrawl(args: argparse.Namespace) -> int:
    """``recrawl --crawl-id ID [URL...]``: make a continuous crawl's URLs due now.

    Without URLs, every URL the crawl fetched before now (its spec's ``recrawl_at``,
    re-published on ``control``); with URLs, those (a frontier batch that lists each with a
    ``lastmod`` of now, which makes a URL waiting for its revisit due at once; a URL the crawl
    has not seen is admitted as a seed). Raises CrawlError for an unknown, stopped or one-shot
    crawl.
    """
    import time
    from datetime import UTC, datetime

    from streamcrawl.agents.policy.rules import CrawlRules
    from streamcrawl.schemas.codec import encode
    from streamcrawl.schemas.records import FrontierBatch, UrlRef

    settings = _settings(args)
    policy = admin.read_control(settings).get(args.crawl_id)
    if policy is None:
        raise CrawlError(f"unknown crawl {args.crawl_id!r}: start it with `streamcrawl seed`")
    if policy.recrawl_after is None:
        raise CrawlError(
            f"crawl {args.crawl_id!r} fetches each URL once: seed it with --recrawl-after"
        )
    if policy.state == "stopped":
        raise CrawlError(f"crawl {args.crawl_id!r} is stopped")
    now = time.time()
    if not args.urls:
        admin.publish_control(settings, msgspec.structs.replace(policy, recrawl_at=now))
        print(f"crawl {args.crawl_id}: every URL fetched before now is due")
        return 0
    rules = CrawlRules.from_policy(policy)
    lastmod = datetime.fromtimestamp(now, UTC).isoformat()
    by_origin: dict[str, list[UrlRef]] = {}
    for url in args.urls:
        canon = rules.canonicalizer.canonicalize(url)
        by_origin.setdefault(canon.origin, []).append(UrlRef(canon.url, 0, lastmod=lastmod))
    batches = (
        FrontierBatch(crawl_id=policy.crawl_id, origin=origin, urls=tuple(refs))
        for origin, refs in by_origin.items()
    )
    settings = generation.resolve(settings)  # the frontier of the generation served
    admin.publish(settings, "frontier", ((b.origin.encode(), encode(b)) for b in batches), "urls")
    print(f"crawl {args.crawl_id}: {len(args.urls)} URLs due")
    return 0


# --- worker and seed (appended below) --------------------------------------------------------


def _network(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a worker's requests take from its flags: the networks the SSRF guard
    allows, the proxy and its credential, the credentials' directory; and the log level."""
    return {
        "allow_networks": ",".join(getattr(args, "allow_network", [])) or None,
        "log_level": getattr(args, "log_level", None),
        "proxy": getattr(args, "proxy", None),
        "no_proxy_for": ",".join(getattr(args, "no_proxy_for", [])) or None,
        "proxy_credential": getattr(args, "proxy_credential", None),
        "credentials_dir": getattr(args, "credentials_dir", None),
    }


def cmd_worker(args: argparse.Namespace) -> int:
    """``worker``: run a Faust worker until SIGTERM/SIGINT (then: stop dispatching, give
    in-flight requests a bounded grace, flush, commit, exit 0)."""
    from streamcrawl.topology.worker import run

    settings = _settings(
        args,
        state_dir=getattr(args, "state_dir", None),
        web_port=getattr(args, "web_port", None),
        concurrency=getattr(args, "concurrency", None),
        **_network(args),
    )
    run.run(settings)
    return 0  # not reached: the worker exits the process itself


def cmd_render_worker(args: argparse.Namespace) -> int:
    """``render-worker``: render the pages of the ``render`` topic until SIGTERM/SIGINT (then:
    finish or leave the requests in hand uncommitted, stop the browser, exit 0)."""
    from streamcrawl.agents.render.browser import check_render
    from streamcrawl.topology.worker import render

    settings = _settings(
        args,
        render_concurrency=getattr(args, "concurrency", None),
        render_web_port=getattr(args, "web_port", None),
        **_network(args),
    )
    check_render()
    render.run(settings)
    return 0


def cmd_seed(args: argparse.Namespace) -> int:
    """``seed URL... [--crawl-id ID] [policy flags]``: publish the crawl spec on ``control``,
    then ONE frontier batch per seed origin (keyed by origin, murmur2 like the workers).

    The ``seed_*`` settings (``STREAMCRAWL_SEED_*``, the chart's ``seedDefaults``) fill the revisit
    fields, ``keep_versions`` and ``warc`` the command line left at their default: a flag wins; the
    revisit bounds and mode apply only to a crawl that revisits. Prints the crawl id (generated when
    not given). Raises ConfigError for a policy that does not hold, defaults included, and
    CrawlError if Kafka is unreachable or refuses a message.
    """
    from streamcrawl.agents.content.listings import plan_seeds
    from streamcrawl.agents.errors import ConfigError
    from streamcrawl.agents.policy.rules import CrawlRules
    from streamcrawl.schemas.codec import encode
    from streamcrawl.schemas.records import CrawlPolicy

    settings = _settings(args)
    crawl_id = args.crawl_id or "crawl-" + uuid.uuid4().hex[:8]
    # Each policy flag defaults to the record's own default, so a field still at it was not
    # given (nor told apart from a flag repeating the default, e.g. --keep-versions 0).
    record = {f.name: f.default for f in msgspec.structs.fields(CrawlPolicy)}
    chosen = {k: v for k, v in settings.seed_policy().items() if getattr(args, k) == record[k]}
    if chosen.get("recrawl_after", args.recrawl_after) is None:  # fetched once: no revisits
        chosen = {k: v for k, v in chosen.items() if not k.startswith("recrawl_")}
    args = argparse.Namespace(**(vars(args) | chosen))
    try:
        policy = policy_from_args(args, args.urls, crawl_id)
    except ConfigError as exc:
        if not chosen:
            raise
        applied = ", ".join(f"STREAMCRAWL_SEED_{k.upper()}" for k in chosen)
        raise ConfigError(
            f"{exc} (seed defaults applied: {applied}; a flag overrides each)"
        ) from None
    # seed's own policy flags (topology/cli/kafka_args.py), bounded by their argparse types
    policy = msgspec.structs.replace(policy, keep_versions=args.keep_versions, warc=args.warc)
    admin.publish_control(settings, policy)  # the spec first: workers wait for it, bounded
    batches = plan_seeds(CrawlRules.from_policy(policy))
    settings = generation.resolve(settings)  # the frontier of the generation served
    admin.publish(settings, "frontier", ((b.origin.encode(), encode(b)) for b in batches), "seeds")
    print(crawl_id)
    return 0


def cmd_warc(args: argparse.Namespace) -> int:
    """``warc --out DIR``: write ``captures`` into WARC files until SIGTERM/SIGINT (exit 0),
    ``topology/cli/warc.py``. ``kafka_args.run`` runs ``warc index`` itself: it needs no Kafka."""
    from streamcrawl.topology.cli import warc

    return warc.cmd_write(args, _settings(args))
