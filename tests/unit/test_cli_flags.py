"""Every CLI flag has an effect: given, it changes what its command hands to the component that
does the work (the crawl policy, the embedded runner, the settings, the Kafka consumer). A flag
nothing reads is a lie to users, so a flag without a case here fails ``test_every_flag_has_a_case``.

Each command runs up to the hand-over, which is recorded instead of performed (no Kafka, no
Cassandra, no HTTP).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from streamcrawl.agents.render import browser
from streamcrawl.agents.sinks.warc import index as warc_index
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import (
    CookiePreset,
    CrawlPolicy,
    Extractor,
    OriginAuth,
    RequestHeader,
)
from streamcrawl.topology.admin import generation
from streamcrawl.topology.admin import status as status_module
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.archive import writer as archive_writer
from streamcrawl.topology.cli import crawl as crawl_command
from streamcrawl.topology.cli import demo, kafka_commands
from streamcrawl.topology.cli import main as cli
from streamcrawl.topology.cli import watch as watch_module
from streamcrawl.topology.worker import app as app_module
from streamcrawl.topology.worker import render as render_worker
from streamcrawl.topology.worker import run as worker_run
from tests.unit.test_kafka_messages import page

URL = "http://127.0.0.1:9/"
POLICY_COMMANDS = ("crawl", "seed")


class Handed(Exception):
    """Raised where a command hands its inputs over: the test has what it needs."""


def flags() -> set[tuple[str, str]]:
    """(command, option) of every optional flag of the parser ("" is the top level)."""
    out: set[tuple[str, str]] = set()

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, name)
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                out.add((command, action.option_strings[0]))

    walk(cli.build_parser(), "")
    return out


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Any]:
    """``run(*argv)``: what the command handed over, as a dict."""

    def go(*argv: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def embedded(policy: CrawlPolicy, **kwargs: Any) -> dict[str, object]:
            seen.update(kwargs, policy=policy)
            return {"interrupted": False, "states": {}}

        real_load = kafka_commands.load_settings

        def load_settings(**overrides: Any) -> Any:
            seen["settings"] = settings = real_load(**overrides)
            return settings

        def publish_control(settings: Any, policy: CrawlPolicy) -> None:
            seen["policy"] = policy
            raise Handed

        class Worker:
            def execute_from_commandline(self) -> None:
                return None

        def make_worker(app: Any, loglevel: str) -> Worker:
            seen["loglevel"] = loglevel
            return Worker()

        def status_report(settings: Any, crawl_id: str | None, *, exact: bool) -> dict[str, Any]:
            seen["crawl_id"], seen["exact"] = crawl_id, exact
            return {"crawl_id": crawl_id, "states": {}, "pages_per_s": None}

        def watch(read: Any, crawl_id: str | None, interval: float, as_json: bool) -> None:
            seen["watch"] = {"crawl_id": crawl_id, "interval": interval, "json": as_json}
            raise Handed

        @contextlib.contextmanager
        def demo_site() -> Iterator[list[str]]:
            yield ["http://127.0.0.1:9"]

        class Consumer:
            def __init__(self, conf: dict[str, Any]) -> None:
                seen["consumer"] = conf

            def close(self) -> None:
                return None

        def assign_all(consumer: Any, settings: Any, errors: Any, name: str, start: int) -> int:
            seen["start"] = start
            return 1

        class Message:
            def __init__(self, value: bytes) -> None:
                self._value = value

            def value(self) -> bytes:
                return self._value

            def offset(self) -> int:
                return 0

        def consume_to_end(consumer: Any, partitions: int, *, follow: bool = False) -> Any:
            seen["follow"] = follow
            yield Message(encode(page()))  # a page of crawl "c"
            yield Message(encode(msgspec.structs.replace(page(), change="unchanged")))

        def open_writer(settings: Any, out: Path, **kwargs: Any) -> None:
            seen.update(kwargs, out=out)
            raise Handed

        def cdxj_lines(paths: Any) -> list[str]:
            return ["test,a)/ 20260101000000 {}"]

        monkeypatch.setattr(archive_writer, "open_writer", open_writer)
        monkeypatch.setattr(warc_index, "cdxj_lines", cdxj_lines)
        monkeypatch.setattr(crawl_command, "run_embedded", embedded)
        monkeypatch.setattr(demo, "run_embedded", embedded)
        monkeypatch.setattr(demo, "serve_demo_site", demo_site)
        monkeypatch.setattr(kafka_commands, "load_settings", load_settings)
        monkeypatch.setattr(worker_run, "make_worker", make_worker)
        monkeypatch.setattr(render_worker, "run", lambda settings: None)
        monkeypatch.setattr(browser, "check_render", lambda chromium=None: None)
        monkeypatch.setattr(worker_run, "check_services", lambda settings: None)
        monkeypatch.setattr(generation, "resolve", lambda settings, strict=False: settings)
        monkeypatch.setattr(app_module, "create_app", lambda settings, **kwargs: None)
        monkeypatch.setenv("STREAMCRAWL_CREDENTIAL_SITE", "bearer:t")  # --auth-for's
        monkeypatch.setenv("STREAMCRAWL_CREDENTIAL_PX", "basic:u:p")  # --proxy-credential's
        monkeypatch.setattr(admin, "publish_control", publish_control)
        monkeypatch.setattr(admin, "assign_all", assign_all)
        monkeypatch.setattr(admin, "consume_to_end", consume_to_end)
        monkeypatch.setattr(admin, "create_topics", lambda settings, warn: [])
        monkeypatch.setattr(admin, "read_control", lambda settings: {})  # no crawl is known
        monkeypatch.setattr(kafka_commands, "_status_report", status_report)
        monkeypatch.setattr(status_module.StatusReader, "connect", lambda self: None)
        monkeypatch.setattr(watch_module, "run", watch)
        monkeypatch.setattr(admin, "Consumer", Consumer)
        monkeypatch.setattr(logging, "basicConfig", lambda **kw: seen.update(logging=kw))
        monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # as on a terminal
        with contextlib.suppress(Handed):
            cli.main(argv)
        seen["stdout"], seen["stderr"] = capsys.readouterr()
        return seen

    return go


BASE = {
    "crawl": ["crawl", URL],
    "demo": ["demo"],
    "worker": ["worker"],
    "render-worker": ["render-worker"],
    "seed": ["seed", URL],
    "pages": ["pages"],
    "status": ["status"],
    "pause": ["pause", "--crawl-id", "c"],
    "resume": ["resume", "--crawl-id", "c"],
    "stop": ["stop", "--crawl-id", "c"],
    "recrawl": ["recrawl", "--crawl-id", "c"],
    "admin": ["admin", "create-topics"],
    "warc": ["warc", "--out", "/x/warc"],
    "index": ["warc", "index", tempfile.gettempdir()],
    "test": ["plugin", "test", "nope", "page.html"],  # `plugin test`
}
INDEX_FILE = Path(tempfile.gettempdir()) / "streamcrawl-test-flags.cdxj"


def policy(field: str) -> Callable[[dict[str, Any]], Any]:
    return lambda seen: getattr(seen["policy"], field)


def setting(field: str) -> Callable[[dict[str, Any]], Any]:
    return lambda seen: getattr(seen["settings"], field)


# A policy flag: (its arguments, what it changes in the policy, the expected value).
POLICY_FLAGS: dict[str, tuple[list[str], Callable[[dict[str, Any]], Any], Any]] = {
    "--crawl-id": (["--crawl-id", "c7"], policy("crawl_id"), "c7"),
    "--max-pages": (["--max-pages", "7"], policy("max_pages"), 7),
    "--max-depth": (["--max-depth", "3"], policy("max_depth"), 3),
    "--delay": (["--delay", "2.5"], policy("delay"), 2.5),
    "--per-origin-concurrency": (
        ["--per-origin-concurrency", "3"],
        policy("per_origin_concurrency"),
        3,
    ),
    "--allow-host": (["--allow-host", "B.test"], policy("allow_hosts"), ("b.test",)),
    "--allow-domain": (["--allow-domain", "c.test"], policy("allow_domains"), ("c.test",)),
    "--include": (["--include", "/docs/"], policy("include"), ("/docs/",)),
    "--exclude": (["--exclude", "/tmp/"], policy("exclude"), ("/tmp/",)),
    "--user-agent": (["--user-agent", "bot/2"], policy("user_agent"), "bot/2"),
    "--ignore-robots": (["--ignore-robots"], policy("obey_robots"), False),
    "--ignore-nofollow": (["--ignore-nofollow"], policy("honor_nofollow"), False),
    "--max-crawl-delay": (["--max-crawl-delay", "5"], policy("max_crawl_delay"), 5.0),
    "--max-body": (["--max-body", "1000"], policy("max_body"), 1000),
    "--timeout": (
        ["--timeout", "5"],
        lambda seen: (seen["policy"].timeout, seen["policy"].connect_timeout),
        (5.0, 5.0),
    ),
    "--retries": (["--retries", "0"], policy("retries"), 0),
    "--max-page-links": (["--max-page-links", "5"], policy("max_page_links"), 5),
    "--keep-query-order": (["--keep-query-order"], policy("sort_query"), False),
    "--fold-trailing-slash": (["--fold-trailing-slash"], policy("fold_trailing_slash"), True),
    "--store-bodies": (["--store-bodies"], policy("store_bodies"), True),
    "--no-bodies": (["--no-bodies"], policy("stream_bodies"), False),
    "--follow-canonical": (["--follow-canonical"], policy("follow_canonical"), True),
    "--sitemap": (
        ["--sitemap", "http://127.0.0.1:9/s.xml"],
        policy("sitemap_seeds"),
        ("http://127.0.0.1:9/s.xml",),
    ),
    "--no-sitemaps": (["--no-sitemaps"], policy("sitemaps"), False),
    "--no-feeds": (["--no-feeds"], policy("feeds"), False),
    "--recrawl-after": (["--recrawl-after", "2h"], policy("recrawl_after"), 7200.0),
    "--recrawl-min": (
        ["--recrawl-after", "2h", "--recrawl-min", "15m"],
        policy("recrawl_min"),
        900.0,
    ),
    "--recrawl-max": (
        ["--recrawl-after", "2h", "--recrawl-max", "1w"],
        policy("recrawl_max"),
        604800.0,
    ),
    "--recrawl-feed-min": (
        ["--recrawl-after", "2h", "--recrawl-feed-min", "90s"],
        policy("recrawl_feed_min"),
        90.0,
    ),
    "--recrawl-mode": (
        ["--recrawl-after", "1d", "--recrawl-mode", "fixed"],
        policy("recrawl_mode"),
        "fixed",
    ),
    "--recrawl-jitter": (["--recrawl-jitter", "0.25"], policy("recrawl_jitter"), 0.25),
    "--max-fetches-per-hour": (
        ["--max-fetches-per-hour", "600"],
        policy("max_fetches_per_hour"),
        600,
    ),
    "--header": (
        ["--header", "X-A: 1"],
        policy("headers"),
        (RequestHeader(name="X-A", value="1"),),
    ),
    "--header-for": (
        ["--header-for", "HTTP://127.0.0.1:9", "X-B:  2 "],
        policy("headers"),
        (RequestHeader(name="X-B", value="2", origin="http://127.0.0.1:9"),),
    ),
    "--cookies": (["--cookies"], policy("cookies"), True),
    "--cookie-for": (
        ["--cookie-for", "http://127.0.0.1:9", "sid=1"],
        lambda seen: (seen["policy"].cookie_presets, seen["policy"].cookies),
        ((CookiePreset(origin="http://127.0.0.1:9", cookie="sid=1"),), True),
    ),
    "--auth-for": (
        ["--auth-for", "http://127.0.0.1:9", "SITE"],
        policy("auth"),
        (OriginAuth(origin="http://127.0.0.1:9", credential="SITE"),),
    ),
    "--warc-credentials": (["--warc-credentials", "keep"], policy("warc_credentials"), "keep"),
    "--text": (["--text"], policy("main_text"), True),
    "--assets": (["--assets", "images,css"], policy("assets"), ("css", "images")),
    "--max-assets": (["--max-assets", "7"], policy("max_assets"), 7),
    "--asset-hosts": (["--asset-hosts", "same"], policy("asset_hosts"), ()),
    "--render": (["--render", "auto"], policy("render"), "auto"),
    "--render-include": (["--render-include", "/app/"], policy("render_include"), ("/app/",)),
    "--extract": (
        ["--extract", "tags=all:a.tag::attr(href)"],
        policy("extract"),
        (Extractor(name="tags", selector="a.tag::attr(href)", all=True),),
    ),
    # No plugin is installed here: the crawl's rules look it up (tests/unit/test_plugins.py
    # has a crawl with plugins).
    "--plugin": (["--plugin", "nope"], lambda seen: "plugin nope is not" in seen["stderr"], True),
}

PROXY = ["--proxy", "http://127.0.0.1:3128"]
CREDENTIALS_DIR = Path(tempfile.mkdtemp(prefix="streamcrawl-test-flags-"))
(CREDENTIALS_DIR / "FILED").write_text("bearer:from-a-file\n")


def network(seen: dict[str, Any]) -> Any:
    return seen["network"]


def proxy(seen: dict[str, Any]) -> Any:
    return seen["network"].proxy


SERVICE_FLAGS: dict[str, tuple[list[str], Callable[[dict[str, Any]], Any], Any]] = {
    "--kafka-bootstrap": (
        ["--kafka-bootstrap", "10.0.0.9:9092"],
        setting("kafka_bootstrap"),
        "10.0.0.9:9092",
    ),
    "--topic-prefix": (["--topic-prefix", "other"], setting("topic_prefix"), "other"),
    "--cassandra-hosts": (
        ["--cassandra-hosts", "10.0.0.8"],
        setting("cassandra_hosts"),
        "10.0.0.8",
    ),
    "--cassandra-keyspace": (["--cassandra-keyspace", "ks7"], setting("cassandra_keyspace"), "ks7"),
}

CASES: dict[tuple[str, str], tuple[list[str], Callable[[dict[str, Any]], Any], Any]] = {
    ("", "--log-level"): (  # the worker's; the other commands': test_log_level_*
        ["--log-level", "DEBUG"],
        lambda seen: seen["loglevel"],
        "DEBUG",
    ),
    ("crawl", "--out"): (["--out", "/x/out"], lambda seen: seen["out"], Path("/x/out")),
    ("crawl", "--state-dir"): (
        ["--state-dir", "/x/s"],
        lambda seen: seen["state_dir"],
        Path("/x/s"),
    ),
    ("crawl", "--concurrency"): (["--concurrency", "3"], lambda seen: seen["concurrency"], 3),
    ("crawl", "--recrawl-now"): (
        ["--recrawl-after", "1d", "--recrawl-now"],
        lambda seen: seen["policy"].recrawl_at > 1.7e9,
        True,
    ),
    ("crawl", "--warc"): (
        ["--warc", "/x/warc"],
        lambda seen: (seen["warc"], seen["policy"].warc),
        (Path("/x/warc"), True),
    ),
    ("crawl", "--save-to"): (
        ["--save-to", "/x/copy"],
        lambda seen: seen["save_to"],
        Path("/x/copy"),
    ),
    ("crawl", "--warc-max-size"): (
        ["--warc-max-size", "5M"],
        lambda seen: seen["warc_max_size"],
        5 << 20,
    ),
    ("crawl", "--json"): (["--json"], lambda seen: seen["as_json"], True),
    ("crawl", "--no-progress"): (["--no-progress"], lambda seen: seen["progress"], False),
    ("crawl", "--allow-network"): (
        ["--allow-network", "10.1.0.0/16"],
        lambda seen: network(seen).guard.allow,
        (ipaddress.ip_network("10.1.0.0/16"),),
    ),
    ("crawl", "--proxy"): (PROXY, lambda seen: proxy(seen) and proxy(seen).url, PROXY[1]),
    ("crawl", "--no-proxy-for"): (
        [*PROXY, "--no-proxy-for", "A.test"],
        lambda seen: proxy(seen) and proxy(seen).route("http://x.a.test/") is None,
        True,
    ),
    ("crawl", "--proxy-credential"): (
        [*PROXY, "--proxy-credential", "PX"],
        lambda seen: proxy(seen) and proxy(seen).auth.encode(),
        "Basic dTpw",
    ),
    ("crawl", "--credentials-dir"): (
        ["--credentials-dir", str(CREDENTIALS_DIR)],
        lambda seen: network(seen).credentials.get("FILED") is not None,
        True,
    ),
    ("demo", "--out"): (
        ["--out", "/x/demo"],
        lambda seen: (seen["out"], str(Path("/x/demo") / "pages.jsonl") in seen["stdout"]),
        (Path("/x/demo"), True),
    ),
    ("demo", "--json"): (
        ["--json"],
        lambda seen: (seen["as_json"], "pages:" in seen["stdout"]),
        (True, False),
    ),
    ("worker", "--state-dir"): (["--state-dir", "/x/w"], setting("state_dir"), Path("/x/w")),
    ("worker", "--web-port"): (["--web-port", "7001"], setting("web_port"), 7001),
    ("worker", "--concurrency"): (["--concurrency", "9"], setting("concurrency"), 9),
    ("worker", "--allow-network"): (
        ["--allow-network", "10.2.0.0/16"],
        setting("allow_networks"),
        "10.2.0.0/16",
    ),
    ("worker", "--proxy"): (PROXY, setting("proxy"), PROXY[1]),
    ("worker", "--no-proxy-for"): (["--no-proxy-for", "a.test"], setting("no_proxy_for"), "a.test"),
    ("worker", "--proxy-credential"): (
        ["--proxy-credential", "PX"],
        setting("proxy_credential"),
        "PX",
    ),
    ("worker", "--credentials-dir"): (
        ["--credentials-dir", "/x/creds"],
        setting("credentials_dir"),
        Path("/x/creds"),
    ),
    ("render-worker", "--concurrency"): (["--concurrency", "3"], setting("render_concurrency"), 3),
    ("render-worker", "--web-port"): (["--web-port", "7002"], setting("render_web_port"), 7002),
    ("render-worker", "--allow-network"): (
        ["--allow-network", "10.2.0.0/16"],
        setting("allow_networks"),
        "10.2.0.0/16",
    ),
    ("render-worker", "--proxy"): (PROXY, setting("proxy"), PROXY[1]),
    ("render-worker", "--no-proxy-for"): (
        ["--no-proxy-for", "a.test"],
        setting("no_proxy_for"),
        "a.test",
    ),
    ("render-worker", "--proxy-credential"): (
        ["--proxy-credential", "PX"],
        setting("proxy_credential"),
        "PX",
    ),
    ("render-worker", "--credentials-dir"): (
        ["--credentials-dir", "/x/creds"],
        setting("credentials_dir"),
        Path("/x/creds"),
    ),
    ("pages", "--crawl-id"): (["--crawl-id", "other"], lambda seen: seen["stdout"], ""),
    ("pages", "--follow"): (["--follow"], lambda seen: seen["follow"], True),
    ("pages", "--changes"): (["--changes"], lambda seen: len(seen["stdout"].splitlines()), 1),
    ("pages", "--from-beginning"): (
        ["--from-beginning"],
        lambda seen: (seen["consumer"]["auto.offset.reset"], seen["start"]),
        ("earliest", -2),  # confluent_kafka.OFFSET_BEGINNING
    ),
    ("status", "--crawl-id"): (["--crawl-id", "c9"], lambda seen: seen["crawl_id"], "c9"),
    ("status", "--json"): (["--json"], lambda seen: seen["stdout"].startswith("{"), True),
    ("status", "--exact"): (["--exact"], lambda seen: seen["exact"], True),
    ("status", "--watch"): (["--watch"], lambda seen: "watch" in seen, True),
    ("status", "--interval"): (
        ["--watch", "--interval", "7"],
        lambda seen: seen.get("watch", {}).get("interval"),
        7.0,
    ),
    # seed only: the embedded crawl's pages.jsonl has every version already
    ("seed", "--keep-versions"): (["--keep-versions", "3"], policy("keep_versions"), 3),
    ("seed", "--warc"): (["--warc"], policy("warc"), True),
    ("warc", "--out"): (["--out", "/x/other"], lambda seen: seen["out"], Path("/x/other")),
    ("warc", "--warc-max-size"): (
        ["--warc-max-size", "500M"],
        lambda seen: seen["max_size"],
        500 << 20,
    ),
    ("warc", "--prefix"): (["--prefix", "arch"], lambda seen: seen["prefix"], "arch"),
    ("index", "-o"): (
        ["-o", str(INDEX_FILE)],
        lambda seen: (seen["stdout"], INDEX_FILE.is_file() and INDEX_FILE.read_text()),
        ("", "test,a)/ 20260101000000 {}\n"),
    ),
    ("admin", "--partitions"): (["--partitions", "5"], setting("partitions"), 5),
    # what they do with `admin reshard`: tests/unit/test_reshard_plan.py (bad input) and
    # tests/integration/test_reshard.py (rollback, delete-old)
    ("admin", "--rollback"): (["--rollback"], lambda seen: "reshard` only" in seen["stderr"], True),
    ("admin", "--delete-old"): (
        ["--delete-old"],
        lambda seen: "reshard` only" in seen["stderr"],
        True,
    ),
    ("admin", "--replication-factor"): (
        ["--replication-factor", "3"],
        setting("replication_factor"),
        3,
    ),
}
CASES[("test", "--args")] = (
    ["--args", "{"],
    lambda seen: "its arguments are not JSON" in seen["stderr"],
    True,
)
CASES[("test", "--url")] = (
    ["--url", "ftp://x/"],
    lambda seen: "--url must be an http(s) URL" in seen["stderr"],
    True,
)
for _command in POLICY_COMMANDS:
    for _flag, _case in POLICY_FLAGS.items():
        CASES[(_command, _flag)] = _case
for _command, _flag in flags():
    if _flag in SERVICE_FLAGS:
        CASES[(_command, _flag)] = SERVICE_FLAGS[_flag]
    if _flag == "--crawl-id" and _command in ("pause", "resume", "stop", "recrawl"):
        CASES[(_command, _flag)] = (
            ["--crawl-id", "c8"],
            lambda seen: "unknown crawl 'c8'" in seen["stderr"],
            True,
        )


def test_every_flag_has_a_case() -> None:
    assert set(CASES) == flags()


def argv_for(command: str, extra: list[str]) -> list[str]:
    if command == "":
        return [*extra, *BASE["worker"]]
    if command in ("pause", "resume", "stop", "recrawl") and "--crawl-id" in extra:
        return [command, *extra]
    return [*BASE[command], *extra]


@pytest.mark.parametrize(("command", "flag"), sorted(CASES))
def test_the_flag_reaches_its_component(
    command: str, flag: str, run: Callable[..., dict[str, Any]]
) -> None:
    extra, observe, expected = CASES[(command, flag)]
    assert observe(run(*argv_for(command, []))) != expected  # not so without the flag
    assert observe(run(*argv_for(command, extra))) == expected


def test_log_level_sets_the_logging_of_the_other_commands(
    run: Callable[..., dict[str, Any]],
) -> None:
    assert run(*BASE["crawl"])["logging"]["level"] == "WARNING"
    assert run("--log-level", "DEBUG", *BASE["crawl"])["logging"]["level"] == "DEBUG"
