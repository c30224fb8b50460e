"""``streamcrawl.pages``: the ``pages`` topic as typed records, against the real Kafka.

Page records of every schema version readers accept (``schemas/json/index.json``), each as a
producer of that version writes it (the fields of its schema file only), are published on a
topic prefix of this test's own; ``streamcrawl.pages`` hands each back as the current ``Page``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from confluent_kafka import Producer

import streamcrawl
from streamcrawl.schemas.codec import encode
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.admin.config import librdkafka_producer_config
from streamcrawl.topology.cli import kafka_args
from streamcrawl.topology.settings import load_settings
from tests.integration.test_page_stream_contract import make_page

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "json"
VERSIONS = json.loads((SCHEMAS / "index.json").read_text("utf-8"))["accepted_versions"]
ORIGIN = "https://example.org"


def as_written_by(version: int, page: streamcrawl.Page) -> dict[str, Any]:
    """``page`` as a producer of schema ``version`` sends it: the fields of that version's
    schema file, valid against it."""
    schema = json.loads((SCHEMAS / f"pages.v{version}.schema.json").read_text("utf-8"))
    fields = schema["$defs"]["Page"]["properties"]
    value = {k: v for k, v in msgspec.json.decode(encode(page)).items() if k in fields}
    value["v"] = version
    jsonschema.Draft202012Validator(schema).validate(value)
    return value


def publish(settings: Any, values: list[bytes]) -> None:
    producer = Producer(librdkafka_producer_config(settings))
    for value in values:
        producer.produce(f"{settings.topic_prefix}.pages", key=ORIGIN.encode(), value=value)
    assert producer.flush(30) == 0


@pytest.fixture
def kafka(kafka_bootstrap: str, topic_prefix: str) -> dict[str, str]:
    """The settings of a topic prefix of this test's own, its topics created."""
    given = {"kafka_bootstrap": kafka_bootstrap, "topic_prefix": topic_prefix}
    admin.create_topics(load_settings(**given, partitions=1))
    return given


@pytest.mark.kafka
@pytest.mark.integration
def test_every_schema_version_comes_back_as_the_current_record(
    kafka: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    written = {v: as_written_by(v, make_page("c", ORIGIN, v)) for v in VERSIONS}
    other = make_page("other", ORIGIN, 99)
    values = [msgspec.json.encode(value) for value in written.values()]
    publish(load_settings(**kafka), [*values, b'{"v": 1, "crawl_id": "c"}', encode(other)])

    with caplog.at_level(logging.WARNING, logger="streamcrawl"):
        read = list(streamcrawl.pages("c", from_beginning=True, **kafka))
    assert all(type(page) is streamcrawl.Page for page in read)
    assert [page.v for page in read] == VERSIONS
    defaults = streamcrawl.Page(**{k: v for k, v in written[VERSIONS[0]].items() if k != "v"})
    for page in read:
        value = written[page.v]
        assert (page.url, page.title, page.status) == (value["url"], value["title"], 200)
        for field in msgspec.structs.fields(streamcrawl.Page):
            if field.name not in value:  # added after this version: the record's default
                assert getattr(page, field.name) == getattr(defaults, field.name), field.name
    assert "skipping the pages message at offset" in caplog.text  # the one that does not decode

    everything = [page.crawl_id for page in streamcrawl.pages(from_beginning=True, **kafka)]
    assert everything == ["c"] * len(VERSIONS) + ["other"]
    assert list(streamcrawl.pages(**kafka)) == []  # from the end: caught up at once


@pytest.mark.kafka
@pytest.mark.integration
def test_follow_waits_for_the_next_page(kafka: dict[str, str]) -> None:
    settings = load_settings(**kafka)
    publish(settings, [encode(make_page("c", ORIGIN, 1))])
    following = streamcrawl.pages("c", from_beginning=True, follow=True, **kafka)
    try:
        assert next(following).url == f"{ORIGIN}/p/1"
        publish(settings, [encode(make_page("c", ORIGIN, 2))])
        assert next(following).url == f"{ORIGIN}/p/2"
    finally:
        following.close()


def test_settings_are_checked_before_anything_is_read() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'cassandra_hosts'"):
        streamcrawl.pages(cassandra_hosts="127.0.0.1")
    with pytest.raises(TypeError, match="unexpected keyword argument 'kafka_bootstrapp'"):
        streamcrawl.pages(kafka_bootstrapp="127.0.0.1:9092")
    with pytest.raises(streamcrawl.ConfigError, match="topic-prefix"):
        streamcrawl.pages(topic_prefix="no spaces")


def test_without_the_kafka_extra_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_args, "missing_kafka_extra", lambda: "confluent_kafka")
    with pytest.raises(streamcrawl.ConfigError) as raised:
        streamcrawl.pages()
    assert str(raised.value) == (
        "streamcrawl.pages needs the kafka extra (confluent_kafka is not installed): "
        "pip install 'streamcrawl[kafka]'"
    )
