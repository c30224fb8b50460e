"""Shared test configuration. Add project-wide fixtures below.

The real-services plugin (Kafka/Cassandra endpoints, per-test topics/groups/keyspaces, the CI
rule that a skip is a failure) lives in tests/services.py; see its docstring.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Registered here rather than with `pytest_plugins`, which pytest rejects in a conftest
    # below the rootdir when it is loaded late (e.g. `pytest tests/unit/...` with other paths).
    if not config.pluginmanager.has_plugin("tests.services"):
        config.pluginmanager.import_plugin("tests.services")
