"""The ``>>>`` examples in the packages' docstrings run, so they cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import streamcrawl.agents
import streamcrawl.schemas
import streamcrawl.topology

MODULES = sorted(
    info.name
    for package in (streamcrawl.agents, streamcrawl.topology, streamcrawl.schemas)
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
)


@pytest.mark.parametrize("name", MODULES)
def test_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_examples_are_found() -> None:
    """The examples that exist are collected (a broken walk would pass every module)."""
    found = {
        name: doctest.testmod(importlib.import_module(name)).attempted
        for name in ("streamcrawl.agents.robots.rules", "streamcrawl.agents.content.charset")
    }
    assert all(found.values()), found
