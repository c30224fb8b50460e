"""A bad setting's error names where the value came from: the flag if it was one, else the
environment variable (most settings have no flag)."""

from __future__ import annotations

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.topology.settings import load_settings


def test_a_bad_flag_is_named_as_the_flag() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(partitions=0)
    assert str(err.value).startswith("invalid setting --partitions (STREAMCRAWL_PARTITIONS): ")


def test_a_bad_environment_variable_names_no_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMCRAWL_TABLE_MEMORY_MB", "1")
    with pytest.raises(ConfigError) as err:
        load_settings()
    message = str(err.value)
    assert message.startswith("invalid setting STREAMCRAWL_TABLE_MEMORY_MB: ")
    assert "--" not in message
