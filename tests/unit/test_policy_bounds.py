"""Crawl spec and seed request bounds: on the record, so the decoder (control and frontier
topics), the CLI's argparse types and the published JSON Schema refuse the same values."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

import jsonschema
import msgspec
import pytest

from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.schemas import generate
from streamcrawl.schemas.codec import BadMessage, check, decode, encode
from streamcrawl.schemas.records import (
    MAX_BATCH_URLS,
    MAX_HOSTS,
    MAX_PATTERN_CHARS,
    MAX_PATTERNS,
    MAX_SEEDS,
    MAX_URL_CHARS,
    SCHEMA_VERSION,
    CrawlPolicy,
    FrontierBatch,
    Outcome,
    UrlRef,
)
from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.worker.internals import refresh_metadata

MB10 = "x" * (10 * 1024 * 1024)
URL = "https://example.org/"

# (field that must be named, spec fields): each is a hostile control message.
HOSTILE_SPECS: list[tuple[str, dict[str, Any]]] = [
    ("seeds", {"seeds": [f"{URL}{i}" for i in range(1_000_000)]}),
    ("seeds", {"seeds": [URL] * (MAX_SEEDS + 1)}),
    ("seeds[0]", {"seeds": [URL + MB10]}),
    ("seeds[0]", {"seeds": [""]}),
    ("user_agent", {"user_agent": MB10}),
    ("user_agent", {"user_agent": ""}),
    ("crawl_id", {"crawl_id": MB10}),
    ("crawl_id", {"crawl_id": "../etc"}),
    ("allow_hosts", {"allow_hosts": ["a.example"] * (MAX_HOSTS + 1)}),
    ("allow_domains[0]", {"allow_domains": ["a" * 300]}),
    ("include", {"include": ["a"] * (MAX_PATTERNS + 1)}),
    ("exclude[0]", {"exclude": ["a" * (MAX_PATTERN_CHARS + 1)]}),
    ("strip_params[0]", {"strip_params": [MB10]}),
    ("content_types", {"content_types": ["text/html"] * (MAX_PATTERNS + 1)}),
    ("max_pages", {"max_pages": -1}),
    ("max_pages", {"max_pages": 0}),
    ("max_pages", {"max_pages": 10**13}),
    ("max_depth", {"max_depth": -1}),
    ("max_depth", {"max_depth": 10**9}),
    ("delay", {"delay": -0.5}),
    ("delay", {"delay": 1e12}),
    ("max_crawl_delay", {"max_crawl_delay": 1e9}),
    ("max_backoff", {"max_backoff": -1}),
    ("timeout", {"timeout": 0}),
    ("timeout", {"timeout": 1e9}),
    ("connect_timeout", {"connect_timeout": -1}),
    ("per_origin_concurrency", {"per_origin_concurrency": 0}),
    ("per_origin_concurrency", {"per_origin_concurrency": 10**6}),
    ("max_body", {"max_body": 0}),
    ("max_body", {"max_body": 1 << 40}),
    ("retries", {"retries": -1}),
    ("retries", {"retries": 10**6}),
    ("max_page_links", {"max_page_links": -1}),
    ("max_page_links", {"max_page_links": 10**6}),
    ("max_redirects", {"max_redirects": 1000}),
    ("max_url_length", {"max_url_length": 10**9}),
    ("max_path_depth", {"max_path_depth": 0}),
    ("max_segment_repeats", {"max_segment_repeats": -3}),
    ("robots_ttl", {"robots_ttl": 1e12}),
    ("robots_error_ttl", {"robots_error_ttl": -1}),
]


def spec(version: int = SCHEMA_VERSION, **fields: Any) -> dict[str, Any]:
    return {"v": version, "crawl_id": "c1", "seeds": [URL]} | fields


def ids(cases: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [f"{field}-{i}" for i, (field, _) in enumerate(cases)]


@pytest.mark.parametrize(("field", "fields"), HOSTILE_SPECS, ids=ids(HOSTILE_SPECS))
def test_hostile_spec_is_refused_naming_crawl_and_field(field: str, fields: dict[str, Any]) -> None:
    with pytest.raises(BadMessage) as exc:
        decode("control", json.dumps(spec(**fields)))
    assert exc.value.field == field
    assert f"field {field}" in str(exc.value)
    expected_id = "c1" if "crawl_id" not in fields else fields["crawl_id"][:100]
    assert exc.value.crawl_id is not None and exc.value.crawl_id.startswith(expected_id)
    assert len(str(exc.value)) < 1000  # a 10 MB value is never echoed whole


@pytest.mark.parametrize(("field", "fields"), HOSTILE_SPECS[1:], ids=ids(HOSTILE_SPECS[1:]))
def test_the_published_schema_refuses_the_same_specs(field: str, fields: dict[str, Any]) -> None:
    schema = json.loads((generate.JSON_DIR / generate.schema_file("control")).read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(spec(**fields), schema, jsonschema.Draft202012Validator)


@pytest.mark.parametrize(("field", "fields"), HOSTILE_SPECS[1:], ids=ids(HOSTILE_SPECS[1:]))
def test_check_refuses_a_record_built_in_process(field: str, fields: dict[str, Any]) -> None:
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in spec(**fields).items()}
    built = CrawlPolicy(**given)  # a constructor checks no bounds
    with pytest.raises(BadMessage) as exc:
        check(built)
    assert exc.value.field == field


def test_bounds_at_the_limit_are_accepted_by_decoder_and_schema() -> None:
    fields = {
        "seeds": [f"{URL}{i}" for i in range(MAX_SEEDS)],
        "allow_hosts": [f"h{i}.example" for i in range(MAX_HOSTS)],
        "include": ["a" * MAX_PATTERN_CHARS] * MAX_PATTERNS,
        "max_pages": 10**12,
        "delay": 86400,
        "timeout": 3600,
    }
    data = json.dumps(spec(**fields))
    policy = decode("control", data)
    assert len(policy.seeds) == MAX_SEEDS and policy.max_pages == 10**12
    assert check(policy) == policy
    schema = json.loads((generate.JSON_DIR / generate.schema_file("control")).read_text())
    jsonschema.validate(json.loads(data), schema, jsonschema.Draft202012Validator)


def test_a_version_1_spec_is_accepted_and_held_to_the_new_bounds() -> None:
    assert decode("control", json.dumps(spec(version=1))).crawl_id == "c1"
    with pytest.raises(BadMessage, match="field max_pages"):
        decode("control", json.dumps(spec(version=1, max_pages=-5)))
    batch = {"v": 1, "crawl_id": "c1", "origin": URL[:-1], "urls": [{"url": URL, "depth": 0}]}
    assert decode("frontier", json.dumps(batch)).urls == (UrlRef(URL, 0),)


@pytest.mark.parametrize(
    ("field", "urls"),
    [
        ("urls", [{"url": URL, "depth": 1}] * (MAX_BATCH_URLS + 1)),
        ("urls", [{"url": f"{URL}{i}", "depth": 1} for i in range(1_000_000)]),
        ("urls[0].url", [{"url": URL + "a" * MAX_URL_CHARS, "depth": 1}]),
        ("urls[0].depth", [{"url": URL, "depth": -1}]),
        ("urls[1].parent", [{"url": URL, "depth": 1}, {"url": URL, "depth": 1, "parent": MB10}]),
    ],
)
def test_hostile_frontier_batch_is_refused(field: str, urls: list[dict[str, Any]]) -> None:
    value = {"v": 2, "crawl_id": "c1", "origin": "https://example.org", "urls": urls}
    with pytest.raises(BadMessage) as exc:
        decode("frontier", json.dumps(value))
    assert (exc.value.field, exc.value.crawl_id) == (field, "c1")


def test_the_fetch_service_never_sends_a_batch_the_decoder_refuses() -> None:
    from streamcrawl.agents.net.stages import Report
    from streamcrawl.agents.stream.messages import frontier_values, report_messages

    own = tuple(UrlRef(f"http://a.test/{i}", 1) for i in range(3 * MAX_BATCH_URLS))
    other = tuple(UrlRef(f"http://b.test/{i}", 1) for i in range(2 * MAX_BATCH_URLS + 5))
    outcome = Outcome(
        crawl_id="c1",
        origin="http://a.test",
        kind="page",
        seq=0,
        url="http://a.test/",
        state="fetched",
        started_at=1.0,
        finished_at=2.0,
    )
    batches = [
        FrontierBatch(crawl_id="c1", origin="http://a.test", urls=own),
        FrontierBatch(crawl_id="c1", origin="http://b.test", urls=other),
    ]
    msgs = report_messages(Report(outcome, None, batches), page_bytes=1 << 24)
    sent = [decode("frontier", value) for _, value in frontier_values(msgs.batches)]  # none refused
    assert all(len(b.urls) <= MAX_BATCH_URLS for b in sent)
    others = [ref for b in sent if b.origin == "http://b.test" for ref in b.urls]
    assert others == list(other)


# -- the CLI: its argparse types are the record's bounds -----------------------------------------

FLAG_FIELDS = {
    "--max-pages": "max_pages",
    "--max-depth": "max_depth",
    "--delay": "delay",
    "--per-origin-concurrency": "per_origin_concurrency",
    "--max-crawl-delay": "max_crawl_delay",
    "--max-body": "max_body",
    "--timeout": "timeout",
    "--retries": "retries",
    "--max-page-links": "max_page_links",
}


def _bounds(field: str) -> tuple[float, float, bool]:
    """(lowest accepted, highest accepted, whole numbers?) of a numeric CrawlPolicy field."""
    info = msgspec.inspect.type_info(CrawlPolicy)
    assert isinstance(info, msgspec.inspect.StructType)
    (t,) = [f.type for f in info.fields if f.name == field]
    if isinstance(t, msgspec.inspect.UnionType):
        (t,) = [x for x in t.types if not isinstance(x, msgspec.inspect.NoneType)]
    assert isinstance(t, msgspec.inspect.IntType | msgspec.inspect.FloatType)
    low = t.ge if t.ge is not None else t.gt
    assert low is not None and t.le is not None
    return low, t.le, isinstance(t, msgspec.inspect.IntType)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["seed", URL, *argv])


@pytest.mark.parametrize("flag", sorted(FLAG_FIELDS))
def test_cli_flags_take_exactly_the_record_bounds(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    low, high, whole = _bounds(FLAG_FIELDS[flag])
    step = 1 if whole else 0.001
    for fine in (high, low if low > 0 or whole else low + step):
        assert getattr(parse(flag, str(fine)), FLAG_FIELDS[flag].replace("-", "_")) == fine
    for bad in (high + step, low - step):
        with pytest.raises(SystemExit) as exc:
            parse(flag, str(int(bad) if whole else bad))
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0], err


def test_cli_refuses_a_spec_over_a_list_bound_in_one_line() -> None:
    from streamcrawl.agents.errors import ConfigError
    from streamcrawl.topology.cli.options import policy_from_args

    args = parse(*[a for i in range(MAX_PATTERNS + 1) for a in ("--include", f"x{i}")])
    with pytest.raises(ConfigError, match="field include"):
        policy_from_args(args, [URL], "c1")


# -- the worker's view of the control topic --------------------------------------------------


def view() -> SharedView:
    return SharedView(None, "p.control", "p.budget", Metrics(), refresh_metadata=refresh_metadata)


def test_the_worker_refuses_a_hostile_spec_keeps_the_last_good_one_and_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    v = view()
    good = encode(CrawlPolicy(crawl_id="c1", seeds=(URL,), max_pages=5))
    assert v._apply("p.control", 0, 0, b"c1", good)
    caplog.set_level(logging.WARNING, "streamcrawl.agents.stream.control")
    bad = json.dumps(spec(max_pages=-1, seeds=[URL] * (MAX_SEEDS + 1))).encode()
    assert not v._apply("p.control", 0, 1, b"c1", bad)
    assert not v._apply("p.control", 0, 2, b"c1", json.dumps(spec(include=["("])).encode())
    other = encode(CrawlPolicy(crawl_id="c2", seeds=(URL,)))
    assert v._apply("p.control", 0, 3, b"c2", other)
    assert v.policies["c1"].max_pages == 5 and set(v.policies) == {"c1", "c2"}
    assert v.metrics.bad_messages.labels("control")._value.get() == 2
    refused = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(refused) == 2
    assert "'c1'" in refused[0].getMessage() and "field seeds" in refused[0].getMessage()
    assert "'c1'" in refused[1].getMessage() and "not a valid regex" in refused[1].getMessage()
    assert {r.offset for r in refused} == {1, 2}  # type: ignore[attr-defined]


def test_a_spec_whose_recrawl_bounds_do_not_hold_is_refused() -> None:
    v = view()
    bad = spec(crawl_id="live", recrawl_after=3600, recrawl_min=7200)
    assert not v._apply("p.control", 0, 0, b"live", json.dumps(bad).encode())
    assert v.rules("live") is None and v.metrics.bad_messages.labels("control")._value.get() == 1


def test_a_refused_spec_of_a_new_crawl_leaves_it_unknown() -> None:
    v = view()
    assert not v._apply(
        "p.control", 0, 0, b"big", json.dumps(spec(crawl_id="big", delay=-1)).encode()
    )
    assert v.rules("big") is None and v.policies == {}


async def test_the_frontier_agent_skips_a_hostile_batch_and_applies_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from streamcrawl.agents.frontier.records import load_origin
    from streamcrawl.agents.stream.frontier_agent import Where
    from streamcrawl.agents.stream.tables import partition_for
    from tests.kafka_agents import AgentsCrawl

    origin = "https://example.org"
    here = partition_for(origin, 4)
    agents = AgentsCrawl(CrawlPolicy(crawl_id="c1", seeds=(URL,)), partitions=4)
    caplog.set_level(logging.WARNING, "streamcrawl.agents.stream.frontier_agent")
    urls = [{"url": f"{URL}{i}", "depth": 1} for i in range(MAX_BATCH_URLS + 1)]
    hostile = {"v": 2, "crawl_id": "c1", "origin": origin, "urls": urls}
    await agents.agent.handle(Where("p.frontier", here, 0), json.dumps(hostile).encode())
    assert load_origin(agents.store, origin).tail == 0  # nothing of it was applied
    (line,) = [r.getMessage() for r in caplog.records]
    assert "crawl 'c1'" in line and "field urls" in line and "@0" in line
    good = FrontierBatch(crawl_id="c1", origin=origin, urls=(UrlRef(URL + "a", 1),))
    await agents.agent.handle(Where("p.frontier", here, 1), encode(good))
    assert load_origin(agents.store, origin).tail == 1
