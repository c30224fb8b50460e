"""Cassandra TLS settings: the context, and the CA files and combinations refused."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.sinks.cassandra.security import ssl_context
from streamcrawl.topology.settings import load_settings


def test_no_tls_by_default() -> None:
    assert ssl_context(load_settings().cassandra_config()) is None


def test_tls_verifies_the_certificate_and_the_host_name() -> None:
    context = ssl_context(load_settings(cassandra_ssl=True).cassandra_config())
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_a_ca_file_that_cannot_be_loaded_is_a_config_error(tmp_path: Path) -> None:
    missing = load_settings(cassandra_ssl=True, cassandra_ssl_cafile=tmp_path / "none.pem")
    with pytest.raises(ConfigError, match=r"STREAMCRAWL_CASSANDRA_SSL_CAFILE=.*No such file"):
        ssl_context(missing.cassandra_config())
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    bad = load_settings(cassandra_ssl=True, cassandra_ssl_cafile=tmp_path / "bad.pem")
    with pytest.raises(ConfigError, match="cannot load it as a PEM CA bundle"):
        ssl_context(bad.cassandra_config())


def test_a_ca_file_without_tls_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="STREAMCRAWL_CASSANDRA_SSL is not true"):
        load_settings(cassandra_ssl_cafile=tmp_path / "ca.pem")
