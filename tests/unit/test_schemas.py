"""Published JSON Schemas match the records, accept what we encode, and enforce versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from streamcrawl.schemas import generate
from streamcrawl.schemas.codec import KNOWN_VERSIONS, BadMessage, decode, encode
from streamcrawl.schemas.records import (
    ALSO_ON,
    MAX_ANCHOR_CHARS,
    MAX_EXTRACT_CHARS,
    MAX_EXTRACT_VALUES,
    MAX_EXTRACTORS,
    MAX_PAGE_LINKS,
    MAX_PLUGINS,
    MAX_REL_CHARS,
    MAX_REL_TOKENS,
    MAX_SELECTOR_CHARS,
    SCHEMA_VERSION,
    TOPIC_SINCE,
    WIRE_RECORDS,
    Capture,
    CaptureRevisit,
    Cookie,
    CrawlPolicy,
    Exchange,
    Extractor,
    FrontierBatch,
    Outcome,
    Outlink,
    Page,
    PluginSpec,
    QueueEntry,
    RenderRequest,
    SetCookie,
    SlotGrant,
    SlotMessage,
    TerminalState,
    UrlRef,
    UrlStatus,
)

SAMPLES: dict[str, list[msgspec.Struct]] = {
    "control": [
        CrawlPolicy(crawl_id="c1"),
        CrawlPolicy(
            crawl_id="c2", seeds=("https://example.org/",), max_pages=10, max_depth=2,
            include=(r"^https://example\.org/docs/",), state="paused", store_bodies=True,
        ),
        CrawlPolicy(
            crawl_id="c3", seeds=("https://example.org/",),
            extract=(Extractor(name="price", selector=".price::text"),
                     Extractor(name="tags", selector="a[rel=tag]::attr(href)", all=True)),
        ),
        CrawlPolicy(
            crawl_id="c4", seeds=("https://example.org/",),
            plugins=(PluginSpec(name="max_query_params", args={"max": 2}),
                     PluginSpec(name="json_links")),
        ),
        CrawlPolicy(
            crawl_id="c5", seeds=("https://example.org/",), assets=("css", "images"),
            max_assets=100, asset_hosts=("cdn.example.net",),
        ),
    ],
    "frontier": [
        FrontierBatch(
            crawl_id="c1", origin="https://example.org",
            urls=(UrlRef("https://example.org/a", 1, "https://example.org/"),
                  UrlRef("https://example.org/b", 2)),
        ),
        FrontierBatch(
            crawl_id="c4", origin="https://cdn.example.net",
            urls=(UrlRef("https://cdn.example.net/s.css", 1, "https://example.org/",
                         "stylesheet"),
                  UrlRef("https://cdn.example.net/i.png", 2, "https://cdn.example.net/s.css",
                         "asset")),
        ),
    ],
    "outcomes": [
        Outcome(
            crawl_id="c1", origin="https://example.org", kind="page", seq=4,
            url="https://example.org/a", state="retry", error="timeout", retry_after=3.0,
            backoff=True, started_at=1.5, finished_at=2.5,
        ),
        Outcome(
            crawl_id="c1", origin="https://example.org", kind="robots", seq=-1,
            url="https://example.org/robots.txt", state="fetched", status=200,
            started_at=1.0, finished_at=1.2, robots_body="User-agent: *\nDisallow: /x\n",
            robots_status=200,
        ),
        # the topic's other record (v8): a render worker's claim and return of a loan
        SlotMessage(
            kind="claim", claim_id="9f1c", crawl_id="c1", origin="https://example.org",
            worker_id="w1", not_after=12.5,
        ),
        SlotMessage(
            kind="return", claim_id="9f1c", crawl_id="c1", origin="https://example.org",
            worker_id="w1", sent_at=11.25, delay=1.0,
        ),
    ],
    "pages": [
        Page(
            crawl_id="c1", url="https://example.org/é", final_url="https://example.org/%C3%A9",
            origin="https://example.org", status=200, headers={"content-type": "text/html"},
            content_type="text/html", charset="utf-8", title="Été", depth=1,
            fetched_at=1_780_000_000.25, elapsed_ms=10.0, body_sha256="0" * 64, body_bytes=5,
            outlinks=0, redirects=("https://example.org/e",), body="<p>é</p>",
        ),
        Page(
            crawl_id="c1", url="https://example.org/", final_url="https://example.org/",
            origin="https://example.org", status=200, headers={}, content_type="text/html",
            charset="utf-8", title=None, depth=0, fetched_at=1.0, elapsed_ms=1.0,
            body_sha256="0" * 64, body_bytes=5, outlinks=1,
            links=(
                Outlink("https://example.org/a", "Été à la plage", ("nofollow", "ugc")),
                Outlink("https://other.example/", tag="iframe", in_scope=False,
                        scope_rule="host"),
            ),
            links_total=3, links_truncated=True,
        ),
        Page(
            crawl_id="c3", url="https://example.org/p", final_url="https://example.org/p",
            origin="https://example.org", status=200, headers={}, content_type="text/html",
            charset="utf-8", title="P", depth=0, fetched_at=1.0, elapsed_ms=1.0,
            body_sha256="0" * 64, body_bytes=5, outlinks=0, change="new",
            data={"price": "9,99 €", "tags": ["/t/a", "/t/b"], "sku": None, "_truncated": True},
        ),
        Page(
            crawl_id="c4", url="https://example.org/", final_url="https://example.org/",
            origin="https://example.org", status=200, headers={}, content_type="text/html",
            charset="utf-8", title="A", depth=0, fetched_at=1.0, elapsed_ms=1.0,
            body_sha256="0" * 64, body_bytes=5, outlinks=0,
            assets=("https://cdn.example.net/s.css", "https://example.org/i.png"),
        ),
    ],
    "status": [
        UrlStatus(
            crawl_id="c1", url="https://example.org/a", origin="https://example.org",
            state=state, depth=0, updated_at=2.0,
            last_error="timeout" if state == TerminalState.FAILED else None,
        )
        for state in TerminalState
    ],
    "captures": [
        Capture(
            crawl_id="c1", origin="https://example.org", url="https://example.org/a",
            depth=1, via="https://example.org/", elapsed_ms=3.5,
            outlinks=("https://example.org/b",),
            exchanges=(
                Exchange(
                    target_uri="https://example.org/a", date=2.25, ip="127.0.0.1",
                    request=b"GET /a HTTP/1.1\r\nHost: example.org\r\n\r\n",
                    response=b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n",
                    payload=b"\x1f\x8b", truncated="length",
                ),
            ),
            revisit=CaptureRevisit(
                profile="identical-payload-digest", refers_to_uri="https://example.org/a",
                refers_to_date=1.5,
            ),
        ),
    ],
    "render": [
        RenderRequest(
            crawl_id="c1", origin="https://example.org", seq=3,
            entry=QueueEntry(crawl_id="c1", url="https://example.org/app", depth=1),
            final_url="https://example.org/app", response_url="https://example.org/app",
            status=200, headers={"content-type": "text/html; charset=utf-8"},
            content_type="text/html", charset="utf-8", body=b"<div id=root></div>",
            started_at=1.0, elapsed_ms=2.5, sent_at=1.25, robots_status=404,
            cookies=(Cookie(name="s", value="1", domain="example.org"),),
            set_cookies=(SetCookie(url="https://example.org/app", header="t=2"),),
            dispatched_at=1.0, expires_at=121.0,
        ),
    ],
    "grants": [
        SlotGrant(
            claim_id="9f1c", crawl_id="c1", origin="https://example.org", worker_id="w1",
            send_by=14.0, delay=1.0, robots_status=200, robots_body="User-agent: *\nAllow: /\n",
            robots_expires=86411.0,
        ),
    ],
}  # fmt: skip


FROZEN = sorted(KNOWN_VERSIONS - {SCHEMA_VERSION})  # earlier versions, still accepted


def load_schema(topic: str, version: int = SCHEMA_VERSION) -> dict[str, Any]:
    path = generate.JSON_DIR / f"{topic}.v{version}.schema.json"
    schema: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return schema


def as_published(value: dict[str, Any], version: int) -> dict[str, Any]:
    """``value`` as a producer of ``version`` sends it: only that version's fields."""
    fields = load_schema("pages", version)["$defs"]["Page"]["properties"]
    return {k: v for k, v in value.items() if k in fields} | {"v": version}


def test_every_wire_record_has_samples() -> None:
    assert set(SAMPLES) == set(WIRE_RECORDS)
    for topic, samples in SAMPLES.items():
        kinds = {WIRE_RECORDS[topic], *(record for record, _since in ALSO_ON.get(topic, ()))}
        assert samples and {type(s) for s in samples} == kinds
        assert type(samples[0]) is WIRE_RECORDS[topic]


def test_a_slot_message_on_outcomes_is_one_from_v8_on() -> None:
    """Claims of slots travel on ``outcomes`` (not a topic of their own: a third input of the
    frontier agent stalled it after handovers); an outcome stays an outcome, a claim before v8
    is not one, and a bad outcome is named as an outcome."""
    claim = SAMPLES["outcomes"][-2]
    assert isinstance(claim, SlotMessage)
    assert decode("outcomes", encode(claim)) == claim
    assert type(decode("outcomes", encode(SAMPLES["outcomes"][0]))) is Outcome
    old = json.loads(encode(claim)) | {"v": 7}
    with pytest.raises(BadMessage, match=r"bad outcomes message .*field kind.*'claim'"):
        decode("outcomes", json.dumps(old))
    with pytest.raises(BadMessage, match="unknown schema version v=99"):
        decode("outcomes", json.dumps(old | {"v": 99}))
    bad = json.loads(encode(SAMPLES["outcomes"][0])) | {"kind": "claim"}
    with pytest.raises(BadMessage, match="bad outcomes message"):
        decode("outcomes", json.dumps(bad))
    for value in (json.loads(encode(claim)), json.loads(encode(SAMPLES["outcomes"][0]))):
        jsonschema.validate(value, load_schema("outcomes"), jsonschema.Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, load_schema("outcomes"), jsonschema.Draft202012Validator)


def test_committed_files_are_up_to_date() -> None:
    on_disk = {
        p.name: p.read_text("utf-8")
        for p in generate.JSON_DIR.glob("*.json")
        if not p.name.endswith(tuple(f".v{v}.schema.json" for v in FROZEN))  # frozen
    }
    assert on_disk == generate.build(), (
        "run `python -m streamcrawl.schemas.generate` and commit schemas/json"
    )
    assert generate.stale() == []


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    generate.write(tmp_path)
    assert generate.stale(tmp_path) == []
    current = generate.schema_file("pages")
    (tmp_path / current).write_text("{}", "utf-8")
    (tmp_path / "old.v0.schema.json").write_text("{}", "utf-8")
    for v in FROZEN:  # accepted versions: kept as they are
        (tmp_path / f"pages.v{v}.schema.json").write_text("{}", "utf-8")
    assert generate.stale(tmp_path) == sorted(["old.v0.schema.json", current])
    assert sorted(generate.write(tmp_path)) == sorted(["old.v0.schema.json", current])
    assert generate.stale(tmp_path) == []
    for v in FROZEN:
        assert (tmp_path / f"pages.v{v}.schema.json").read_text("utf-8") == "{}"


@pytest.mark.parametrize("version", FROZEN)
@pytest.mark.parametrize("topic", sorted(WIRE_RECORDS))
def test_earlier_versions_stay_published_and_their_records_still_decode(
    topic: str, version: int
) -> None:
    if version < TOPIC_SINCE.get(topic, 1):
        assert not (generate.JSON_DIR / f"{topic}.v{version}.schema.json").exists()
        return  # the topic did not exist at that version
    old = load_schema(topic, version)
    value = json.loads(encode(SAMPLES[topic][0])) | {"v": version}
    jsonschema.validate(value, old, jsonschema.Draft202012Validator)
    assert decode(topic, json.dumps(value)) == msgspec.structs.replace(SAMPLES[topic][0], v=version)


def test_versions_1_to_8_are_accepted() -> None:
    assert sorted(KNOWN_VERSIONS) == [1, 2, 3, 4, 5, 6, 7, 8] and SCHEMA_VERSION == 8


@pytest.mark.parametrize("version", [v for v in FROZEN if v < 3])
def test_an_old_page_without_links_decodes_with_links_not_counted(version: int) -> None:
    """A v1/v2 producer sends no links: they decode as none listed, ``links_total`` null (not
    counted), and ``outlinks`` keeps its meaning."""
    value = as_published(json.loads(encode(SAMPLES["pages"][1])), version)
    assert "links" not in value and "links_total" not in value and value["outlinks"] == 1
    jsonschema.validate(value, load_schema("pages", version), jsonschema.Draft202012Validator)
    page = decode("pages", json.dumps(value))
    assert (page.v, page.links, page.links_total, page.links_truncated) == (
        version,
        (),
        None,
        False,
    )
    assert page.outlinks == 1


def test_a_v3_page_carries_its_links_and_leaves_defaults_out() -> None:
    value = json.loads(encode(SAMPLES["pages"][1]))
    assert value["v"] == SCHEMA_VERSION and value["links_total"] == 3
    assert value["links_truncated"] is True
    assert value["links"] == [
        {"url": "https://example.org/a", "text": "Été à la plage", "rel": ["nofollow", "ugc"]},
        {"url": "https://other.example/", "tag": "iframe", "in_scope": False, "scope_rule": "host"},
    ]


@pytest.mark.parametrize(
    "link",
    [
        {"url": ""},
        {"url": "https://e.org/", "text": "x" * (MAX_ANCHOR_CHARS + 1)},
        {"url": "https://e.org/", "rel": ["r"] * (MAX_REL_TOKENS + 1)},
        {"url": "https://e.org/", "rel": ["r" * (MAX_REL_CHARS + 1)]},
        {"url": "https://e.org/", "rel": [""]},
        {"url": "https://e.org/", "tag": "img"},
    ],
)
def test_a_link_outside_its_bounds_is_refused_by_decoder_and_schema(link: dict[str, Any]) -> None:
    value = json.loads(encode(SAMPLES["pages"][1])) | {"links": [link]}
    with pytest.raises(BadMessage, match=r"field links\[0\]"):
        decode("pages", json.dumps(value))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, load_schema("pages"), jsonschema.Draft202012Validator)


def test_more_links_than_the_bound_are_refused() -> None:
    value = json.loads(encode(SAMPLES["pages"][1]))
    value["links"] = [{"url": f"https://e.org/{i}"} for i in range(MAX_PAGE_LINKS + 1)]
    with pytest.raises(BadMessage, match="field links"):
        decode("pages", json.dumps(value))


def test_a_page_extractor_plugins_object_is_data_of_a_v7_page() -> None:
    """v7: a page extractor plugin's JSON object sits in ``data`` under the plugin's name, and
    the errors of plugins that failed on the page are listed (docs/plugins.md)."""
    data = {"title": "T", "prices": {"amount": 12.5, "currency": "EUR", "seen": [1, 2]}}
    errors = ["price: ValueError: no price"]
    value = json.loads(encode(SAMPLES["pages"][2])) | {"data": data, "plugin_errors": errors}
    jsonschema.validate(value, load_schema("pages"), jsonschema.Draft202012Validator)
    page = decode("pages", json.dumps(value))
    assert page.data == data and page.plugin_errors == tuple(errors)


@pytest.mark.parametrize(
    "data",
    [
        {"x": "y" * (MAX_EXTRACT_CHARS + 1)},
        {"x": ["y"] * (MAX_EXTRACT_VALUES + 1)},
        {"x": ["y" * (MAX_EXTRACT_CHARS + 1)]},
        {"x": 1},
        {"x": [{"y": "z"}]},
        {"1x": "y"},
        {f"x{i}": None for i in range(MAX_EXTRACTORS + MAX_PLUGINS + 2)},
    ],
)
def test_page_data_outside_its_bounds_is_refused_by_decoder_and_schema(
    data: dict[str, Any],
) -> None:
    value = json.loads(encode(SAMPLES["pages"][2])) | {"data": data}
    with pytest.raises(BadMessage, match=r"\$\.data|field data"):
        decode("pages", json.dumps(value))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, load_schema("pages"), jsonschema.Draft202012Validator)


@pytest.mark.parametrize(
    "extract",
    [
        [{"name": "", "selector": "p"}],
        [{"name": "9lives", "selector": "p"}],
        [{"name": "a b", "selector": "p"}],
        [{"name": "x" * 65, "selector": "p"}],
        [{"name": "x", "selector": ""}],
        [{"name": "x", "selector": "p" * (MAX_SELECTOR_CHARS + 1)}],
        [{"name": "x", "selector": "p", "all": "yes"}],
        [{"name": f"x{i}", "selector": "p"} for i in range(MAX_EXTRACTORS + 1)],
    ],
)
def test_extractors_outside_their_bounds_are_refused_by_decoder_and_schema(
    extract: list[dict[str, Any]],
) -> None:
    value = json.loads(encode(SAMPLES["control"][0])) | {"extract": extract}
    with pytest.raises(BadMessage, match="field extract"):
        decode("control", json.dumps(value))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, load_schema("control"), jsonschema.Draft202012Validator)


def test_index_names_every_topic_and_its_schema_file() -> None:
    index = json.loads((generate.JSON_DIR / "index.json").read_text("utf-8"))
    assert set(index["topics"]) == set(WIRE_RECORDS)
    for topic, entry in index["topics"].items():
        assert (generate.JSON_DIR / entry["schema"]).is_file()
        assert entry["value"] == {"encoding": "json", "charset": "utf-8"}
        keys = {"control": "crawl_id", "grants": "worker_id"}
        assert entry["key"]["format"] == keys.get(topic, "origin")
    assert index["topics"]["pages"]["compression"] == "zstd"
    assert index["topics"]["control"]["cleanup_policy"] == "compact"


@pytest.mark.parametrize("topic", sorted(WIRE_RECORDS))
def test_schema_is_valid_2020_12(topic: str) -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema(topic))


@pytest.mark.parametrize(
    ("topic", "record"), [(t, r) for t, samples in SAMPLES.items() for r in samples]
)
def test_encoded_records_validate_and_round_trip(topic: str, record: msgspec.Struct) -> None:
    data = encode(record)
    jsonschema.validate(json.loads(data), load_schema(topic), jsonschema.Draft202012Validator)
    assert decode(topic, data) == record
    assert decode(f"some.prefix.{topic}", data) == record


@pytest.mark.parametrize("topic", sorted(WIRE_RECORDS))
def test_unknown_version_is_rejected_by_decoder_and_schema(topic: str) -> None:
    value = json.loads(encode(SAMPLES[topic][0]))
    value["v"] = 99
    data = json.dumps(value).encode()
    with pytest.raises(BadMessage, match="unknown schema version v=99"):
        decode(topic, data)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, load_schema(topic), jsonschema.Draft202012Validator)


def test_unknown_version_wins_over_a_shape_error() -> None:
    with pytest.raises(BadMessage, match="unknown schema version v=99"):
        decode("pages", b'{"v": 99, "url": 1}')


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{not json", "malformed|truncated|invalid"),
        (b"[]", "Expected `object`"),
        (b'{"v": 1, "crawl_id": "c"}', "missing required field"),
        (b'{"v": "1", "crawl_id": "c"}', "unknown schema version v='1'"),
        ("\udcff".encode("utf-8", "surrogatepass"), "."),
    ],
)
def test_bad_values_raise_bad_message(data: bytes, why: str) -> None:
    with pytest.raises(BadMessage, match=why):
        decode("status", data)


def test_bad_message_is_a_value_error_and_unknown_topics_are_refused() -> None:
    assert issubclass(BadMessage, ValueError)
    with pytest.raises(BadMessage, match="no wire record for topic 'nope'"):
        decode("nope", b"{}")


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    value = json.loads(encode(SAMPLES["status"][0]))
    value["added_later"] = {"x": 1}
    assert decode("status", json.dumps(value)) == SAMPLES["status"][0]


def test_blocked_is_a_v2_state_only() -> None:
    """The SSRF guard's state ``blocked`` came with v2: the frozen v1 status schema refuses it."""
    value = json.loads(encode(SAMPLES["status"][0]))
    value["state"] = "blocked"
    jsonschema.validate(value, load_schema("status"), jsonschema.Draft202012Validator)
    v1 = json.loads((generate.JSON_DIR / "status.v1.schema.json").read_text("utf-8"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**value, "v": 1}, v1, jsonschema.Draft202012Validator)
