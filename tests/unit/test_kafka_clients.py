"""One Kafka client configuration (topology/worker/clients.py): what each client library gets."""

from __future__ import annotations

import ast
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
from faust.auth import SASLCredentials, SSLCredentials
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth
from pydantic import SecretStr

from streamcrawl.agents.errors import ConfigError
from streamcrawl.topology.admin import config as admin_config
from streamcrawl.topology.settings import Settings
from streamcrawl.topology.worker import clients as kafka_clients

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = "10.0.0.1:9093,10.0.0.2:9093"


@pytest.fixture(scope="module")
def cafile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed CA certificate (openssl), as a broker's CA bundle would be."""
    out = tmp_path_factory.mktemp("ca")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-subj", "/CN=streamcrawl-test-ca", "-keyout", str(out / "ca.key")),
            *("-out", str(out / "ca.pem")),
        ],
        check=True,
        capture_output=True,
    )
    return out / "ca.pem"


def settings(**kw: Any) -> Settings:
    return Settings(kafka_bootstrap=BOOTSTRAP, **kw)


def librdkafka(s: Settings) -> dict[str, Any]:
    conf = admin_config.librdkafka_config(s)
    assert callable(conf.pop("logger").log)  # librdkafka's lines go to logging, not stderr
    return conf


def test_plaintext() -> None:
    s = settings()
    assert kafka_clients.aiokafka_connection(s) == {
        "bootstrap_servers": BOOTSTRAP,
        "security_protocol": "PLAINTEXT",
    }
    assert kafka_clients.faust_credentials(s) is None
    assert librdkafka(s) == {"bootstrap.servers": BOOTSTRAP, "security.protocol": "PLAINTEXT"}


def test_sasl_plaintext() -> None:
    s = settings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username="crawler",
        kafka_sasl_password=SecretStr("s3cret"),
    )
    conn = kafka_clients.aiokafka_connection(s)
    assert conn == sasl_connection("SASL_PLAINTEXT", "PLAIN")
    creds = kafka_clients.faust_credentials(s)
    assert isinstance(creds, SASLCredentials)
    assert faust_auth(creds) == {k: v for k, v in conn.items() if k != "bootstrap_servers"}
    assert librdkafka(s) == {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "crawler",
        "sasl.password": "s3cret",
    }


def test_sasl_ssl_with_scram_sha_512(cafile: Path) -> None:
    s = settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="crawler",
        kafka_sasl_password=SecretStr("s3cret"),
        kafka_ssl_cafile=cafile,
    )
    conn = kafka_clients.aiokafka_connection(s)
    context = conn.pop("ssl_context")
    assert_verifies_with(context, cafile)
    assert conn == sasl_connection("SASL_SSL", "SCRAM-SHA-512")
    creds = kafka_clients.faust_credentials(s)
    assert isinstance(creds, SASLCredentials)
    auth = faust_auth(creds)
    assert_verifies_with(auth.pop("ssl_context"), cafile)
    assert auth == {k: v for k, v in conn.items() if k != "bootstrap_servers"}
    assert librdkafka(s) == {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "crawler",
        "sasl.password": "s3cret",
        "ssl.ca.location": str(cafile),
    }


def test_ssl_with_a_ca_file(cafile: Path) -> None:
    s = settings(kafka_security_protocol="SSL", kafka_ssl_cafile=cafile)
    conn = kafka_clients.aiokafka_connection(s)
    assert_verifies_with(conn.pop("ssl_context"), cafile)
    assert conn == {"bootstrap_servers": BOOTSTRAP, "security_protocol": "SSL"}
    creds = kafka_clients.faust_credentials(s)
    assert isinstance(creds, SSLCredentials)
    auth = faust_auth(creds)
    assert_verifies_with(auth.pop("ssl_context"), cafile)
    assert auth == {"security_protocol": "SSL"}
    assert librdkafka(s) == {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SSL",
        "ssl.ca.location": str(cafile),
    }


def test_ssl_without_a_ca_file_verifies_with_the_system_cas() -> None:
    s = settings(kafka_security_protocol="SSL")
    context = kafka_clients.aiokafka_connection(s)["ssl_context"]
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert "ssl.ca.location" not in librdkafka(s)


def test_producers_partition_like_faust() -> None:
    conf = admin_config.librdkafka_producer_config(settings(max_message_bytes=2**21))
    assert conf["partitioner"] == "murmur2_random"
    assert (conf["acks"], conf["enable.idempotence"]) == ("all", True)
    assert conf["message.max.bytes"] == 2**21 and conf["bootstrap.servers"] == BOOTSTRAP


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"kafka_security_protocol": "SASL_SSL"}, "set STREAMCRAWL_KAFKA_SASL_MECHANISM, "),
        (
            {"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": "PLAIN"},
            "set STREAMCRAWL_KAFKA_SASL_USERNAME, STREAMCRAWL_KAFKA_SASL_PASSWORD",
        ),
        ({"kafka_sasl_mechanism": "PLAIN"}, "use SASL_PLAINTEXT or SASL_SSL"),
        ({"kafka_ssl_cafile": Path("ca.pem")}, "use SSL or SASL_SSL"),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_cafile": Path("/nonexistent/ca.pem")},
            "STREAMCRAWL_KAFKA_SSL_CAFILE /nonexistent/ca.pem",
        ),
    ],
)
def test_settings_that_cannot_work_are_refused(kw: dict[str, Any], message: str) -> None:
    s = settings(**kw)
    for build in (
        kafka_clients.aiokafka_connection,
        kafka_clients.faust_credentials,
        admin_config.librdkafka_config,
    ):
        with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
            build(s)


def test_the_password_is_a_secret_until_a_client_is_built() -> None:
    s = settings(
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username="crawler",
        kafka_sasl_password="s3cret",  # type: ignore[arg-type]  # as from the environment
    )
    assert isinstance(s.kafka_sasl_password, SecretStr)
    assert "s3cret" not in repr(s) and "s3cret" not in str(s)
    assert "s3cret" not in repr(kafka_clients.faust_credentials(s))


ALLOWED_READERS = (
    "topology/admin/config.py",
    "topology/worker/clients.py",
    "topology/settings.py",
    "topology/admin/errors.py",
)


def test_no_other_module_reads_the_kafka_client_settings() -> None:
    """Only worker.clients turns the Kafka connection settings into client arguments
    (admin.errors reads the protocol, user and mechanism only to name them in its errors)."""
    fields = {f for f in Settings.model_fields if f.startswith("kafka_")}
    readers: dict[str, set[str]] = {}
    for folder in ("agents", "topology", "schemas", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            if str(path.relative_to(ROOT)) in ALLOWED_READERS:
                continue
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in fields - {"kafka_bootstrap"}:
                    readers.setdefault(str(path.relative_to(ROOT)), set()).add(node.attr)
    assert readers == {}


def sasl_connection(protocol: str, mechanism: str) -> dict[str, str]:
    return {
        "bootstrap_servers": BOOTSTRAP,
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "crawler",
        "sasl_plain_password": "s3cret",
    }


def faust_auth(creds: Any) -> dict[str, Any]:
    """The aiokafka arguments Faust's driver makes of ``creds`` (None values dropped)."""
    return {k: v for k, v in credentials_to_aiokafka_auth(creds).items() if v is not None}


def assert_verifies_with(context: ssl.SSLContext, cafile: Path) -> None:
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    subjects = [dict(x[0] for x in ca["subject"]) for ca in context.get_ca_certs()]
    assert {"commonName": "streamcrawl-test-ca"} in subjects, subjects
