"""Passwords stay out of every repr and error message of the settings and the clients built from
them (tests/integration/test_secrets.py searches what whole processes write)."""

from __future__ import annotations

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.topology.settings import load_settings
from streamcrawl.topology.worker import clients as kafka_clients

CANARY = "canary-5f0c1e7d2b"
SECRETS = {
    "kafka_security_protocol": "SASL_PLAINTEXT",
    "kafka_sasl_mechanism": "SCRAM-SHA-512",
    "kafka_sasl_username": "crawler",
    "kafka_sasl_password": CANARY,
    "cassandra_username": "crawler",
    "cassandra_password": CANARY,
}


def test_settings_reprs_and_dumps_hide_the_passwords() -> None:
    settings = load_settings(**SECRETS)
    assert settings.kafka_sasl_password is not None
    assert settings.kafka_sasl_password.get_secret_value() == CANARY  # it is there...
    for text in (
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        repr(settings.model_dump()),
    ):
        assert CANARY not in text  # ...but never shown
    assert CANARY not in repr(settings.cassandra_config())
    credentials = kafka_clients.faust_credentials(settings)
    assert CANARY not in repr(credentials) and CANARY not in str(credentials)


@pytest.mark.parametrize(
    "bad",
    [
        {"partitions": "zero"},  # a bad value next to the secrets
        {"kafka_sasl_pasword": CANARY},  # a misspelt setting carrying the secret itself
        {"kafka_sasl_password": [CANARY]},  # a secret of the wrong type
        {"cassandra_ssl_cafile": "/ca.pem"},  # a rule over several settings
    ],
)
def test_validation_errors_never_quote_a_password(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(**{**SECRETS, **bad})
    assert CANARY not in str(exc.value)
    # No chained ValidationError either: it quotes the input (an error reporter would show it).
    assert exc.value.__cause__ is None and exc.value.__context__ is None
