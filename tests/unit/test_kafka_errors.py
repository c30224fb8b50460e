"""The one-line explanations of a Kafka connection that failed for a security reason."""

from __future__ import annotations

from confluent_kafka import KafkaError

from streamcrawl.topology.admin.errors import ConnectionErrors
from streamcrawl.topology.settings import load_settings

SASL_SSL = load_settings(
    kafka_bootstrap="127.0.0.1:9093",
    kafka_security_protocol="SASL_SSL",
    kafka_sasl_mechanism="SCRAM-SHA-512",
    kafka_sasl_username="crawler",
    kafka_sasl_password="s3cret",
)


def explained(*errors: KafkaError) -> str | None:
    recorder = ConnectionErrors()
    for err in errors:
        recorder(err)
    failure = recorder.failure(SASL_SSL)
    return None if failure is None else str(failure)


def test_errors_that_explain_nothing_are_not_kept() -> None:
    assert explained(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")) is None
    assert explained(KafkaError(KafkaError._TRANSPORT, "Connection refused")) is None


def test_refused_credentials_name_the_user_and_the_settings_not_the_password() -> None:
    line = explained(
        KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
        KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials"),
    )
    assert line is not None
    assert "refused the SASL credentials of user 'crawler' (SCRAM-SHA-512)" in line
    assert "STREAMCRAWL_KAFKA_SASL_PASSWORD" in line and "s3cret" not in line


def test_an_untrusted_certificate_points_at_the_ca_file() -> None:
    reason = (
        "sasl_ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL "
        "routines::certificate verify failed: broker certificate could not be verified, verify "
        "that ssl.ca.location is correctly configured (after 3ms in state SSL_HANDSHAKE)"
    )
    line = explained(KafkaError(KafkaError._SSL, reason))
    assert line is not None
    assert "certificate is not trusted (certificate verify failed)" in line
    assert "STREAMCRAWL_KAFKA_SSL_CAFILE" in line


def test_another_tls_failure_asks_about_the_protocol() -> None:
    line = explained(KafkaError(KafkaError._SSL, "SSL handshake failed: wrong version number"))
    assert line is not None
    assert "does the broker speak SASL_SSL on this port?" in line


def test_the_first_explaining_error_wins() -> None:
    line = explained(
        KafkaError(KafkaError._AUTHENTICATION, "invalid credentials"),
        KafkaError(KafkaError._SSL, "certificate verify failed"),
    )
    assert line is not None and "SASL credentials" in line
