"""The sink contract module and the Cassandra sink's own config (that agents/ never imports
topology/ is tests/unit/test_import_graph.py)."""

from __future__ import annotations

from pydantic import SecretStr

from streamcrawl.agents.sinks.contract import micros, origin_bucket, url_hash
from streamcrawl.topology.settings import Settings


def test_settings_build_the_cassandra_config() -> None:
    settings = Settings(
        cassandra_hosts="10.0.0.1:9142,10.0.0.2:9142", cassandra_keyspace="ks1",
        cassandra_replication="{'class': 'NetworkTopologyStrategy', 'dc1': 3}",
        cassandra_username="u", cassandra_password=SecretStr("p"), cassandra_local_dc="dc1",
        sink_concurrency=7,
    )  # fmt: skip
    config = settings.cassandra_config()
    assert config.hosts == ("10.0.0.1", "10.0.0.2") and config.port == 9142
    assert config.where == "10.0.0.1:9142,10.0.0.2:9142" and config.keyspace == "ks1"
    assert config.replication == settings.cassandra_replication
    assert (config.username, config.password, config.local_dc) == ("u", "p", "dc1")
    assert config.concurrency == 7
    assert "password" not in repr(config)


def test_row_helpers() -> None:
    h = url_hash("https://example.org/")
    assert len(h) == 32 and h == url_hash("https://example.org/")
    assert 0 <= origin_bucket(h) < 64
    assert micros(1.5) == 1_500_000
